#!/usr/bin/env bash
# Uncontended acquire+release cycles/s through the Rust blocking API, the C ABI and Go, on ONE
# throwaway redis-server, interleaved (rust, c, go, rust, c, go, ...) so that drift of the
# machine hits every language alike. Also times one ABI call that does no I/O (C and Go): what
# the C layer (and cgo) add per call. Target: the C ABI adds under 2 µs per call.
#
# The end-to-end figures of separate processes differ by tens of µs from run to run on a small
# machine (Redis shares its cores), so the ABI's cost is measured two more ways: the same cycles
# through the C functions inside the Rust bench's process, alternating round by round with the
# Rust API (the paired difference), and one ABI call that does no I/O.
#
#   scripts/bench-c-go.sh [cycles per round (1000)] [rounds per run (10)] [runs (3)]
set -euo pipefail
cd "$(dirname "$0")/.."
cycles="${1:-1000}"
rounds="${2:-10}"
runs="${3:-3}"
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi

libdir="$(scripts/build-ffi.sh --example bench_blocking)"
make --no-print-directory -C bindings/c LIBDIR="$libdir" build/bench >/dev/null
prefix="$(dirname "$libdir")/redlock-c-install"
scripts/install-c.sh "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig" LD_LIBRARY_PATH="$prefix/lib" GOTOOLCHAIN=local
(cd bindings/go && go test -c -o "$prefix/redlock-go.test" . >/dev/null)

source scripts/lib-redis.sh
start_throwaway_redis
results="$(mktemp)"
for run in $(seq 1 "$runs"); do
  echo "--- run $run of $runs ($rounds rounds of $cycles cycles each)"
  "$libdir/examples/bench_blocking" "$REDIS_URL" "$cycles" "$rounds" | tee -a "$results" | grep RESULT
  bindings/c/build/bench "$REDIS_URL" "$cycles" "$rounds" | tee -a "$results" | grep RESULT
  REDLOCK_BENCH_URL="$REDIS_URL" "$prefix/redlock-go.test" -test.run '^$' -test.bench . \
    -test.benchtime "${cycles}x" -test.count "$rounds" | tee -a "$results" | grep Benchmark
done

python3 - "$results" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
rounds = {
    "rust": [float(x) for x in re.findall(r"^rust: round \d+: ([\d.]+) us/cycle", text, re.M)],
    "c": [float(x) for x in re.findall(r"^c: round \d+: ([\d.]+) us/cycle", text, re.M)],
    "go": [float(x) / 1000 for x in re.findall(r"^BenchmarkAcquireRelease\S*\s+\d+\s+([\d.]+) ns/op", text, re.M)],
}
paired = [float(x) for x in re.findall(r"^abi-in-process: round \d+: ([\d.]+) us/cycle", text, re.M)]
rust_rounds = rounds["rust"]
noio = {
    "c": [float(x) for x in re.findall(r"noio_ns=([\d.]+)", text)],
    "go": [float(x) for x in re.findall(r"^BenchmarkABICallWithoutIO\S*\s+\d+\s+([\d.]+) ns/op", text, re.M)],
}
rust = statistics.median(rounds["rust"])
print()
print(f"{'':6}{'median us/cycle':>16}{'cycles/s':>10}{'vs rust':>9}{'added us/call':>15}  (rounds)")
for lang, values in rounds.items():
    m = statistics.median(values)
    # A cycle is two calls (acquire, release).
    print(f"{lang:6}{m:16.1f}{1e6 / m:10.0f}{m / rust:9.2f}{(m - rust) / 2:15.2f}  ({len(values)})")
if paired:
    added = statistics.median([(a - r) / 2 for a, r in zip(paired, rust_rounds)])
    print(f"{'c-abi in the Rust process':26} median {statistics.median(paired):.1f} us/cycle; "
          f"paired with the Rust rounds it adds {added:+.2f} us per call")
print()
print("one ABI call without I/O (handle look-up, checks, panic guard; Go: plus cgo):")
for lang, values in noio.items():
    print(f"  {lang}: median {statistics.median(values):.0f} ns over {len(values)} runs")
PY
rm -f "$results"
