#!/usr/bin/env bash
set -euo pipefail
exec "$REDLOCK_PYTHON" "$(dirname "$0")/worker.py" "$@"
