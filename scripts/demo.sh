#!/usr/bin/env bash
# THE demo command: installs what is missing, builds the core and every binding, and runs the
# cross-language contention of tests/cross (2 processes each of Rust, C, Go, Python and Java on
# one lock and one plain file) against a redis-server of its own, printing a table per language
# and the "no duplicate, no gap" verdict. The Rust-only demo of the seeds' scenarios:
#   cargo run --release -p redlock-core --features test-support --example demo
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/lib-cross.sh
echo "demo: building the core and the five bindings (the first run compiles everything)"
prepare_cross
python3 tests/cross/run.py --demo "$@"
