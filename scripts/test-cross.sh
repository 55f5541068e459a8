#!/usr/bin/env bash
# Cross-language: workers in Rust, C, Go, Python and Java share one lock on one redis-server
# (tests/cross/run.py: mutual exclusion on a plain file, read/write, token hand-off, fencing).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib-cross.sh
prepare_cross
python3 tests/cross/run.py "$@"
