//! Holds: what one acquisition returned, and waiting for its loss.

use std::sync::Arc;

use redlock_core::{Hold, blocking};

use super::args::{self, init_out, put};
use super::cancel::CANCELS;
use super::error::{FfiError, rl_error};
use super::guard::guard;
use super::handles::{Kind, Table, free_handle, rl_cancel, rl_hold};
use super::status::rl_status;

pub(crate) static HOLDS: Table<Arc<Hold>> = Table::new(Kind::Hold);

/// Writes what `read` says of the hold to `*out` (a getter's whole body).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
unsafe fn read_hold<T: Default>(
    hold: rl_hold,
    out: *mut T,
    err: *mut rl_error,
    read: impl FnOnce(&Hold) -> T,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        let value = read(&*HOLDS.get(hold.id)?);
        // SAFETY: as above.
        unsafe { put(out, value) };
        Ok(())
    })
}

/// The hold's fencing token (`*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_hold_fencing_token(
    hold: rl_hold,
    out: *mut u64,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: per this function's contract.
    unsafe { read_hold(hold, out, err, |hold| hold.fencing_token()) }
}

/// The owner's hold count right after this acquisition (`*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_hold_count(
    hold: rl_hold,
    out: *mut u32,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: per this function's contract.
    unsafe { read_hold(hold, out, err, |hold| hold.hold_count()) }
}

/// Whether this hold was found gone from Redis (`*out`): by the watchdog's renewal, by this
/// client's release or force unlock, or by the owner's next acquire of the name, which got a new
/// hold where this one should have been re-entered. Always false for a hold with a fixed lease:
/// nothing watches it (ask `rl_lock_is_held_by` instead).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_hold_is_lost(
    hold: rl_hold,
    out: *mut bool,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: per this function's contract.
    unsafe { read_hold(hold, out, err, |hold| hold.is_lost()) }
}

/// Whether the client's watchdog still keeps this hold alive (`*out`): false once a release
/// ended it (the owner's last hold count), once it is found lost, and after the client is
/// closed. Always false for a hold with a fixed lease. Once false, `rl_hold_is_lost` no longer
/// changes: a binding that keeps per-hold state can drop it.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_hold_is_watched(
    hold: rl_hold,
    out: *mut bool,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: per this function's contract.
    unsafe { read_hold(hold, out, err, |hold| hold.is_watched()) }
}

/// Blocks until this hold is found lost (see `rl_hold_is_lost`; `*out_lost` = true), or
/// `timeout_ms` passes (false; `RL_WAIT_FOREVER`: no limit), or `cancel` is triggered
/// (`RL_CANCELLED`; a zero handle: not cancellable). After the hold is released it is never reported lost: a wait then
/// ends only by timeout or cancel. A hold with a fixed lease is not watched: this returns
/// `RL_INVALID_ARGUMENT` at once.
///
/// # Safety
/// `out_lost` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_hold_wait_lost(
    hold: rl_hold,
    timeout_ms: i64,
    cancel: rl_cancel,
    out_lost: *mut bool,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { put(out_lost, false) };
        let timeout = args::wait(timeout_ms, "timeout_ms")?;
        let hold = HOLDS.get(hold.id)?;
        let cancel = CANCELS.get_optional(cancel.id)?;
        if hold.lease().is_some() {
            return Err(FfiError::invalid(
                "the hold has a fixed lease, so nothing watches it: it is never reported lost \
                 (check rl_lock_is_held_by instead)",
            ));
        }
        let lost = blocking::block_on(async move {
            let lost = async {
                match timeout {
                    Some(limit) => tokio::time::timeout(limit, hold.lost()).await.is_ok(),
                    None => {
                        hold.lost().await;
                        true
                    }
                }
            };
            blocking::cancellable(cancel.as_ref(), async { Ok(lost.await) }).await
        })?;
        // SAFETY: as above.
        unsafe { put(out_lost, lost) };
        Ok(())
    })
}

/// Frees the hold handle at `*hold` and sets it to zero. This does NOT release the lock (use
/// `rl_lock_release`). A zero handle is a no-op.
///
/// # Safety
/// `hold` is NULL or points to an `rl_hold`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_hold_free(hold: *mut rl_hold, err: *mut rl_error) -> rl_status {
    // SAFETY: rl_hold is a repr(C) struct of one u64.
    guard(err, || {
        unsafe { free_handle(&HOLDS, hold.cast()) }.map(drop)
    })
}
