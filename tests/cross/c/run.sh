#!/usr/bin/env bash
# Runs the C worker (after build.sh): run.sh MODE REDIS_URL LOCK_NAME ARG...
set -euo pipefail
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build/worker" "$@"
