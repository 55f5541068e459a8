#!/usr/bin/env bash
# Go lock libraries on one redis-server, in one run: redlock-go, redsync v4 and bsm/redislock
# (P3b uncontended, P4 contended; see main.go). Builds libredlock and installs it under the
# target dir (as scripts/bench-c-go.sh does), builds the bench, and runs it against $REDIS_URL,
# or against a throwaway redis-server of its own when REDIS_URL is unset. Fragments go to
# $BENCH_OUT (a temporary directory when unset). BENCH_QUICK=1: short runs. Arguments go to
# the bench (-reps, -cycles, -p4-reps, -sections, -procs, -only p3b|p4).
#
#   bench/go/run.sh            BENCH_QUICK=1 bench/go/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

libdir="$(scripts/build-ffi.sh)"
prefix="$(dirname "$libdir")/redlock-bench-go-install"
scripts/install-c.sh "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig" LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
(cd bench/go && go build -o "$prefix/redlock-go-bench" .)

if [ -z "${REDIS_URL:-}" ]; then
  source scripts/lib-redis.sh
  start_throwaway_redis
fi
if [ -z "${BENCH_OUT:-}" ]; then
  BENCH_OUT="$(mktemp -d -t redlock-bench-go-XXXXXX)"
fi
export REDIS_URL BENCH_OUT
"$prefix/redlock-go-bench" "$@"
