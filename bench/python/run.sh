#!/usr/bin/env bash
# Builds a bench venv (redlock_sdk from ./bindings/python, the other libraries from PyPI) and
# runs bench.py against a redis-server of its own. Arguments go to bench.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv-bench
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet ./bindings/python redis python-redis-lock pottery
exec "$venv/bin/python" bench/python/bench.py "$@"
