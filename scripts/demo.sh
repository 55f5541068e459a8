#!/usr/bin/env bash
# THE demo command: installs what is missing, builds, and runs the contention demo against a
# redis-server of its own (started on a free port, stopped at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo run --quiet --release -p redlock-core --features test-support --example demo
