//! Opaque handles: a Rust object boxed and passed to Java as a `long`.
//!
//! The Java side (package-private classes only) owns each handle, frees it exactly once and
//! keeps its owner reachable while a call runs, so a live, non-zero handle always points to a
//! live object of the type the entry point expects.

use jni::sys::jlong;

use super::error::{Failure, invalid};

/// Moves `value` to the heap and returns its handle.
pub(crate) fn into_handle<T>(value: T) -> jlong {
    Box::into_raw(Box::new(value)) as jlong
}

/// The object behind `handle`.
///
/// # Safety
/// `handle` must be zero or come from [`into_handle`] with the same `T` and not be freed yet.
pub(crate) unsafe fn borrow<'a, T>(handle: jlong, what: &str) -> Result<&'a T, Failure> {
    if handle == 0 {
        return Err(invalid(format!("the {what} was already freed")));
    }
    // SAFETY: by the contract above.
    Ok(unsafe { &*(handle as *const T) })
}

/// Drops the object behind `handle`; zero is ignored.
///
/// # Safety
/// As for [`borrow`]; afterwards the handle must never be used again.
pub(crate) unsafe fn free<T>(handle: jlong) {
    if handle != 0 {
        // SAFETY: by the contract above.
        drop(unsafe { Box::from_raw(handle as *mut T) });
    }
}
