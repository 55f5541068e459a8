//! Strings across the boundary: reading C strings safely, and handing out strings that C frees
//! with `rl_string_free`.
//!
//! Every string handed out is recorded until it is freed, so that freeing a string twice, or one
//! this library never made, is a status code instead of heap corruption.

use std::collections::HashSet;
use std::ffi::{CStr, CString, c_char};
use std::ptr;
use std::sync::{LazyLock, Mutex, PoisonError};

use super::error::{FfiError, FfiResult};
use super::guard::guard;
use super::status::rl_status;

/// Strings handed out for `rl_string_free`.
static LIVE: LazyLock<Mutex<HashSet<usize>>> = LazyLock::new(Mutex::default);
/// Messages owned by an `rl_error` (freed by the next report into it or `rl_error_free`, never
/// by `rl_string_free`: the error still points to its message, and would free it again, or
/// whatever string got its memory since).
static MESSAGES: LazyLock<Mutex<HashSet<usize>>> = LazyLock::new(Mutex::default);

/// A new NUL-terminated copy of `text` owned by the caller (NUL bytes inside become U+FFFD).
pub(crate) fn to_c(text: &str) -> *mut c_char {
    to_c_in(&LIVE, text)
}

/// [`to_c`] for an `rl_error`'s message.
pub(crate) fn to_c_message(text: &str) -> *mut c_char {
    to_c_in(&MESSAGES, text)
}

/// Both registries, locked until the boxes are dropped (see `crate::fork_safety`).
pub(crate) fn lock_for_fork() -> [Box<dyn std::any::Any>; 2] {
    [
        Box::new(LIVE.lock().unwrap_or_else(PoisonError::into_inner)),
        Box::new(MESSAGES.lock().unwrap_or_else(PoisonError::into_inner)),
    ]
}

fn to_c_in(registry: &Mutex<HashSet<usize>>, text: &str) -> *mut c_char {
    crate::fork_safety::before_table_use();
    let owned = CString::new(text).unwrap_or_else(|_| {
        CString::new(text.replace('\0', "\u{FFFD}")).expect("no NUL bytes left")
    });
    let raw = owned.into_raw();
    registry
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(raw as usize);
    raw
}

/// Frees a string from [`to_c`]; false (and nothing freed) for NULL, a string freed already, or
/// memory this library did not hand out.
pub(crate) fn release(raw: *mut c_char) -> bool {
    release_in(&LIVE, raw)
}

/// Frees a message from [`to_c_message`], as [`release`] does.
pub(crate) fn release_message(raw: *mut c_char) -> bool {
    release_in(&MESSAGES, raw)
}

fn release_in(registry: &Mutex<HashSet<usize>>, raw: *mut c_char) -> bool {
    if raw.is_null() {
        return false;
    }
    let known = registry
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&(raw as usize));
    if known {
        // SAFETY: `raw` came from CString::into_raw in `to_c` and was not freed since (it was
        // still recorded as live).
        drop(unsafe { CString::from_raw(raw) });
    }
    known
}

/// How many strings handed out are not freed yet.
pub(crate) fn live() -> usize {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner).len()
        + MESSAGES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
}

/// Reads a NUL-terminated UTF-8 argument; `what` names it in the error message.
///
/// # Safety
/// `raw` is NULL or points to a NUL-terminated string that stays valid during the call.
pub(crate) unsafe fn read<'a>(raw: *const c_char, what: &str) -> FfiResult<&'a str> {
    if raw.is_null() {
        return Err(FfiError::invalid(format!("{what} must not be NULL")));
    }
    // SAFETY: non-NULL, and the caller guarantees NUL termination.
    let bytes = unsafe { CStr::from_ptr(raw) };
    bytes.to_str().map_err(|e| {
        FfiError::invalid(format!(
            "{what} is not valid UTF-8 (bad byte at offset {})",
            e.valid_up_to()
        ))
    })
}

/// Like [`read`], but NULL means "not given".
///
/// # Safety
/// As for [`read`].
pub(crate) unsafe fn read_optional<'a>(
    raw: *const c_char,
    what: &str,
) -> FfiResult<Option<&'a str>> {
    if raw.is_null() {
        Ok(None)
    } else {
        // SAFETY: forwarded contract.
        unsafe { read(raw, what) }.map(Some)
    }
}

/// Frees a string this library handed out (owner tokens, inspect JSON). NULL is accepted and
/// does nothing. A string freed already, or not made by this library, is reported as
/// `RL_INVALID_ARGUMENT` and left alone (never passed to `free()`); so is an `rl_error`'s
/// message, which belongs to its `rl_error` (freed by `rl_error_free` or the next call that
/// reports into it).
///
/// # Safety
/// None beyond passing a pointer value: the pointer is checked before it is used.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_string_free(s: *mut c_char) -> rl_status {
    guard(ptr::null_mut(), || {
        if s.is_null() || release(s) {
            Ok(())
        } else {
            Err(FfiError::invalid(
                "string was already freed, is an rl_error's message, or was not handed out by \
                 libredlock",
            ))
        }
    })
}
