//! Acquires that wait without holding the caller's thread: `rl_lock_acquire_start` makes the
//! first attempt on the calling thread and, when the lock is taken, leaves the wait to the
//! library's runtime as an `rl_pending` (the core's `blocking::PendingAcquire`), which calls
//! back once its outcome is ready. For callers with many concurrent waiters (Go's goroutines,
//! event loops), which would otherwise park one OS thread per waiter.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use redlock_core::blocking::{self, Started};

use super::args::{self, put, require_out};
use super::cancel::CANCELS;
use super::error::rl_error;
use super::guard::guard;
use super::handles::{Kind, Table, free_handle, rl_cancel, rl_hold, rl_lock, rl_owner, rl_pending};
use super::lock::{LOCKS, acquire_options, put_hold, rl_acquired};
use super::owner::OWNERS;
use super::status::rl_status;

pub(crate) static PENDING: Table<Arc<blocking::PendingAcquire>> = Table::new(Kind::Pending);

/// Called once when a pending acquire's outcome is ready (then `rl_pending_wait` with a zero
/// timeout hands it out): on a library thread, or on the caller's own thread inside
/// `rl_lock_acquire_start` when the outcome was ready before it returned. Must return promptly,
/// must not wait for the library (no `rl_pending_wait` with a timeout, no acquire) and must not
/// unwind (no C++ exceptions, no Go panics) into the library.
pub type rl_pending_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// The user data of a callback, kept as an integer: the library only hands it back, and the
/// caller vouches that it may be used from another thread.
struct UserData(usize);

/// Starts an acquire that waits without holding this thread. The arguments up to `label` are
/// those of `rl_lock_acquire_ex`. The first attempt runs on this thread, which then waits at
/// most `first_wait_ms` (0: not at all) for the lock.
///
/// - Acquired by then: `RL_OK`, `out_pending->id` is 0, and `*out` / `*out_hold` are filled as
///   by `rl_lock_acquire_ex`.
/// - Still waiting: `RL_OK` and `*out_pending` is set. The wait goes on in the library (keeping
///   its place in the queue); `on_done` (may be NULL) is then called once with `user_data` when
///   its outcome is ready, even if the pending acquire was cancelled or freed meanwhile, and
///   possibly before this function returns. Collect the outcome with `rl_pending_wait`, then
///   free the handle with `rl_pending_free`. `cancel` ends the wait with `RL_CANCELLED`.
/// - Any other status: the acquire failed (as with `rl_lock_acquire_ex`) and nothing is pending.
///
/// # Safety
/// `label` is NULL or a NUL-terminated string; `out`, `out_hold`, `out_pending` and `err` are
/// NULL or valid for writes (`out_pending` must not be NULL); `on_done` is NULL or a function
/// that may be called from any thread with `user_data`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn rl_lock_acquire_start(
    lock: rl_lock,
    owner: rl_owner,
    wait_ms: i64,
    lease_ms: i64,
    cancel: rl_cancel,
    label: *const c_char,
    first_wait_ms: i64,
    on_done: rl_pending_fn,
    user_data: *mut c_void,
    out: *mut rl_acquired,
    out_hold: *mut rl_hold,
    out_pending: *mut rl_pending,
    err: *mut rl_error,
) -> rl_status {
    let user_data = UserData(user_data as usize);
    guard(err, || {
        // Outputs are reset first: a failed start never leaves a stale token or handle behind.
        // SAFETY: per this function's contract.
        unsafe {
            put(out, rl_acquired::default());
            put(out_hold, rl_hold::default());
            put(out_pending, rl_pending::default());
        }
        require_out(out_pending, "out_pending")?;
        let first_wait = match first_wait_ms {
            0 => Duration::ZERO,
            ms => args::positive(ms, "first_wait_ms")?,
        };
        // SAFETY: as above.
        let options = unsafe { acquire_options(wait_ms, lease_ms, label) }?;
        let lock = LOCKS.get(lock.id)?;
        let owner = OWNERS.get(owner.id)?;
        let cancel = CANCELS.get_optional(cancel.id)?;
        match lock
            .view()
            .start_acquire(&owner, options, cancel.as_ref(), first_wait)?
        {
            // SAFETY: as above.
            Started::Acquired(hold) => unsafe { put_hold(hold, out, out_hold) },
            Started::Waiting(pending) => {
                if let Some(function) = on_done {
                    pending.on_finished(move || {
                        let UserData(user_data) = user_data;
                        // SAFETY: the caller vouches for `on_done` and `user_data`.
                        unsafe { function(user_data as *mut c_void) }
                    });
                }
                let id = PENDING.insert(Arc::new(pending));
                // SAFETY: as above.
                unsafe { put(out_pending, rl_pending { id }) };
            }
        }
        Ok(())
    })
}

/// Waits up to `timeout_ms` (0: only looks; `RL_WAIT_FOREVER`: until the end) for a pending
/// acquire's outcome. `*out_done` says whether it is over. Still waiting: `RL_OK` and
/// `*out_done` false. Acquired: `RL_OK`, `*out_done` true, `*out` and `*out_hold` (each may be
/// NULL) filled as by `rl_lock_acquire_ex`. Failed: the acquire's status (`RL_TIMEOUT` when its
/// own wait ran out, `RL_CANCELLED`, ...) and `*out_done` true. The outcome is handed out once:
/// asking again is `RL_INVALID_ARGUMENT`. Once the acquire was given up (`rl_pending_cancel`, or
/// `rl_pending_free` from another thread while this one waits) it is `RL_CANCELLED`.
///
/// # Safety
/// `out_done`, `out`, `out_hold` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_pending_wait(
    pending: rl_pending,
    timeout_ms: i64,
    out_done: *mut bool,
    out: *mut rl_acquired,
    out_hold: *mut rl_hold,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe {
            put(out_done, false);
            put(out, rl_acquired::default());
            put(out_hold, rl_hold::default());
        }
        let timeout = args::wait(timeout_ms, "timeout_ms")?;
        let pending = PENDING.get(pending.id)?;
        let outcome = match timeout {
            Some(timeout) => pending.wait(timeout),
            // No limit: in slices, since a Condvar takes a finite timeout.
            None => loop {
                match pending.wait(Duration::from_secs(3600)) {
                    Ok(None) => continue,
                    other => break other,
                }
            },
        };
        let done = !matches!(outcome, Ok(None));
        // SAFETY: as above.
        unsafe { put(out_done, done) };
        if let Some(hold) = outcome? {
            // SAFETY: as above.
            unsafe { put_hold(hold, out, out_hold) };
        }
        Ok(())
    })
}

/// Gives up a pending acquire: a running wait ends (its outcome becomes `RL_CANCELLED`;
/// nothing is left in Redis) and a hold it acquired but that was not collected is released.
/// The `on_done` callback still runs once. Harmless once the outcome was collected.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_pending_cancel(pending: rl_pending, err: *mut rl_error) -> rl_status {
    guard(err, || {
        PENDING.get(pending.id)?.cancel();
        Ok(())
    })
}

/// Frees the handle at `*pending` and sets it to zero; an outcome not collected yet is given up
/// as by `rl_pending_cancel`. A zero handle is a no-op.
///
/// # Safety
/// `pending` is NULL or points to an `rl_pending`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_pending_free(
    pending: *mut rl_pending,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: rl_pending is a repr(C) struct of one u64.
        let freed = unsafe { free_handle(&PENDING, pending.cast()) }?;
        // Give up at once, even if another thread still has the object for a moment.
        if let Some(pending) = freed {
            pending.cancel();
        }
        Ok(())
    })
}
