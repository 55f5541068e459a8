#!/usr/bin/env bash
# THE test command: installs what is missing, then runs every suite in every language.
# Each suite starts its own throwaway redis-server processes on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
suites=(rust c go python java cross)
timings=()
for suite in "${suites[@]}"; do
  echo "=== $suite"
  started=$SECONDS
  "scripts/test-$suite.sh"
  timings+=("$suite $((SECONDS - started)) s")
done
# Each suite's wall time, so that a run creeping towards CI's time budget shows where.
echo "=== all suites passed: ${timings[*]/%/,} total ${SECONDS} s"
