//! Locks: acquire, release, extend and the queries, on one view of a lock name.

#![allow(non_camel_case_types)]

use std::ffi::c_char;
use std::ptr;
use std::sync::Arc;

use redlock_core::{AcquireOptions, Hold, Mode, blocking};

use super::args::{self, init_out, put, require_out};
use super::cancel::CANCELS;
use super::error::{FfiResult, rl_error};
use super::guard::guard;
use super::handles::{Kind, Table, free_handle, rl_cancel, rl_hold, rl_lock, rl_owner, rl_rwlock};
use super::hold::HOLDS;
use super::inspect::info_json;
use super::owner::OWNERS;
use super::status::{rl_mode, rl_status};
use super::strings;

/// What an `rl_lock` names: the exclusive lock, or one view of a read/write lock.
pub(crate) enum LockObj {
    Exclusive(blocking::Lock),
    View(Arc<blocking::ReadWriteLock>, Mode),
}

impl LockObj {
    pub(crate) fn view(&self) -> &blocking::Lock {
        match self {
            LockObj::Exclusive(lock) => lock,
            LockObj::View(rw, Mode::Read) => rw.read(),
            LockObj::View(rw, Mode::Write) => rw.write(),
        }
    }
}

pub(crate) static LOCKS: Table<Arc<LockObj>> = Table::new(Kind::Lock);
pub(crate) static RWLOCKS: Table<Arc<blocking::ReadWriteLock>> = Table::new(Kind::RwLock);

/// What a successful acquire returns.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rl_acquired {
    /// For one name, strictly increasing over new write (and exclusive) holds; a re-entry gets
    /// the token of the hold it re-enters. It moves backwards only if Redis loses data (failover
    /// to a replica that missed the increment, restart without persistence).
    pub fencing_token: u64,
    /// The owner's hold count in this view right after this acquisition (reentrancy).
    pub hold_count: u32,
}

fn rwlock_view(rw: rl_rwlock, mode: Mode, out: *mut rl_lock) -> FfiResult<()> {
    // SAFETY: callers pass their caller's out-pointer, which is NULL or valid for writes.
    unsafe { init_out(out, "out")? };
    let rw = RWLOCKS.get(rw.id)?;
    let id = LOCKS.insert(Arc::new(LockObj::View(rw, mode)));
    // SAFETY: as above.
    unsafe { put(out, rl_lock { id }) };
    Ok(())
}

/// The shared (read) view of a read/write lock: any number of owners may read at once; no one
/// reads while someone writes. Free with `rl_lock_free`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_rwlock_read(
    rw: rl_rwlock,
    out: *mut rl_lock,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || rwlock_view(rw, Mode::Read, out))
}

/// The exclusive (write) view of a read/write lock. Its owner may also read (downgrade: write,
/// read, release the write). A reader asking to write gets `RL_UPGRADE_NOT_ALLOWED` at once.
/// Free with `rl_lock_free`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_rwlock_write(
    rw: rl_rwlock,
    out: *mut rl_lock,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || rwlock_view(rw, Mode::Write, out))
}

/// Frees the read/write lock handle at `*rw` and sets it to zero. Views taken from it stay valid
/// (free them with `rl_lock_free`); holds stay in Redis. A zero handle is a no-op.
///
/// # Safety
/// `rw` is NULL or points to an `rl_rwlock`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_rwlock_free(rw: *mut rl_rwlock, err: *mut rl_error) -> rl_status {
    // SAFETY: rl_rwlock is a repr(C) struct of one u64.
    guard(err, || {
        unsafe { free_handle(&RWLOCKS, rw.cast()) }.map(drop)
    })
}

/// Acquires the lock for `owner`, blocking up to `wait_ms` milliseconds (0: try once;
/// `RL_WAIT_FOREVER`: no limit), with a lease of `lease_ms` milliseconds (`RL_LEASE_WATCHDOG`:
/// renewed by the watchdog until released). Reentrant: the owner may acquire again and must
/// release as many times. `*out` (may be NULL) receives the fencing token and hold count.
///
/// Returns `RL_TIMEOUT` when the wait ends first, `RL_UPGRADE_NOT_ALLOWED` when a reader asks
/// for the write view of the same name.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_acquire(
    lock: rl_lock,
    owner: rl_owner,
    wait_ms: i64,
    lease_ms: i64,
    out: *mut rl_acquired,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: per this function's contract.
    guard(err, || unsafe {
        acquire(
            lock,
            owner,
            wait_ms,
            lease_ms,
            rl_cancel::default(),
            ptr::null(),
            out,
            ptr::null_mut(),
        )
    })
}

