# Sourced by test-cross.sh and demo.sh: builds what every language's cross worker needs and
# exports the variables of tests/cross/PROTOCOL.md.
#   prepare_cross   builds libredlock, installs it into a staging prefix (C, Go), compiles the
#                   Java module (the native library bundled inside) and makes sure a venv
#                   imports redlock_sdk (.venv-test, made by test-python.sh, or a new one)

prepare_cross() {
  local root libdir
  root="$(pwd)"
  if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
  fi
  libdir="$(scripts/build-ffi.sh)"
  export REDLOCK_ROOT="$root"
  export REDLOCK_PREFIX="$(dirname "$libdir")/redlock-c-install"
  scripts/install-c.sh "$REDLOCK_PREFIX" >&2
  # Not PKG_CONFIG_PATH: the C and Go workers' build scripts add the prefix themselves. Exported,
  # it would reach the Rust worker's cargo build, and a changed PKG_CONFIG_PATH makes cargo run
  # openssl-sys' build script again and rebuild openssl, redis and the core (80 s).
  export LD_LIBRARY_PATH="$REDLOCK_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CGO_ENABLED=1 GOTOOLCHAIN=local
  # Maven's output (with its stray colour resets) is shown only when the build fails.
  local mvn_log
  mvn_log="$(mktemp -t redlock-mvn-XXXXXX.log)"
  if ! mvn -q -B -ntp -f bindings/java/pom.xml compile >"$mvn_log" 2>&1; then
    cat "$mvn_log" >&2
    rm -f "$mvn_log"
    return 1
  fi
  rm -f "$mvn_log"
  export REDLOCK_JAVA_CLASSES="$root/bindings/java/target/classes"
  if ! .venv-test/bin/python -c 'import redlock_sdk' >/dev/null 2>&1; then
    scripts/python-venv.sh .venv-test >&2
  fi
  export REDLOCK_PYTHON="$root/.venv-test/bin/python"
}
