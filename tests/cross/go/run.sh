#!/usr/bin/env bash
# Runs the Go cross-language worker built by build.sh: run.sh MODE REDIS_URL LOCK_NAME ARG...
set -euo pipefail
exec "$(cd "$(dirname "$0")" && pwd)/build/worker" "$@"
