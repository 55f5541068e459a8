#!/usr/bin/env bash
# Builds the Rust worker (release) into tests/cross/rust/build/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$REDLOCK_ROOT"
cargo build --release --quiet -p redlock-cross-worker
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$REDLOCK_ROOT/$target" ;; esac
mkdir -p "$here/build"
cp "$target/release/cross-worker" "$here/build/worker"
