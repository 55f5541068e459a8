"""Do P4's long waits coincide with the hypervisor stopping a vCPU? (see "Long waits" in
docs/benchmarks-history.md)

Runs the Go bench's contended workers (4 processes on one lock, as `bench/go` does) under
`perf record -a` sampling cpu-clock every 0.1 ms on each CPU. A CPU that goes 2 ms without a
sample (idle CPUs are sampled too) was not running: its vCPU was stopped by the host. For every
wait of 10 ms or more it says whether such a stop overlapped it, and prints the steal that
/proc/stat counted. Needs root (perf -a), perf, and the Go bench built (`bench/go/run.sh`):

    REDIS_URL=redis://127.0.0.1:PORT LD_LIBRARY_PATH=target/redlock-bench-go-install/lib \\
      python3 bench/probe/p4_stalls.py target/redlock-bench-go-install/redlock-go-bench [runs]

perf samples 10 000 times a second per CPU, which costs the workers CPU: the waits are longer
than in the bench. What it shows is where the long ones come from, not their size.
"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

PROCESSES = 4
SECTIONS = 1500
WORKER = ["worker", "-lib", "redlock-go"]
GAP_S = 0.002  # 20 sample periods without a sample
LONG_MS = 10.0
PERF = ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-c", "100000", "-a"]


def steal_ticks() -> int:
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def run_workers(exe: str, scratch: str) -> list[list[int]]:
    """One run; rows [asked, got, release, done] in wall-clock ns."""
    name = f"p4-stalls:{time.time_ns()}"
    check = os.path.join(scratch, "check")
    workers = [
        subprocess.Popen(
            [
                exe,
                *WORKER,
                "-lock",
                name,
                "-sections",
                str(SECTIONS),
                "-check",
                check,
                "-id",
                f"{i}",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    for w in workers:
        if w.stdout.readline().strip() != "ready":
            sys.exit("a worker did not get ready")
    for w in workers:
        w.stdin.write("go\n")
        w.stdin.flush()
    rows = [row for w in workers for row in json.loads(w.stdout.readline())["rows"]]
    for w in workers:
        w.stdin.close()
        w.wait()
    return rows


def stalls(perf_data: str) -> list[tuple[float, float]]:
    """(start, end) in CLOCK_MONOTONIC seconds of every stretch a CPU went without a sample."""
    out = subprocess.run(
        ["perf", "script", "-i", perf_data, "-F", "cpu,time"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    last: dict[int, float] = {}
    found = []
    for m in re.finditer(r"\[(\d+)\]\s+(\d+\.\d+):", out):
        cpu, at = int(m[1]), float(m[2])
        if cpu in last and at - last[cpu] > GAP_S:
            found.append((last[cpu], at))
        last[cpu] = at
    return found


def overlaps(start: float, end: float, gaps: list[tuple[float, float]]) -> bool:
    return any(a < end and b > start for a, b in gaps)


def main() -> None:
    exe = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as scratch:
        data, rows_file = os.path.join(scratch, "perf.data"), os.path.join(scratch, "rows")
        for n in range(runs):
            # Wall clock (the workers') minus the monotonic clock (perf's), for the mapping.
            offset = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
            before = steal_ticks()
            started = time.monotonic()
            subprocess.run(
                [*PERF, "-o", data, "--", sys.executable, __file__, "--worker-run", exe, rows_file],
                check=True,
                stderr=subprocess.DEVNULL,
            )
            stolen = (steal_ticks() - before) / os.sysconf("SC_CLK_TCK")
            elapsed = time.monotonic() - started
            with open(rows_file) as f:
                rows = json.load(f)
            # In monotonic ns, and only the stops while sections ran.
            rows = [[t - offset for t in r] for r in rows]
            first, last = min(r[0] for r in rows), max(r[3] for r in rows)
            gaps = [
                (a * 1e9, b * 1e9) for a, b in stalls(data) if first < b * 1e9 and a * 1e9 < last
            ]
            long = [r for r in rows if (r[1] - r[0]) / 1e6 >= LONG_MS]
            covered = sum(1 for r in long if overlaps(r[0], r[1], gaps))
            # The control: the same waits moved to random times of the run.
            tries = [
                (r, random.uniform(first, last - (r[1] - r[0]))) for r in long for _ in range(200)
            ]
            by_chance = sum(1 for r, at in tries if overlaps(at, at + r[1] - r[0], gaps))
            worst = max((b - a for a, b in gaps), default=0.0)
            print(
                f"run {n + 1}: {len(rows)} sections, wait max "
                f"{max(r[1] - r[0] for r in rows) / 1e6:.1f} ms; waits >= {LONG_MS:.0f} ms: "
                f"{len(long)}, overlapping a vCPU stop: {covered} (moved to random times: "
                f"{100 * by_chance / max(len(tries), 1):.0f} %); vCPU stops >= "
                f"{GAP_S * 1e3:.0f} ms: {len(gaps)} (longest {worst / 1e6:.1f} ms); steal "
                f"{100 * stolen / (elapsed * os.cpu_count()):.1f} % of the vCPUs' time",
                flush=True,
            )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker-run":
        with tempfile.TemporaryDirectory() as scratch, open(sys.argv[3], "w") as out:
            json.dump(run_workers(sys.argv[2], scratch), out)
    else:
        main()
