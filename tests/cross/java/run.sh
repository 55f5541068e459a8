#!/usr/bin/env bash
# Runs the Java worker: run.sh MODE REDIS_URL LOCK_NAME ARG... (see tests/cross/PROTOCOL.md).
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${REDLOCK_JAVA_CLASSES:?REDLOCK_JAVA_CLASSES must point to bindings/java/target/classes}"
exec java -cp "$dir/build:$REDLOCK_JAVA_CLASSES" io.redlock.cross.Worker "$@"
