#!/usr/bin/env bash
# Java benchmark: redlock-sdk's DistributedLock versus Redisson's RLock (from Maven Central), in
# one run on one throwaway redis-server. Args: [uncontended cycles] [contended seconds].
set -euo pipefail
cd "$(dirname "$0")/.."
mvn -q -B -ntp -f bindings/java/pom.xml install -DskipTests
mvn -q -B -ntp -f bench/java/pom.xml package
classpath="$(mktemp -t redlock-bench-cp-XXXXXX)"
mvn -q -B -ntp -f bench/java/pom.xml dependency:build-classpath -Dmdep.outputFile="$classpath"
source scripts/lib-redis.sh
start_throwaway_redis
java -cp "bench/java/target/classes:$(cat "$classpath")" io.redlock.bench.LockBench \
  "$REDIS_URL" "${1:-5000}" "${2:-5}"
rm -f "$classpath"
