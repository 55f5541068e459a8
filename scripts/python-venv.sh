#!/usr/bin/env bash
# Creates a fresh venv at $1 with redlock_sdk installed from ./bindings/python (exactly as its
# README says: the build compiles the one shared library and generates the UniFFI module), plus
# the packages given after it.   scripts/python-venv.sh VENV [PACKAGE...]
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$1"
shift
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "maturin>=1.13,<2.0" "$@"
"$venv/bin/python" -m pip install --quiet ./bindings/python