/// `rl_lock_acquire` with more: `cancel` (a zero handle: not cancellable) ends the wait from
/// another thread with `RL_CANCELLED`, leaving nothing behind in Redis; `label` (may be NULL:
/// the OS thread's name; empty is `RL_INVALID_ARGUMENT`) is stored with the hold as its
/// thread/task description (at most 256 bytes kept); `*out_hold` (may be NULL) receives a hold handle to watch for loss (free it with
/// `rl_hold_free`; freeing it does not release the lock).
///
/// # Safety
/// `label` is NULL or a NUL-terminated string; `out`, `out_hold` and `err` are NULL or valid
/// for writes.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn rl_lock_acquire_ex(
    lock: rl_lock,
    owner: rl_owner,
    wait_ms: i64,
    lease_ms: i64,
    cancel: rl_cancel,
    label: *const c_char,
    out: *mut rl_acquired,
    out_hold: *mut rl_hold,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: per this function's contract.
    guard(err, || unsafe {
        acquire(lock, owner, wait_ms, lease_ms, cancel, label, out, out_hold)
    })
}

/// # Safety
/// As for `rl_lock_acquire_ex`.
#[allow(clippy::too_many_arguments)]
unsafe fn acquire(
    lock: rl_lock,
    owner: rl_owner,
    wait_ms: i64,
    lease_ms: i64,
    cancel: rl_cancel,
    label: *const c_char,
    out: *mut rl_acquired,
    out_hold: *mut rl_hold,
) -> FfiResult<()> {
    // Outputs are reset first: a failed acquire never leaves a stale token or hold behind.
    // SAFETY: per the caller's contract.
    unsafe {
        put(out, rl_acquired::default());
        put(out_hold, rl_hold::default());
    }
    // SAFETY: as above.
    let options = unsafe { acquire_options(wait_ms, lease_ms, label) }?;
    let lock = LOCKS.get(lock.id)?;
    let owner = OWNERS.get(owner.id)?;
    let cancel = CANCELS.get_optional(cancel.id)?;
    let hold = lock.view().acquire_with(&owner, options, cancel.as_ref())?;
    // SAFETY: as above.
    unsafe { put_hold(hold, out, out_hold) };
    Ok(())
}

/// The options of an acquire from the C arguments.
///
/// # Safety
/// `label` is NULL or a NUL-terminated string.
pub(crate) unsafe fn acquire_options(
    wait_ms: i64,
    lease_ms: i64,
    label: *const c_char,
) -> FfiResult<AcquireOptions> {
    Ok(AcquireOptions {
        wait: args::wait(wait_ms, "wait_ms")?,
        lease: args::lease(lease_ms)?,
        // SAFETY: per the caller's contract.
        label: unsafe { strings::read_optional(label, "label") }?.map(str::to_owned),
    })
}

/// Hands an acquired hold to C: its figures to `*out`, a handle to `*out_hold` (either may be
/// NULL).
///
/// # Safety
/// `out` and `out_hold` are NULL or valid for writes.
pub(crate) unsafe fn put_hold(hold: Hold, out: *mut rl_acquired, out_hold: *mut rl_hold) {
    let acquired = rl_acquired {
        fencing_token: hold.fencing_token(),
        hold_count: hold.hold_count(),
    };
    // SAFETY: per the caller's contract.
    unsafe { put(out, acquired) };
    if !out_hold.is_null() {
        let id = HOLDS.insert(Arc::new(hold));
        // SAFETY: as above.
        unsafe { put(out_hold, rl_hold { id }) };
    }
}

/// Releases one hold of `owner` (presenting the token is enough: any thread, process or
/// language). `*out_remaining` (may be NULL) receives how many holds the owner still has in this
/// view. `RL_NOT_HELD` when the owner does not hold it (nothing changes); `RL_LOCK_LOST` when
/// this client's watchdog kept it alive and Redis no longer has it.
///
/// # Safety
/// `out_remaining` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_release(
    lock: rl_lock,
    owner: rl_owner,
    out_remaining: *mut u32,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: per this function's contract, which is `release`'s.
    unsafe { release(lock, owner, None, out_remaining, err) }
}

/// [`rl_lock_release`] of one particular hold: `owner`'s hold whose fencing token is
/// `fencing_token` (as `rl_hold_fencing_token` gave it; its re-entries share it). When that hold
/// has ended, `RL_NOT_HELD` (or `RL_LOCK_LOST`) and the owner's newer hold of the name, taken
/// after it (by another thread sharing the owner), stays.
///
/// # Safety
/// `out_remaining` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_release_fenced(
    lock: rl_lock,
    owner: rl_owner,
    fencing_token: u64,
    out_remaining: *mut u32,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: per this function's contract, which is `release`'s.
    unsafe { release(lock, owner, Some(fencing_token), out_remaining, err) }
}

/// One hold of `owner`, or its hold with the fencing token `meant` alone.
///
/// # Safety
/// `out_remaining` and `err` are NULL or valid for writes.
unsafe fn release(
    lock: rl_lock,
    owner: rl_owner,
    meant: Option<u64>,
    out_remaining: *mut u32,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { put(out_remaining, 0) };
        let lock = LOCKS.get(lock.id)?;
        let owner = OWNERS.get(owner.id)?;
        let remaining = match meant {
            Some(fence) => lock.view().release_fenced(&owner, fence)?,
            None => lock.view().release(&owner)?,
        };
        // SAFETY: as above.
        unsafe { put(out_remaining, remaining) };
        Ok(())
    })
}

