#!/usr/bin/env bash
# Builds libredlock (release) and copies it into the Java module's resources, where the jar
# bundles it and io.redlock.NativeLibrary extracts it at run time. The copy is a build product
# (gitignored), never committed.
set -euo pipefail
cd "$(dirname "$0")/.."
libdir="$(scripts/build-ffi.sh)"
case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=macos ;;
  *) echo "bundle-java-native: unsupported OS $(uname -s)" >&2; exit 1 ;;
esac
arch="$(uname -m)"
[ "$arch" = arm64 ] && arch=aarch64
dest="bindings/java/src/main/resources/native/$os-$arch"
mkdir -p "$dest"
cp "$libdir/libredlock.so" "$dest/libredlock.so"
# The release profile keeps debug info for profiling; the jar does not need it (30 MB -> ~9 MB).
if command -v strip >/dev/null 2>&1; then
  strip --strip-debug "$dest/libredlock.so"
fi
echo "bundled $libdir/libredlock.so -> $dest/" >&2
