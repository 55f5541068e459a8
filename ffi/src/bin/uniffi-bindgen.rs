//! `uniffi-bindgen`, pinned to the UniFFI version of this crate: maturin runs it to generate the
//! Python module of `redlock_sdk` from the metadata inside libredlock.so.

fn main() {
    uniffi::uniffi_bindgen_main()
}
