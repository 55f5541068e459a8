#!/usr/bin/env bash
# Go: builds libredlock and installs it (header, library, pkg-config file) into a staging prefix
# in the cargo target dir, the way a user would; then gofmt, go vet, go test -race (the tests
# start their own redis-server), the example against a throwaway redis-server, and the bench's
# gofmt, vet and unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# Go comes with the machine (/usr/local/go); Debian's golang-go is too old for this module.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  echo "test-go: Go 1.24 or newer is required (https://go.dev/doc/install)" >&2
  exit 1
fi
need_apt=()
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "test-go: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

libdir="$(scripts/build-ffi.sh)"
prefix="$(dirname "$libdir")/redlock-c-install"
scripts/install-c.sh "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CGO_ENABLED=1 GOTOOLCHAIN=local

cd bindings/go
echo "--- gofmt"
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting: $unformatted" >&2
  exit 1
fi
echo "--- go vet"
go vet ./...
echo "--- go test -race"
go test -race -count=1 ./...
echo "--- Go example"
source ../../scripts/lib-redis.sh
start_throwaway_redis
go run ./example "$REDIS_URL"
# The bench's own checks (the exclusion check, the steal arithmetic): it must keep building.
echo "--- Go bench: gofmt, go vet, go test"
cd ../../bench/go
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting: $unformatted" >&2
  exit 1
fi
go vet ./...
go test -count=1 ./...
