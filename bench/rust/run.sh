#!/usr/bin/env bash
# Builds redlock-bench in release and runs it: the P1, P4, P5, P6 and P7 fragments
# (bench/FRAGMENTS.md) go into $BENCH_OUT (default: target/bench-out), a summary to stdout.
#   REDIS_URL     the redis-server to use (default: a throwaway one of the bench's own)
#   BENCH_QUICK=1 quick mode (fewer and shorter runs)
# Arguments go to the binary: `run.sh p1 p6`, `run.sh --quick`; default: all goals.
set -euo pipefail
cd "$(dirname "$0")/../.."
export BENCH_OUT="${BENCH_OUT:-$PWD/target/bench-out}"
cargo build --release -p redlock-bench
exec cargo run --release --quiet -p redlock-bench -- "$@"
