#!/usr/bin/env bash
# Rust: format, lints, and every test of the workspace against real redis-servers.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every feature but redlock-ffi's `bindgen`: it only builds the uniffi-bindgen binary (one line
# calling UniFFI's), and its generator crate is the slowest of the tree to compile — checking it
# alone took 115 s of clippy's 210 s. The Python suite builds that binary (maturin runs it).
features=(--no-default-features
  --features redlock-ffi/c-api,redlock-ffi/python,redlock-ffi/java,redlock-core/test-support)
cargo fmt --all -- --check
cargo clippy --workspace --all-targets "${features[@]}" -- -D warnings
# The integration tests mostly wait (on Redis, leases, timers): four at a time instead of one per
# core takes the suite from about 200 s to 130 s on 2 cores.
RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}" cargo test --workspace "${features[@]}"
