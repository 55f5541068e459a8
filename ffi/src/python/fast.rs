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

/// Makes the wake-ups of one asyncio event loop (see `polled`): their id (>= 1), or -1 (the
/// error is stashed). Free them with [`redlock_python_free_loop`].
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_new_loop() -> i64 {
    answer(|| Ok(polled::new_loop()? as i64))
}

/// The descriptor of a loop's wake-ups, for its `add_reader` (-1: unknown id).
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_loop_fd(wakeups: u64) -> i32 {
    answer(|| polled::loop_fd(wakeups))
}

/// Takes up to `capacity` ids of the loop's calls woken since it last looked into `out`; returns
/// how many (ask again while it fills `out`), or -1 (stashed). A call may appear twice.
///
/// # Safety
/// `out` must point to `capacity` writable `u64`s (it may be null when `capacity` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_python_take_woken(
    wakeups: u64,
    out: *mut u64,
    capacity: usize,
) -> i64 {
    answer(|| {
        if out.is_null() && capacity > 0 {
            return Err(NativeError::invalid("out is null"));
        }
        let out: &mut [u64] = if capacity == 0 {
            &mut []
        } else {
            // SAFETY: the caller passes `capacity` writable u64s at `out` (see above).
            unsafe { std::slice::from_raw_parts_mut(out, capacity) }
        };
        Ok(polled::take_woken(wakeups, out)? as i64)
    })
}

/// Frees a loop's wake-ups (its descriptor closes once no call started with it runs). Harmless
/// for an unknown or freed id.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_free_loop(wakeups: u64) {
    let _: i8 = answer(|| {
        polled::free_loop(wakeups);
        Ok(0)
    });
}

/// Starts an acquire that the calling asyncio loop polls (see `polled`), woken through the
/// loop's wake-ups `wakeups` (0: none, for a loop that waits in [`redlock_python_sleep`]): the
/// call's id (>= 1), or -1 when it could not start (the error is stashed). The other arguments
/// are [`redlock_python_acquire`]'s; end the call with [`redlock_python_end`].
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_start_acquire(
    lock: u64,
    owner: u64,
    wait: f64,
    lease: f64,
    wakeups: u64,
) -> i64 {
    answer(|| {
        let lock = NativeLock::by_id(lock)?;
        Ok(lock.start_acquire_polled(owner, wait, lease, wakeups)? as i64)
    })
}

/// Starts a release that the calling asyncio loop polls (see
/// [`redlock_python_start_acquire`]): the call's id (>= 1), or -1 (the error is stashed). End
/// the call with [`redlock_python_end`].
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_start_release(lock: u64, owner: u64, wakeups: u64) -> i64 {
    answer(|| Ok(NativeLock::by_id(lock)?.start_release_polled(owner, wakeups)? as i64))
}

/// Polls the call with id `call` once: -2 while it runs (poll again once its loop's wake-ups
/// name it), its outcome when it finished (an acquire: 1; a release: the holds left, >= 0),
/// or -1 when it failed (the error, `Timeout` included, is stashed). The outcome comes once.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_drive(call: u64) -> i64 {
    answer(|| Ok(polled::drive(call)?.map_or(-2, i64::from)))
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
        assert_eq!(redlock_python_start_acquire(0, 1, 0.0, -1.0, 0), -1);
        assert!(stashed().unwrap().contains("no live lock with id 0"));
        assert_eq!(redlock_python_start_release(u64::MAX, 1, 0), -1);
        assert!(stashed().unwrap().starts_with("InvalidArgument("));
    }

    #[test]
    fn unknown_calls_are_invalid_arguments_and_ending_one_is_harmless() {
        assert_eq!(redlock_python_drive(u64::MAX), -1);
        assert!(stashed().unwrap().contains("no running call with id"));
        assert_eq!(redlock_python_sleep(0, 0.0), -1);
        assert!(stashed().unwrap().starts_with("InvalidArgument("));
        redlock_python_end(0);
        redlock_python_end(u64::MAX);
        assert_eq!(stashed(), None);
    }

    #[test]
    fn a_loop_s_wake_ups_are_named_by_id_until_freed() {
        let id = redlock_python_new_loop();
        assert!(id >= 1);
        let id = id as u64;
        assert!(redlock_python_loop_fd(id) >= 0);
        let mut out = [0_u64; 4];
        // SAFETY: `out` holds 4 u64s; a null `out` is only passed with capacity 0.
        unsafe {
            assert_eq!(redlock_python_take_woken(id, out.as_mut_ptr(), 4), 0);
            assert_eq!(redlock_python_take_woken(id, std::ptr::null_mut(), 0), 0);
            assert_eq!(redlock_python_take_woken(id, std::ptr::null_mut(), 4), -1);
        }
        assert!(stashed().unwrap().contains("out is null"));
        redlock_python_free_loop(id);
        redlock_python_free_loop(id);
        assert_eq!(redlock_python_loop_fd(id), -1);
        assert!(
            stashed()
                .unwrap()
                .contains("no event loop wake-ups with id")
        );
    }
}
