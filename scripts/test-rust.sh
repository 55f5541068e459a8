#!/usr/bin/env bash
# Rust: format, lints, and every test of the workspace against real redis-servers.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
# The integration tests mostly wait (on Redis, leases, timers): four at a time instead of one per
# core takes the suite from about 200 s to 130 s on 2 cores.
RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}" cargo test --workspace --all-features
