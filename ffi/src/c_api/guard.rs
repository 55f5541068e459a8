//! The wrapper around every exported function: panics never cross into C, and every outcome is
//! a status code plus, optionally, an `rl_error`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::panics::panic_message;

use super::error::{FfiError, FfiResult, report, rl_error};
use super::status::rl_status;

/// Runs `body`, turns a panic into `RL_INTERNAL`, reports the outcome into `err` and returns
/// its status.
pub(crate) fn guard(err: *mut rl_error, body: impl FnOnce() -> FfiResult<()>) -> rl_status {
    // AssertUnwindSafe: after a panic we only report it; no state the body touched is read again
    // (shared state lives behind poison-tolerant locks in the handle tables).
    let outcome = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(panic) => Err(FfiError::new(
            rl_status::RL_INTERNAL,
            format!(
                "internal error (a bug in libredlock, please report it): {}",
                panic_message(&*panic)
            ),
        )),
    };
    let status = match &outcome {
        Ok(()) => rl_status::RL_OK,
        Err(e) => e.status,
    };
    // Reporting allocates a message; a failure there must not unwind into C either.
    // SAFETY: every exported function documents `err` as NULL or a valid rl_error.
    if catch_unwind(AssertUnwindSafe(|| unsafe { report(err, &outcome) })).is_err() {
        return rl_status::RL_INTERNAL;
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::c_api::strings;

    #[test]
    fn a_panic_becomes_rl_internal_with_its_message() {
        let mut err = rl_error {
            code: rl_status::RL_OK,
            message: std::ptr::null_mut(),
        };
        let status = guard(&mut err, || panic!("boom in the body"));
        assert_eq!(status, rl_status::RL_INTERNAL);
        assert_eq!(err.code, rl_status::RL_INTERNAL);
        // SAFETY: the guard wrote a NUL-terminated message.
        let message = unsafe { std::ffi::CStr::from_ptr(err.message) }
            .to_str()
            .unwrap();
        assert!(message.contains("boom in the body"), "{message}");

        // The next call through the same rl_error frees that message and resets it.
        let live = strings::live();
        assert_eq!(guard(&mut err, || Ok(())), rl_status::RL_OK);
        assert!(err.message.is_null());
        assert_eq!(strings::live(), live - 1);
    }
}
