//! Owners: a random one, one from a token handed over, and the token to hand over.

use std::ffi::c_char;
use std::ptr;

use redlock_core::Owner;

use super::args::{init_out, put, require_out};
use super::error::rl_error;
use super::guard::guard;
use super::handles::{Kind, Table, free_handle, rl_owner};
use super::status::rl_status;
use super::strings;

pub(crate) static OWNERS: Table<Owner> = Table::new(Kind::Owner);

/// Creates a new random owner (a UUID v4 plus a process id: at least 122 random bits).
///
/// Give its token (`rl_owner_token`) to another thread, process or language to let it release
/// or extend what this owner holds. Free it with `rl_owner_free`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_owner_random(out: *mut rl_owner, err: *mut rl_error) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        let id = OWNERS.insert(Owner::random());
        // SAFETY: as above.
        unsafe { put(out, rl_owner { id }) };
        Ok(())
    })
}

/// Creates an owner from a token (1..=`RL_MAX_TOKEN_LEN` bytes of UTF-8), e.g. one made by
/// another instance: presenting it makes this caller the owner of whatever that token holds.
///
/// # Safety
/// `token` is NULL or a NUL-terminated string; `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_owner_from_token(
    token: *const c_char,
    out: *mut rl_owner,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        // SAFETY: as above.
        let token = unsafe { strings::read(token, "token") }?;
        let id = OWNERS.insert(Owner::from_token(token)?);
        // SAFETY: as above.
        unsafe { put(out, rl_owner { id }) };
        Ok(())
    })
}

/// Copies the owner's token into a new string (`*out`), to be freed with `rl_string_free`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_owner_token(
    owner: rl_owner,
    out: *mut *mut c_char,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        require_out(out, "out")?;
        // SAFETY: per this function's contract.
        unsafe { put(out, ptr::null_mut()) };
        let owner = OWNERS.get(owner.id)?;
        // SAFETY: as above.
        unsafe { put(out, strings::to_c(owner.token())) };
        Ok(())
    })
}

/// Frees the owner handle at `*owner` and sets it to zero. Holds taken with the owner are not
/// released (they belong to the token, not to the handle). A zero handle is a no-op; a handle
/// freed already through a copy is `RL_INVALID_HANDLE`.
///
/// # Safety
/// `owner` is NULL or points to an `rl_owner`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_owner_free(owner: *mut rl_owner, err: *mut rl_error) -> rl_status {
    // SAFETY: rl_owner is a repr(C) struct of one u64.
    guard(err, || {
        unsafe { free_handle(&OWNERS, owner.cast()) }.map(drop)
    })
}
