#!/usr/bin/env bash
# THE bench command (issue 7's goals P1-P7): installs what is missing, starts ONE throwaway
# redis-server, runs every benchmark against it one after another — Rust (P1, P4, P5, P6, P7),
# Python (P2, P4), Java (P3, P4), Go (P3b, P4) — each comparison interleaved with its peers on
# that server, then merges their fragments (bench/FRAGMENTS.md) into
#   bench/results/<date>.json   every figure of the run, with the machine (<date>-2 ... for
#                               another run of the same day)
#   bench/results/<date>.md     the table (also printed)
#   bench/results/<date>.png    latency distributions and throughput per library
#
#   bench/run.sh                 full run (about 15 minutes on 2 cores, builds included)
#   BENCH_QUICK=1 bench/run.sh   a short smoke run (figures too noisy to quote)
#   BENCH_ONLY="rust go" ...     only some of: rust python java go
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi

date_tag="$(date +%F)"
# Another run on the same day gets files of its own (<date>-2, -3, ...), not the first's.
for n in $(seq 2 99); do
  [ -e "bench/results/$date_tag.json" ] || break
  date_tag="$(date +%F)-$n"
done
out="$(mktemp -d -t redlock-bench-XXXXXX)"
export BENCH_OUT="$out"
source scripts/lib-redis.sh
start_throwaway_redis
export REDIS_URL
echo "bench: redis-server at $REDIS_URL, fragments in $BENCH_OUT" >&2

# The hypervisor's steal over the whole run (/proc/stat, USER_HZ ticks): on a small VM it stops
# vCPUs for milliseconds at a time, which shows in the contended parts' waits.
steal_ticks() { awk '/^cpu / {print $9}' /proc/stat 2>/dev/null || true; }
steal_from="$(steal_ticks)"
bench_started=$SECONDS

only="${BENCH_ONLY:-rust python java go}"
failed=()
run_part() { # name, command...
  local name="$1"
  shift
  case " $only " in *" $name "*) ;; *) return 0 ;; esac
  echo "=== bench: $name" >&2
  local started=$SECONDS
  if ! "$@"; then
    failed+=("$name")
    echo "bench: $name FAILED (the report covers the other parts)" >&2
  fi
  echo "=== bench: $name took $((SECONDS - started)) s" >&2
}
run_part rust bench/rust/run.sh
run_part python bench/python/run.sh
run_part java scripts/bench-java.sh
run_part go bench/go/run.sh

machine="$(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB; redis-server and every client on the same machine"
steal_to="$(steal_ticks)"
if [ -n "$steal_from" ] && [ -n "$steal_to" ] && [ $((SECONDS - bench_started)) -gt 0 ]; then
  machine="$machine; host steal during the run: $(awk -v t=$((steal_to - steal_from)) \
    -v s=$((SECONDS - bench_started)) -v n="$(nproc)" 'BEGIN {printf "%.1f", t / s / n}') % of the vCPUs' time"
fi
py=.venv-bench/bin/python # has matplotlib (made by bench/python/run.sh)
[ -x "$py" ] || py=python3
"$py" bench/report.py "$BENCH_OUT" --out bench/results --date "$date_tag" \
  --machine "$machine"
echo "bench: wrote bench/results/$date_tag.{json,md,png}" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "bench: parts that failed: ${failed[*]}" >&2
  exit 1
fi
