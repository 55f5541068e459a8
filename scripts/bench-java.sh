#!/usr/bin/env bash
# Java benchmark: redlock-sdk's DistributedLock versus Redisson's RLock (from Maven Central), in
# one run on one redis-server. Prints a table and writes the suite's fragments (bench/FRAGMENTS.md)
# P3-java.json (uncontended) and P4-java.json (4 processes contending) into $BENCH_OUT.
#   Args: [cycles per repetition (P3)] [sections per process (P4)]
#   BENCH_OUT    directory of the fragments (default: a new temporary directory, printed)
#   BENCH_QUICK  1: a short run (300 cycles, 200 sections, 3 P4 repetitions) unless args say
#   REDIS_URL    the redis-server to use; unset: a throwaway one on 127.0.0.1, killed at exit
set -euo pipefail
cd "$(dirname "$0")/.."
classpath="$(mktemp -t redlock-bench-cp-XXXXXX)"
mvn_log="$(mktemp -t redlock-mvn-XXXXXX.log)"
cleanup() {
  rm -f "$classpath" "$mvn_log"
  if declare -F stop_throwaway_redis >/dev/null; then
    stop_throwaway_redis
  fi
}
trap cleanup EXIT
# Maven's (and cargo's) output, with its stray colour resets, only when a build fails.
quiet_mvn() {
  if ! mvn -q -B -ntp "$@" >"$mvn_log" 2>&1; then
    cat "$mvn_log" >&2
    return 1
  fi
}
quiet_mvn -f bindings/java/pom.xml install -DskipTests
quiet_mvn -f bench/java/pom.xml package
quiet_mvn -f bench/java/pom.xml dependency:build-classpath -Dmdep.outputFile="$classpath"
if [ -z "${REDIS_URL:-}" ]; then
  source scripts/lib-redis.sh
  start_throwaway_redis
  trap cleanup EXIT # start_throwaway_redis set its own; ours stops it too
fi
out="${BENCH_OUT:-}"
if [ -z "$out" ]; then
  out="$(mktemp -d -t redlock-bench-java-XXXXXX)"
fi
args=(--url "$REDIS_URL" --out "$out")
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  args+=(--quick)
fi
if [ -n "${1:-}" ]; then
  args+=(--cycles "$1")
fi
if [ -n "${2:-}" ]; then
  args+=(--sections "$2")
fi
java -cp "bench/java/target/classes:$(cat "$classpath")" io.redlock.bench.LockBench "${args[@]}"
