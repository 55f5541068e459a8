#!/usr/bin/env bash
# Java: runs the JUnit 5 suite of the Maven module, whose build compiles libredlock (release) and
# bundles it as a resource (each test class starts its own throwaway redis-server on a free loopback port).
# Honours CARGO_TARGET_DIR and REDLOCK_FFI_FEATURES (see scripts/build-ffi.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "test-java: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Runs `mvn test` with the arguments given, printing Surefire's per-class and total counts, or
# the whole log and a failure naming `what`.
maven_test() {
  local what="$1"
  shift
  local log
  log="$(mktemp -t redlock-java-test-XXXXXX.log)"
  if mvn -B -ntp -f bindings/java/pom.xml test "$@" >"$log" 2>&1; then
    grep -E 'Tests run:|BUILD' "$log" | sed -e 's/^\[INFO\] //'
    rm -f "$log"
  else
    cat "$log"
    echo "test-java: $what failed (log: $log)" >&2
    exit 1
  fi
}

# The module's pom builds libredlock and bundles it (scripts/bundle-java-native.sh).
echo "--- Java suite (mvn test)"
maven_test "the Java suite"

# Virtual threads need Java 21+; the module targets 17 (--release 17). When the machine has a
# newer JDK beside the default one, VirtualThreadTest runs again under it (its tests skip on 17).
newer_jdk=""
for home in /usr/lib/jvm/*; do
  release="$home/release"
  [ -x "$home/bin/java" ] && [ -f "$release" ] || continue
  major="$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$release")"
  if [ -n "$major" ] && [ "$major" -ge 21 ]; then
    newer_jdk="$home"
    break
  fi
done
if [ -n "$newer_jdk" ]; then
  echo "--- Java: VirtualThreadTest under $newer_jdk"
  JAVA_HOME="$newer_jdk" maven_test "VirtualThreadTest under $newer_jdk" \
    -Dredlock.skipNativeBuild=true -Dtest=VirtualThreadTest
else
  echo "--- Java: no JDK 21+ beside the default one; VirtualThreadTest's tests were skipped"
fi
