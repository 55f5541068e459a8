#!/usr/bin/env bash
# Builds the Go cross-language worker into build/worker (see ../PROTOCOL.md), after gofmt and
# go vet. Needs libredlock where pkg-config finds it (PKG_CONFIG_PATH, or REDLOCK_PREFIX).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if [ -n "${REDLOCK_PREFIX:-}" ]; then
  export PKG_CONFIG_PATH="$REDLOCK_PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
export GOTOOLCHAIN=local CGO_ENABLED=1

unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting: $unformatted" >&2
  exit 1
fi
go vet ./...
go build -o build/worker .
