//! Rust text as C strings for the adapters' callbacks.

use std::ffi::CString;

/// `text` as a C string; a NUL inside (a lock name may hold one) becomes U+FFFD.
pub(crate) fn nul_replaced(text: &str) -> CString {
    CString::new(text)
        .unwrap_or_else(|_| CString::new(text.replace('\0', "\u{fffd}")).expect("no NUL left"))
}
