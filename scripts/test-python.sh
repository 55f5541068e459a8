#!/usr/bin/env bash
# Python: builds and installs the redlock_sdk package from ./bindings/python into a fresh venv
# (exactly as its README says), lints it, and runs its pytest suite against real redis-servers.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-test
py="$venv/bin/python"
scripts/python-venv.sh "$venv" "pytest>=8" pytest-timeout "ruff==0.17.6" "uvloop>=0.19" "anyio>=4"

"$venv/bin/ruff" check --config bindings/python/pyproject.toml bindings/python python-demo bench/python tests/cross
"$venv/bin/ruff" format --check --config bindings/python/pyproject.toml bindings/python python-demo bench/python tests/cross

# Run from the tests folder so that the installed package, not the source tree, is imported.
status=0
(cd bindings/python/tests && "../../../$py" -m pytest -q -p no:cacheprovider) || status=$?
if [ "$status" -eq 5 ]; then
  echo "test-python: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
