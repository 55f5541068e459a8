#!/usr/bin/env bash
# Builds libredlock (cargo build --release -p redlock-ffi, every adapter, without the binding
# generator: see ffi/Cargo.toml) and prints the absolute directory that holds libredlock.so.
# Honours CARGO_TARGET_DIR. REDLOCK_FFI_FEATURES (e.g. "c-api") builds only those adapters
# instead of all of them (for working on one adapter while another is broken). Arguments are
# more cargo targets built with the same features (e.g. `--example bench_blocking`).
set -euo pipefail
cd "$(dirname "$0")/.."
features=(--no-default-features --features "${REDLOCK_FFI_FEATURES:-c-api,python,java}")
cargo build --release --quiet -p redlock-ffi --lib "${features[@]}" "$@" >&2
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
libdir="$target/release"
if [ ! -f "$libdir/libredlock.so" ]; then
  echo "build-ffi: $libdir/libredlock.so is missing after the build" >&2
  exit 1
fi
echo "$libdir"
