#!/usr/bin/env bash
# Builds the Rust worker (release) into tests/cross/rust/build/. It is built by the same cargo
# command as libredlock (scripts/build-ffi.sh), so that the crates both use are built with the
# same features and reused; built alone, the worker's smaller feature set rebuilt redis and the
# core (80 s).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
libdir="$("$REDLOCK_ROOT/scripts/build-ffi.sh" -p redlock-cross-worker --bin cross-worker)"
mkdir -p "$here/build"
cp "$libdir/cross-worker" "$here/build/worker"
