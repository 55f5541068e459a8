#!/usr/bin/env bash
# THE Java demo command: builds libredlock and the Java module (bundling the library), then runs
# java-demo (the seeds' Lock / ReadWriteLock code) against a throwaway redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
mvn -q -B -ntp -f bindings/java/pom.xml install -DskipTests
mvn -q -B -ntp -f java-demo/pom.xml package
classpath="$(mktemp -t redlock-demo-cp-XXXXXX)"
mvn -q -B -ntp -f java-demo/pom.xml dependency:build-classpath -Dmdep.outputFile="$classpath"
source scripts/lib-redis.sh
start_throwaway_redis
java -cp "java-demo/target/classes:$(cat "$classpath")" io.redlock.demo.Main "$REDIS_URL"
rm -f "$classpath"
