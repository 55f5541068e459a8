#!/usr/bin/env bash
# Installs what every build and test needs on a fresh machine. Idempotent; safe to re-run.
set -euo pipefail

need_apt=()
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
dpkg -s libssl-dev >/dev/null 2>&1 || need_apt+=(libssl-dev)
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || need_apt+=(make)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# No redis service is used: every test and demo starts its own redis-server on a free port.
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo (rustup) is required" >&2; exit 1; }
# Debian's Go is older than the module needs; the machine's Go lives in /usr/local/go.
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  echo "setup: Go 1.24 or newer is required (https://go.dev/doc/install)" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
echo "setup: ok ($(redis-server --version | cut -d' ' -f3), $(cargo --version))"
