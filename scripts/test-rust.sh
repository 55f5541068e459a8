#!/usr/bin/env bash
# Rust: format, lints, and every test of the workspace against real redis-servers.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
cargo test --workspace --all-features
