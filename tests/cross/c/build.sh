#!/usr/bin/env bash
# Builds the C worker into tests/cross/c/build/ (PKG_CONFIG_PATH points at $REDLOCK_PREFIX).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
mkdir -p build
cc -std=c11 -Wall -Wextra -Werror -O2 $(pkg-config --cflags redlock) worker.c -o build/worker \
    $(pkg-config --libs redlock) -lpthread
