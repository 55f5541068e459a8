//! Python's hot calls, acquire and release (sync, and asyncio's polled calls of `polled`), as
//! plain C functions that the Python layer calls through ctypes (`redlock_sdk/_fast.py`).
//!
//! Why: the generated UniFFI wrapper of a method costs Python more than the lock's own client
//! work (one FFI call to clone the object's handle, a check and a conversion per argument, a
//! call-status structure built per call: together ~20 µs of CPU per call on the bench machine,
//! against a whole acquire+release cycle of ~120 µs). These take numbers (the lock's and the
//! owner's ids), return one number, and cost one FFI call. They do exactly what
//! [`NativeLock::acquire`] and [`NativeLock::release`] do.
//!
//! Errors: a call that fails returns -1 and keeps its error for the calling thread;
//! [`raise_stashed_error`] (a UniFFI function, so the error arrives as the usual `NativeError`
//! exception) hands it over once. A later failing call on the thread replaces an error never
//! asked for. A panic becomes `NativeError::Internal`, never an unwind into Python.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::error::{NativeError, seconds};
use super::lock::NativeLock;
use super::polled;
use crate::panics::panic_message;

thread_local! {
    static STASHED: RefCell<Option<NativeError>> = const { RefCell::new(None) };
}

/// [`NativeLock::acquire`] of the lock with id `lock` for the owner with id `owner`: 1 when
/// acquired (the hold is the caller's), 0 when still waiting (parked under `ticket`), -1 when it
/// failed (the error is stashed, see the module docs).
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_acquire(
    lock: u64,
    owner: u64,
    wait: f64,
    lease: f64,
    first_wait: f64,
    ticket: u64,
) -> i8 {
    answer(|| {
        let acquired = NativeLock::by_id(lock)?.acquire(owner, wait, lease, first_wait, ticket)?;
        Ok(i8::from(acquired))
    })
}

/// [`NativeLock::release`] of the lock with id `lock` for the owner with id `owner`: the holds
/// the owner has left in this mode (>= 0), or -1 when it failed (the error is stashed).
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_release(lock: u64, owner: u64) -> i64 {
    answer(|| Ok(i64::from(NativeLock::by_id(lock)?.release(owner)?)))
}

/// Starts an acquire that the calling asyncio loop polls (see `polled`): the call's id (>= 1),
/// or -1 when it could not start (the error is stashed). Arguments as for
/// [`redlock_python_acquire`]; end the call with [`redlock_python_end`].
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_start_acquire(
    lock: u64,
    owner: u64,
    wait: f64,
    lease: f64,
) -> i64 {
    answer(|| {
        let id = NativeLock::by_id(lock)?.start_acquire_polled(owner, wait, lease)?;
        Ok(id as i64)
    })
}

/// Starts a release that the calling asyncio loop polls (see `polled`): the call's id (>= 1),
/// or -1 (the error is stashed). End the call with [`redlock_python_end`].
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_start_release(lock: u64, owner: u64) -> i64 {
    answer(|| Ok(NativeLock::by_id(lock)?.start_release_polled(owner)? as i64))
}

/// Polls the call with id `call` once: -2 while it runs (poll again once its descriptor is
/// readable), its outcome when it finished (an acquire: 1; a release: the holds left, >= 0),
/// or -1 when it failed (the error, `Timeout` included, is stashed). The outcome comes once.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_drive(call: u64) -> i64 {
    answer(|| Ok(polled::drive(call)?.map_or(-2, i64::from)))
}

/// The descriptor of the call's wake-ups, for the loop's `add_reader` (-1: unknown call).
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_wake_fd(call: u64) -> i32 {
    answer(|| polled::wake_fd(call))
}

/// Blocks up to `timeout` seconds for a wake-up of the call (loops that cannot watch a
/// descriptor wait so in an executor thread): 1 woken, 0 not, -1 failed (stashed).
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_sleep(call: u64, timeout: f64) -> i8 {
    answer(|| {
        let timeout = seconds("timeout", timeout)?.min(std::time::Duration::from_secs(3600));
        Ok(i8::from(polled::sleep(call, timeout)?))
    })
}

/// Ends the call: an unfinished acquire is cancelled (nothing is left in Redis), an unfinished
/// release runs to its end in the background. Harmless for an unknown or ended call.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_end(call: u64) {
    let _: i8 = answer(|| {
        polled::end(call);
        Ok(0)
    });
}

/// Raises the error of this thread's last failed fast call (once); nothing when there is none.
#[uniffi::export]
pub fn raise_stashed_error() -> Result<(), NativeError> {
    match STASHED.with(|stashed| stashed.borrow_mut().take()) {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// Runs `call`; on an error or a panic, stashes the error and returns -1.
fn answer<T: From<i8>>(call: impl FnOnce() -> Result<T, NativeError>) -> T {
    // AssertUnwindSafe: after a panic only its message is read.
    let outcome = catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|panic| {
        Err(NativeError::internal(format!(
            "internal error (a bug in libredlock, please report it): {}",
            panic_message(&*panic)
        )))
    });
    outcome.unwrap_or_else(|err| {
        STASHED.with(|stashed| *stashed.borrow_mut() = Some(err));
        T::from(-1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stashed() -> Option<String> {
        raise_stashed_error().err().map(|e| format!("{e:?}"))
    }

    #[test]
    fn an_error_is_stashed_once_and_a_success_leaves_none() {
        assert_eq!(answer(|| Ok(7_i64)), 7);
        assert_eq!(stashed(), None);
        let failed: i64 = answer(|| Err(NativeError::invalid("first")));
        assert_eq!(failed, -1);
        let _: i8 = answer(|| Err(NativeError::invalid("second")));
        assert_eq!(stashed().as_deref(), Some("InvalidArgument(\"second\")"));
        assert_eq!(stashed(), None);
    }

    #[test]
    fn a_panic_becomes_an_internal_error() {
        let failed: i8 = answer(|| panic!("boom in the call"));
        assert_eq!(failed, -1);
        let message = stashed().unwrap();
        assert!(message.starts_with("Internal(") && message.contains("boom in the call"));
    }

    #[test]
    fn unknown_ids_are_invalid_arguments() {
        assert_eq!(redlock_python_release(u64::MAX, 1), -1);
        let message = stashed().unwrap();
        assert!(message.contains("no live lock with id"), "{message}");
        assert_eq!(redlock_python_acquire(0, 1, 0.0, -1.0, 0.0, 1), -1);
        assert!(stashed().unwrap().starts_with("InvalidArgument("));
        assert_eq!(redlock_python_start_acquire(0, 1, 0.0, -1.0), -1);
        assert!(stashed().unwrap().contains("no live lock with id 0"));
        assert_eq!(redlock_python_start_release(u64::MAX, 1), -1);
        assert!(stashed().unwrap().starts_with("InvalidArgument("));
    }

    #[test]
    fn unknown_calls_are_invalid_arguments_and_ending_one_is_harmless() {
        assert_eq!(redlock_python_drive(u64::MAX), -1);
        assert!(stashed().unwrap().contains("no running call with id"));
        assert_eq!(redlock_python_wake_fd(0), -1);
        assert!(stashed().unwrap().starts_with("InvalidArgument("));
        assert_eq!(redlock_python_sleep(0, 0.0), -1);
        assert!(stashed().unwrap().starts_with("InvalidArgument("));
        redlock_python_end(0);
        redlock_python_end(u64::MAX);
        assert_eq!(stashed(), None);
    }
}
