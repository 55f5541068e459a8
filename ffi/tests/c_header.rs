//! The checked-in C header must be what cbindgen generates from `ffi/src/c_api/` today.
//!
//! Refresh it with `REDLOCK_BLESS=1 cargo test -p redlock-ffi --test c_header`.

use std::path::Path;

#[test]
fn c_header_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = crate_dir.parent().expect("ffi/ has a parent");
    let config = cbindgen::Config::from_file(repo.join("bindings/c/cbindgen.toml"))
        .expect("bindings/c/cbindgen.toml is readable and valid");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        // Only the C ABI module: the Python and Java adapters export no C functions.
        .with_src(crate_dir.join("src/c_api/mod.rs"))
        .generate()
        .expect("cbindgen can generate the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);

    let path = repo.join("bindings/c/include/redlock.h");
    if std::env::var_os("REDLOCK_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write the header");
        return;
    }
    let current = std::fs::read(&path).unwrap_or_default();
    assert!(
        current == fresh,
        "{} is stale (the C ABI in ffi/src/c_api changed). Regenerate it with \
         `REDLOCK_BLESS=1 cargo test -p redlock-ffi --test c_header` and commit it.",
        path.display()
    );
}
