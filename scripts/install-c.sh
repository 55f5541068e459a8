#!/usr/bin/env bash
# Installs the C library: PREFIX/include/redlock.h, PREFIX/lib/libredlock.{so,a} and
# PREFIX/lib/pkgconfig/redlock.pc. Builds the library first (scripts/build-ffi.sh).
#
#   scripts/install-c.sh /usr/local        (then: sudo ldconfig)
#   scripts/install-c.sh "$HOME/.local"     (then: PKG_CONFIG_PATH=$HOME/.local/lib/pkgconfig,
#                                            LD_LIBRARY_PATH=$HOME/.local/lib)
set -euo pipefail
if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 PREFIX" >&2
  exit 2
fi
repo="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
prefix="$(cd "$1" && pwd)"
libdir="$("$repo/scripts/build-ffi.sh")"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)"

install -d "$prefix/include" "$prefix/lib/pkgconfig"
install -m 644 "$repo/bindings/c/include/redlock.h" "$prefix/include/redlock.h"
install -m 755 "$libdir/libredlock.so" "$prefix/lib/libredlock.so"
install -m 644 "$libdir/libredlock.a" "$prefix/lib/libredlock.a"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" -e "s|@LIBDIR_NAME@|lib|" \
  "$repo/bindings/c/redlock.pc.in" >"$prefix/lib/pkgconfig/redlock.pc"
echo "install-c: libredlock $version installed under $prefix" >&2
