#!/usr/bin/env bash
# Nothing to compile: checks that the interpreter imports redlock_sdk.
set -euo pipefail
"$REDLOCK_PYTHON" -c 'import redlock_sdk'
