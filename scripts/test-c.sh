#!/usr/bin/env bash
# C: builds libredlock and the C programs (-Wall -Wextra -Werror), runs the C suite (it starts
# its own redis-server), runs it again under valgrind (memory errors and definite leaks fail it),
# and runs the example against a throwaway redis-server. The header's freshness is checked by the
# Rust suite (ffi/tests/c_header.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || need_apt+=(make)
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "test-c: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

libdir="$(scripts/build-ffi.sh)"
build="bindings/c/build"
make --no-print-directory -C bindings/c LIBDIR="$libdir" all >/dev/null

echo "--- C suite"
"$build/redlock_test"

echo "--- C suite under valgrind"
# Not the fork tests: under valgrind each forked child runs under it too, one thread at a time,
# far slower than their time limit.
REDLOCK_TEST_SKIP=fork_ valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
  --show-leak-kinds=definite "$build/redlock_test" | tail -n 1

echo "--- C example"
source scripts/lib-redis.sh
start_throwaway_redis
"$build/example" "$REDIS_URL"
