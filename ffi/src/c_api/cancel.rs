//! Cancel tokens: end a waiting acquire (or a wait for loss) from another thread.

use redlock_core::blocking::CancelToken;

use super::args::{init_out, put};
use super::error::rl_error;
use super::guard::guard;
use super::handles::{Kind, Table, free_handle, rl_cancel};
use super::status::rl_status;

pub(crate) static CANCELS: Table<CancelToken> = Table::new(Kind::Cancel);

/// Creates a cancel token. Pass it to `rl_lock_acquire_ex`, `rl_hold_wait_lost` or
/// `rl_client_connect_ex`; calling `rl_cancel_trigger` from any thread then ends those waits
/// with `RL_CANCELLED`, leaving nothing behind in Redis. A triggered token stays triggered: use
/// a new one for the next wait.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_cancel_new(out: *mut rl_cancel, err: *mut rl_error) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        let id = CANCELS.insert(CancelToken::new());
        // SAFETY: as above.
        unsafe { put(out, rl_cancel { id }) };
        Ok(())
    })
}

/// Triggers the token: every wait given this token ends with `RL_CANCELLED` (an acquire that
/// already succeeded is not undone). Thread-safe; triggering twice is harmless.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_cancel_trigger(cancel: rl_cancel, err: *mut rl_error) -> rl_status {
    guard(err, || {
        CANCELS.get(cancel.id)?.cancel();
        Ok(())
    })
}

/// Whether the token was triggered (`*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_cancel_is_triggered(
    cancel: rl_cancel,
    out: *mut bool,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        let triggered = CANCELS.get(cancel.id)?.is_cancelled();
        // SAFETY: as above.
        unsafe { put(out, triggered) };
        Ok(())
    })
}

/// Frees the token at `*cancel` and sets it to zero. A wait still using it keeps working (and
/// can no longer be cancelled). A zero handle is a no-op.
///
/// # Safety
/// `cancel` is NULL or points to an `rl_cancel`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_cancel_free(cancel: *mut rl_cancel, err: *mut rl_error) -> rl_status {
    // SAFETY: rl_cancel is a repr(C) struct of one u64.
    guard(err, || {
        unsafe { free_handle(&CANCELS, cancel.cast()) }.map(drop)
    })
}
