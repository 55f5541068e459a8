//! Error details: the internal error type of the ABI and the `rl_error` out-parameter.

#![allow(non_camel_case_types)]

use std::ffi::c_char;
use std::fmt;
use std::ptr;

use super::guard::guard;
use super::status::rl_status;
use super::strings;

/// Error details filled in by a failing call. Declare one zero-initialised
/// (`rl_error err = {0};`), pass its address as the last argument of any call, and free it with
/// `rl_error_free` when done. It may be reused across calls: each call replaces (and frees) the
/// previous message, and a successful call resets it to `{RL_OK, NULL}`.
#[repr(C)]
#[derive(Debug)]
pub struct rl_error {
    /// The same status the call returned.
    pub code: rl_status,
    /// What went wrong, in English, NUL-terminated UTF-8; NULL when `code` is `RL_OK`. Owned by
    /// the error: freed by `rl_error_free` (never pass it to `free()`).
    pub message: *mut c_char,
}

/// A failure inside the ABI: a status code and a message for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FfiError {
    pub(crate) status: rl_status,
    pub(crate) message: String,
}

pub(crate) type FfiResult<T> = Result<T, FfiError>;

impl FfiError {
    pub(crate) fn new(status: rl_status, message: impl fmt::Display) -> Self {
        FfiError {
            status,
            message: message.to_string(),
        }
    }

    pub(crate) fn invalid(message: impl fmt::Display) -> Self {
        FfiError::new(rl_status::RL_INVALID_ARGUMENT, message)
    }

    pub(crate) fn handle(message: impl fmt::Display) -> Self {
        FfiError::new(rl_status::RL_INVALID_HANDLE, message)
    }
}

impl From<redlock_core::Error> for FfiError {
    fn from(err: redlock_core::Error) -> Self {
        FfiError::new(err.kind().into(), err)
    }
}

/// Writes the outcome of a call into the caller's `rl_error`, if one was given.
///
/// # Safety
/// `err` is NULL or points to writable memory the size of an `rl_error`.
pub(crate) unsafe fn report(err: *mut rl_error, outcome: &FfiResult<()>) {
    if err.is_null() {
        return;
    }
    // Fields are accessed through raw pointers, never through a `&mut rl_error`: the caller's
    // struct may hold a `code` that is no valid rl_status (it is only ever written here).
    // SAFETY: `err` is non-NULL and valid for reads and writes per the caller.
    let (code, message) = unsafe { (&raw mut (*err).code, &raw mut (*err).message) };
    // Free the message of an earlier call so that reusing one rl_error in a loop does not leak.
    // `release_message` only frees messages this library handed out and has not freed yet, so
    // a stale or garbage `message` is ignored rather than freed.
    // SAFETY: as above.
    strings::release_message(unsafe { message.read() });
    let (new_code, new_message) = match outcome {
        Ok(()) => (rl_status::RL_OK, ptr::null_mut()),
        Err(e) => (e.status, strings::to_c_message(&e.message)),
    };
    // SAFETY: as above.
    unsafe {
        code.write(new_code);
        message.write(new_message);
    }
}

/// Frees the message of `err` and resets it to `{RL_OK, NULL}`. Safe to call on an error that
/// holds no message, and to call twice. Returns `RL_INVALID_ARGUMENT` when `err` is NULL.
///
/// # Safety
/// `err` is NULL or points to an `rl_error`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_error_free(err: *mut rl_error) -> rl_status {
    guard(ptr::null_mut(), || {
        if err.is_null() {
            return Err(FfiError::invalid("err must not be NULL"));
        }
        // SAFETY: checked non-NULL; the caller guarantees it points to an rl_error.
        unsafe { report(err, &Ok(())) };
        Ok(())
    })
}
