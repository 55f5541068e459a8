#!/usr/bin/env bash
# Builds the Java worker into tests/cross/java/build/ (see tests/cross/PROTOCOL.md).
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${REDLOCK_JAVA_CLASSES:?REDLOCK_JAVA_CLASSES must point to bindings/java/target/classes}"
mkdir -p "$dir/build"
javac --release 17 -Xlint:all -Werror -cp "$REDLOCK_JAVA_CLASSES" -d "$dir/build" "$dir/Worker.java"
