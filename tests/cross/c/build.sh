#!/usr/bin/env bash
# Builds the C worker into tests/cross/c/build/. Needs libredlock where pkg-config finds it
# (PKG_CONFIG_PATH, or REDLOCK_PREFIX).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if [ -n "${REDLOCK_PREFIX:-}" ]; then
  export PKG_CONFIG_PATH="$REDLOCK_PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
mkdir -p build
cc -std=c11 -Wall -Wextra -Werror -O2 $(pkg-config --cflags redlock) worker.c -o build/worker \
    $(pkg-config --libs redlock) -lpthread
