#!/usr/bin/env bash
# Builds a bench venv (redlock_sdk from ./bindings/python, the other libraries from PyPI, and
# matplotlib for bench/report.py) and runs bench.py. Arguments go to bench.py (after the ones
# below, so they win).
#   REDIS_URL     the redis-server to use (loopback only); unset: bench.py starts one of its own
#                 (python-demo/_server.py) on a free loopback port
#   BENCH_OUT     directory for the suite's fragments (bench/FRAGMENTS.md): P2-python.json,
#                 P4-python.json, info-python-asyncio.json; 4 processes x 1000 contended sections
#   BENCH_QUICK=1 a short run: 3 repetitions, 500 cycles, 200 sections
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv-bench
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet ./bindings/python redis python-redis-lock pottery \
    matplotlib
args=()
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    args+=(--reps 3 --cycles 500 --sections 200)
elif [ -n "${BENCH_OUT:-}" ]; then
    args+=(--sections 1000)
fi
[ -z "${BENCH_OUT:-}" ] || args+=(--fragments "$BENCH_OUT")
if [ -n "${REDIS_URL:-}" ]; then
    echo "bench/python: using REDIS_URL=$REDIS_URL" >&2
    export REDIS_URL
fi
exec "$venv/bin/python" bench/python/bench.py "${args[@]}" "$@"
