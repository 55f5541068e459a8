#!/usr/bin/env bash
# THE test command: installs what is missing, then runs every suite in every language.
# Each suite starts its own throwaway redis-server processes on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
suites=(rust c go python java cross)
for suite in "${suites[@]}"; do
  echo "=== $suite"
  "scripts/test-$suite.sh"
done
echo "=== all suites passed: ${suites[*]}"