/// Sets the lease of `owner`'s hold to `lease_ms` milliseconds (> 0) from now. A hold the
/// watchdog keeps alive stays kept. `RL_NOT_HELD` when the owner does not hold it.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_extend(
    lock: rl_lock,
    owner: rl_owner,
    lease_ms: i64,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        let lease = args::positive(lease_ms, "lease_ms")?;
        let lock = LOCKS.get(lock.id)?;
        let owner = OWNERS.get(owner.id)?;
        lock.view().extend(&owner, lease)?;
        Ok(())
    })
}

/// Whether anyone holds this view (`*out`): the write view, a writer; the read view, a reader.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_is_locked(
    lock: rl_lock,
    out: *mut bool,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        let locked = LOCKS.get(lock.id)?.view().is_locked()?;
        // SAFETY: as above.
        unsafe { put(out, locked) };
        Ok(())
    })
}

/// Whether `owner` holds this view (`*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_is_held_by(
    lock: rl_lock,
    owner: rl_owner,
    out: *mut bool,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        let lock = LOCKS.get(lock.id)?;
        let owner = OWNERS.get(owner.id)?;
        let held = lock.view().is_held_by(&owner)?;
        // SAFETY: as above.
        unsafe { put(out, held) };
        Ok(())
    })
}

/// How many times `owner` holds this view (`*out`; 0 when not at all).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_hold_count(
    lock: rl_lock,
    owner: rl_owner,
    out: *mut u32,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        let lock = LOCKS.get(lock.id)?;
        let owner = OWNERS.get(owner.id)?;
        let count = lock.view().hold_count(&owner)?;
        // SAFETY: as above.
        unsafe { put(out, count) };
        Ok(())
    })
}

/// A snapshot of the whole name as JSON (`*out_json`, free with `rl_string_free`):
/// `{"name", "mode": "write"|"read"|null, "holder_count", "lease_left_ms"|null,
/// "waiting_writers", "waiting_readers", "last_fencing_token", "holders": [{"mode",
/// "owner_token", "hold_count", "fencing_token", "lease_left_ms", "held_for_ms"|null, "host",
/// "pid", "thread", "acquired_at_ms"}]}` (durations in milliseconds, at most 100 holders listed).
///
/// # Safety
/// `out_json` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_inspect(
    lock: rl_lock,
    out_json: *mut *mut c_char,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        require_out(out_json, "out_json")?;
        // SAFETY: per this function's contract.
        unsafe { put(out_json, ptr::null_mut()) };
        let info = LOCKS.get(lock.id)?.view().inspect()?;
        // SAFETY: as above.
        unsafe { put(out_json, strings::to_c(&info_json(&info))) };
        Ok(())
    })
}

/// Clears the name whoever holds it (both views) and wakes every waiter; `*out_was_held` (may
/// be NULL) tells whether it was held. This client's watched holds of the name are reported lost
/// at once; other clients find out at their next renewal.
///
/// # Safety
/// `out_was_held` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_force_unlock(
    lock: rl_lock,
    out_was_held: *mut bool,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { put(out_was_held, false) };
        let held = LOCKS.get(lock.id)?.view().force_unlock()?;
        // SAFETY: as above.
        unsafe { put(out_was_held, held) };
        Ok(())
    })
}

/// The lock's name (`*out`, a new string: free with `rl_string_free`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_name(
    lock: rl_lock,
    out: *mut *mut c_char,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        require_out(out, "out")?;
        // SAFETY: per this function's contract.
        unsafe { put(out, ptr::null_mut()) };
        let lock = LOCKS.get(lock.id)?;
        // SAFETY: as above.
        unsafe { put(out, strings::to_c(lock.view().name())) };
        Ok(())
    })
}

/// The lock's view (`*out`): `RL_MODE_WRITE` for an exclusive lock or a write view,
/// `RL_MODE_READ` for a read view.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_mode(
    lock: rl_lock,
    out: *mut rl_mode,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        require_out(out, "out")?;
        // No mode is 0: a failed call leaves 0 there, never a stale mode.
        // SAFETY: per this function's contract; rl_mode is a repr(i32) enum.
        unsafe { out.cast::<i32>().write(0) };
        let mode = LOCKS.get(lock.id)?.view().mode();
        // SAFETY: per this function's contract.
        unsafe { put(out, mode.into()) };
        Ok(())
    })
}

/// Frees the lock handle at `*lock` and sets it to zero. Holds stay in Redis (release them
/// first, with this or any other handle of the name). A zero handle is a no-op.
///
/// # Safety
/// `lock` is NULL or points to an `rl_lock`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_lock_free(lock: *mut rl_lock, err: *mut rl_error) -> rl_status {
    // SAFETY: rl_lock is a repr(C) struct of one u64.
    guard(err, || {
        unsafe { free_handle(&LOCKS, lock.cast()) }.map(drop)
    })
}
