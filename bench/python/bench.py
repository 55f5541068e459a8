"""Python lock libraries on one redis-server, in one run: redlock_sdk, redis-py's Lock,
python-redis-lock and pottery's Redlock.

Uncontended: acquire+release cycles of one thread (cycles/s, p50/p99 of one cycle).
Contended: 4 processes x N sections of one lock (sections/s, wait p50/p99/max, how often the
lock changes hands, hand-off time from a release to the acquire of a holder that was already
waiting, Redis commands per section from INFO commandstats, which counts the commands run inside
Lua scripts too). One more untimed contended run per library under MONITOR splits them into
round trips (commands sent by clients) and commands run by scripts. 200 redis-py PINGs, timed in
each contended repetition while its workers wait for the start, give the round-trip time that
the hand-off is compared with (the median of the repetitions' p50s); 1000 more at the start are
printed.
asyncio: acquire_async+release_async cycles of one task against redis.asyncio's Lock (no goal
of issue 7 names it: an "info" fragment).
Runs are interleaved (the library order rotates every repetition; uncontended cycles also take
turns in slices within one); throughput figures are
medians of the repetitions, latency and wait figures are over the samples of all repetitions.

    python bench/python/bench.py [--reps 3] [--cycles 2000] [--sections 500] [--json out.json]
        [--fragments DIR]   # writes P2-python.json, P4-python.json and info-python-asyncio.json
                            # (bench/FRAGMENTS.md)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python-demo"))
from _server import redis_url

PROCESSES = 4
OURS = "redlock_sdk"
PEER = "redis-py Lock"  # what the P2 headline divides by
PINGS = 1000
PINGS_PER_RUN = 200  # timed before each contended repetition, as Go's (300) and Java's (200)
SLICES = 10  # stretches per library and repetition of the uncontended runs (see uncontended)
SAMPLES = 2000  # latency samples kept per series in a fragment

# -- the libraries, each as: make(url, name) -> (acquire, release) --------------------------


def redlock_sdk_lock(url: str, name: str) -> tuple[Callable, Callable]:
    import redlock_sdk as rl

    lock = rl.Client(url, prefix="bench-rl").lock(name)
    return lock.acquire, lock.release


def redis_py_lock(url: str, name: str) -> tuple[Callable, Callable]:
    lock = redis.Redis.from_url(url).lock(f"bench-py:{name}")
    return lock.acquire, lock.release


def python_redis_lock(url: str, name: str) -> tuple[Callable, Callable]:
    import redis_lock

    lock = redis_lock.Lock(redis.Redis.from_url(url), f"bench-prl:{name}")
    return lock.acquire, lock.release


def pottery_redlock(url: str, name: str) -> tuple[Callable, Callable]:
    from pottery import Redlock

    lock = Redlock(key=f"bench-pottery:{name}", masters={redis.Redis.from_url(url)})
    return lock.acquire, lock.release


LIBRARIES = {
    OURS: redlock_sdk_lock,
    PEER: redis_py_lock,
    "python-redis-lock": python_redis_lock,
    "pottery Redlock": pottery_redlock,
}

# asyncio: make(url, cycles) -> coroutine of uncontended()'s result, on a loop of its own
ASYNC_OURS = "redlock_sdk (asyncio)"
ASYNC_PEER = "redis.asyncio Lock"


async def redlock_sdk_async(url: str, cycles: int) -> tuple[dict, list[float]]:
    import redlock_sdk as rl

    with rl.Client(url, prefix="bench-rl") as client:
        lock = client.lock("uncontended-async")
        return await timed_async(lock.acquire_async, lock.release_async, cycles)


async def redis_py_async(url: str, cycles: int) -> tuple[dict, list[float]]:
    import redis.asyncio

    r = redis.asyncio.Redis.from_url(url)
    try:
        lock = r.lock("bench-py:uncontended-async")
        return await timed_async(lock.acquire, lock.release, cycles)
    finally:
        await r.aclose()


ASYNC_LIBRARIES = {ASYNC_OURS: redlock_sdk_async, ASYNC_PEER: redis_py_async}


# -- measurements ------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def ping_rtts_us(url: str, count: int = PINGS, warm_up: int = 100) -> list[float]:
    """Round trips of redis-py PINGs on one connection, in µs."""
    r = redis.Redis.from_url(url)
    for _ in range(warm_up):
        r.ping()
    times = []
    for _ in range(count):
        t0 = time.perf_counter_ns()
        r.ping()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return times


def uncontended(
    names: list[str], url: str, cycles: int, rep: int
) -> dict[str, tuple[dict, list[float]]]:
    """One repetition of every library in `names`: its summary and the time of every cycle in
    µs. The libraries take turns in SLICES stretches each (the order rotating every slice): on a
    virtual machine whose idle vCPUs are slow to wake, a round trip's cost drifts over seconds,
    and one stretch per library and repetition measured the drift as much as the library
    (docs/benchmarks.md)."""
    locks = {name: LIBRARIES[name](url, "uncontended") for name in names}
    for acquire, release in locks.values():
        for _ in range(100):  # warm up connections and script caches
            acquire()
            release()
    per_slice = -(-cycles // SLICES)
    times: dict[str, list[float]] = {name: [] for name in names}
    elapsed = dict.fromkeys(names, 0.0)
    for piece in range(SLICES):
        k = (rep * SLICES + piece) % len(names)
        for name in names[k:] + names[:k]:
            acquire, release = locks[name]
            started = time.perf_counter()
            for _ in range(per_slice):
                t0 = time.perf_counter()
                acquire()
                release()
                times[name].append((time.perf_counter() - t0) * 1e6)
            elapsed[name] += time.perf_counter() - started
    return {
        name: (
            {
                "cycles_per_s": len(times[name]) / elapsed[name],
                "p50_us": percentile(times[name], 50),
                "p99_us": percentile(times[name], 99),
            },
            times[name],
        )
        for name in names
    }


async def timed_async(acquire, release, cycles: int) -> tuple[dict, list[float]]:
    """uncontended() for one asyncio task."""
    for _ in range(100):
        await acquire()
        await release()
    times = []
    started = time.perf_counter()
    for _ in range(cycles):
        t0 = time.perf_counter()
        await acquire()
        await release()
        times.append((time.perf_counter() - t0) * 1e6)
    elapsed = time.perf_counter() - started
    return {"cycles_per_s": cycles / elapsed}, times


def contender(make, url: str, sections: int, start, out) -> None:
    """One process: per section the wall-clock ns when it asked, held, and started releasing."""
    acquire, release = make(url, "contended")
    acquire()
    release()
    start.wait()
    rows = []
    for _ in range(sections):
        asked = time.time_ns()
        acquire()
        acquired = time.time_ns()
        releasing = time.time_ns()
        release()
        rows.append((asked, acquired, releasing))
    out.put(rows)


def steal_ticks() -> int | None:
    """The vCPU ticks the hypervisor has stolen from this machine so far (Linux /proc/stat), or
    None: it stalls vCPUs, and waits of 10+ ms coincide with it."""
    try:
        with open("/proc/stat") as f:
            return int(f.readline().split()[8])
    except (OSError, ValueError, IndexError):
        return None


def command_count(r: redis.Redis) -> int:
    stats = r.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")


def contended(make, url: str, sections: int) -> tuple[dict, dict]:
    """One repetition: its summary, and its samples (waits, hand-offs and the PINGs timed while
    the workers wait for the start, in µs; the seconds stolen from the machine's vCPUs and the
    timed seconds, when /proc/stat can be read)."""
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    out = ctx.Queue()
    workers = [
        ctx.Process(target=contender, args=(make, url, sections, start, out))
        for _ in range(PROCESSES)
    ]
    for w in workers:
        w.start()
    time.sleep(0.5)  # every worker connected and warmed up
    # The hand-off's divisor, in the moment of this repetition (the machine's round trip moves
    # by several times within an hour).
    pings = ping_rtts_us(url, PINGS_PER_RUN, warm_up=20)
    admin = redis.Redis.from_url(url)
    before = command_count(admin)
    stolen_before = steal_ticks()
    began = time.monotonic()
    start.set()
    results = [out.get(timeout=600) for _ in workers]
    ended = time.monotonic()
    stolen_after = steal_ticks()
    after = command_count(admin)
    for w in workers:
        w.join(60)
    # (acquired, asked, release started, process) in the order the lock was taken
    timeline = sorted(
        (acquired, asked, releasing, pid)
        for pid, rows in enumerate(results)
        for asked, acquired, releasing in rows
    )
    hand_changes = 0
    handoffs = []  # release start -> next acquire, when the next holder was already waiting
    for prev, cur in zip(timeline, timeline[1:]):
        hand_changes += cur[3] != prev[3]
        if cur[1] <= prev[2]:
            handoffs.append((cur[0] - prev[2]) / 1e3)
    waits = [(acquired - asked) / 1e3 for acquired, asked, _, _ in timeline]
    total = PROCESSES * sections
    summary = {
        "sections_per_s": total / (ended - began),
        "wait_p50_ms": percentile(waits, 50) / 1e3,
        "wait_p99_ms": percentile(waits, 99) / 1e3,
        "wait_max_ms": max(waits) / 1e3,
        "handoffs": hand_changes,
        "commands_per_section": (after - before) / total,
        "ping_p50_us": percentile(pings, 50),
    }
    if handoffs:
        summary["handoff_p50_us"] = percentile(handoffs, 50)
    rows = {"waits_us": waits, "handoffs_us": handoffs, "stolen_s": [], "timed_s": []}
    if stolen_before is not None and stolen_after is not None:
        rows["stolen_s"].append((stolen_after - stolen_before) / os.sysconf("SC_CLK_TCK"))
        rows["timed_s"].append(ended - began)
    return summary, rows


class MonitorCount:
    """Counts the commands Redis runs, from MONITOR: those sent by clients (round trips) and
    those run inside Lua scripts."""

    END = "bench-monitor-end"

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.sendall(b"MONITOR\r\n")
        self.file = self.sock.makefile("rb")
        assert self.file.readline().startswith(b"+OK")
        self.sent = self.scripted = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.file:
            if self.END.encode() in line:
                return
            if b" lua] " in line:
                self.scripted += 1
            else:
                self.sent += 1

    def stop(self, admin: redis.Redis) -> None:
        admin.echo(self.END)
        self.thread.join(120)
        self.sock.close()


def round_trips(make, url: str, sections: int) -> dict:
    admin = redis.Redis.from_url(url)
    kwargs = admin.connection_pool.connection_kwargs
    monitor = MonitorCount(kwargs.get("host", "127.0.0.1"), kwargs["port"])
    contended(make, url, sections)
    monitor.stop(admin)
    total = PROCESSES * sections
    return {
        "round_trips_per_section": monitor.sent / total,
        "script_commands_per_section": monitor.scripted / total,
    }


def medians(runs: list[dict]) -> dict:
    keys = [k for k in runs[0] if all(k in r for r in runs)]
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument(
        "--sections", type=int, help="per process (default 500; 1000 with --fragments)"
    )
    parser.add_argument("--only", nargs="*", default=list(LIBRARIES))
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--fragments", type=Path, metavar="DIR", help="write P2-python.json, P4-python.json"
    )
    args = parser.parse_args()
    if args.sections is None:
        args.sections = 1000 if args.fragments else 500
    names = [n for n in LIBRARIES if n in args.only]
    runs: dict[str, dict[str, list[dict]]] = {
        n: {"uncontended": [], "contended": []} for n in names
    }
    samples: dict[str, dict[str, list[float]]] = {
        n: {"cycles_us": [], "waits_us": [], "handoffs_us": [], "stolen_s": [], "timed_s": []}
        for n in names
    }
    async_names = list(ASYNC_LIBRARIES) if OURS in names and PEER in names else []
    async_runs: dict[str, list[dict]] = {n: [] for n in async_names}
    async_samples: dict[str, list[float]] = {n: [] for n in async_names}
    with redis_url() as url:
        host = redis.Redis.from_url(url).connection_pool.connection_kwargs.get("host")
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit(f"only a loopback redis-server is benchmarked here, not {host}")
        pings = ping_rtts_us(url)
        for rep in range(args.reps):
            for name, (summary, cycles_us) in uncontended(names, url, args.cycles, rep).items():
                runs[name]["uncontended"].append(summary)
                samples[name]["cycles_us"] += cycles_us
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for name in order:
                make = LIBRARIES[name]
                summary, rows = contended(make, url, args.sections)
                runs[name]["contended"].append(summary)
                samples[name]["waits_us"] += rows["waits_us"]
                samples[name]["handoffs_us"] += rows["handoffs_us"]
                samples[name]["stolen_s"] += rows["stolen_s"]
                samples[name]["timed_s"] += rows["timed_s"]
                print(f"rep {rep + 1}/{args.reps} {name}: done", file=sys.stderr, flush=True)
            order = async_names[rep % 2 :] + async_names[: rep % 2]
            for name in order:
                summary, cycles_us = asyncio.run(ASYNC_LIBRARIES[name](url, args.cycles))
                async_runs[name].append(summary)
                async_samples[name] += cycles_us
        report = {n: {kind: medians(r) for kind, r in runs[n].items()} for n in names}
        for name in names:  # untimed: MONITOR slows Redis down
            report[name]["monitored"] = round_trips(LIBRARIES[name], url, args.sections)
    for name in names:  # figures over the samples of every repetition
        s = samples[name]
        report[name]["uncontended"].update(
            p50_us=percentile(s["cycles_us"], 50), p99_us=percentile(s["cycles_us"], 99)
        )
        waits = s["waits_us"]
        pooled = {
            "wait_p50_ms": percentile(waits, 50) / 1e3,
            "wait_p99_ms": percentile(waits, 99) / 1e3,
            "wait_max_ms": max(waits) / 1e3,
        }
        if s["handoffs_us"]:
            pooled["handoff_p50_us"] = percentile(s["handoffs_us"], 50)
            # Over the median of the repetitions' own PING p50s (as Go's), from medians().
            ping_p50 = report[name]["contended"]["ping_p50_us"]
            pooled["handoff_p50_rtt"] = pooled["handoff_p50_us"] / ping_p50
        report[name]["contended"].update(pooled)
    print_report(report, args, pings)
    async_report = {n: medians(r) for n, r in async_runs.items()}
    print_async_report(async_report, async_samples, args)
    if args.json:
        everything = {"medians": report, "runs": runs, "asyncio": async_runs}
        args.json.write_text(json.dumps(everything, indent=2))
    if args.fragments:
        for path in write_fragments(args, names, runs, report, samples, pings):
            print(f"wrote {path}", file=sys.stderr)
        if async_names:
            path = write_async_fragment(args, async_runs, async_samples)
            print(f"wrote {path}", file=sys.stderr)


# -- fragments (bench/FRAGMENTS.md) -------------------------------------------------------------


def spread(values: list[float]) -> dict:
    return {
        "runs": [round(v, 1) for v in values],
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
    }


def latency(values_us: list[float]) -> dict:
    kept = values_us if len(values_us) <= SAMPLES else random.Random(0).sample(values_us, SAMPLES)
    return {
        "p50": round(percentile(values_us, 50), 1),
        "p99": round(percentile(values_us, 99), 1),
        "max": round(max(values_us), 1),
        "samples": [round(v, 1) for v in kept],
    }


NUMBER_LIST = re.compile(r"\[\s*((?:-?[\d.eE+-]+,\s*)*-?[\d.eE+-]+)\s*\]")  # one line each


def write_fragments(args, names, runs, report, samples, pings) -> list[Path]:
    args.fragments.mkdir(parents=True, exist_ok=True)
    ping = {k: round(percentile(pings, p), 1) for k, p in (("p50", 50), ("p99", 99))}
    ping["count"] = len(pings)
    defaults = (
        "defaults of every library (redlock_sdk: watchdog-kept holds; redis-py: 100 ms polling;"
        " python-redis-lock: BLPOP hand-off; pottery: single-master Redlock)"
    )

    # P2: uncontended acquire+release
    series = []
    for name in names:
        per_rep = [r["cycles_per_s"] for r in runs[name]["uncontended"]]
        series.append(
            {
                "library": name,
                "metric": "cycles/s",
                "better": "higher",
                **spread(per_rep),
                "latency_us": latency(samples[name]["cycles_us"]),
            }
        )
    by_name = {s["library"]: s for s in series}
    value = None
    if OURS in by_name and PEER in by_name:
        value = round(by_name[OURS]["median"] / by_name[PEER]["median"], 3)
        for s in series:
            s["extra"] = {"vs_redis_py": round(s["median"] / by_name[PEER]["median"], 3)}
    p2 = {
        "goal": "P2",
        "title": "Python: uncontended acquire+release",
        "target": ">= 1.5x redis-py",
        "headline": {
            "label": f"{OURS} / {PEER} (median cycles/s)",
            "value": value,
            "met": value is not None and value >= 1.5,
        },
        "series": series,
        "ping_rtt_us": ping,
        "notes": (
            f"{args.reps} repetitions of {args.cycles} acquire+release cycles of one thread per "
            f"library, after 100 warm-up cycles, the libraries taking turns in {SLICES} slices "
            f"each per repetition (order rotating every slice); "
            f"latency = one cycle, over all repetitions; headline over redis-py's Lock; "
            f"{defaults}; one redis-server on 127.0.0.1"
        ),
    }

    # P4: contended sections
    series = []
    for name in names:
        c, m = report[name]["contended"], report[name]["monitored"]
        rep_max = statistics.median(r["wait_max_ms"] for r in runs[name]["contended"])
        extra = {
            "wait_p50_ms": round(c["wait_p50_ms"], 3),
            "wait_p99_ms": round(c["wait_p99_ms"], 3),
            "wait_max_ms": round(c["wait_max_ms"], 3),
            "wait_max_ms_rep_median": round(rep_max, 3),
            "hand_changes": c["handoffs"],
            "redis_cmds_per_section": round(m["round_trips_per_section"], 3),
            "script_cmds_per_section": round(m["script_commands_per_section"], 3),
            "commandstats_per_section": round(c["commands_per_section"], 3),
        }
        if "handoff_p50_us" in c:
            extra["handoff_p50_us"] = round(c["handoff_p50_us"], 1)
            extra["handoff_p50_rtt"] = round(c["handoff_p50_rtt"], 3)
        extra["ping_p50_us"] = round(c["ping_p50_us"], 1)
        extra["handoffs_counted"] = len(samples[name]["handoffs_us"])
        timed = sum(samples[name]["timed_s"])
        if timed:
            stolen = sum(samples[name]["stolen_s"])
            extra["steal_pct"] = round(100 * stolen / (timed * (os.cpu_count() or 1)), 1)
        per_rep = [r["sections_per_s"] for r in runs[name]["contended"]]
        series.append(
            {
                "library": name,
                "metric": "sections/s",
                "better": "higher",
                **spread(per_rep),
                "latency_us": latency(samples[name]["waits_us"]),
                "extra": extra,
            }
        )
    ours = next((s["extra"] for s in series if s["library"] == OURS), None)
    # The divisor of ours: the median of its repetitions' PING p50s.
    p4_ping = ping
    if OURS in runs:
        p4_ping = {
            "p50": round(report[OURS]["contended"]["ping_p50_us"], 1),
            "runs": [round(r["ping_p50_us"], 1) for r in runs[OURS]["contended"]],
            "count": PINGS_PER_RUN,
        }
    value, met = None, False
    if ours is not None and "handoff_p50_rtt" in ours:
        value = ours["handoff_p50_rtt"]
        met = value <= 2 and ours["wait_max_ms"] <= 10 and ours["redis_cmds_per_section"] <= 4
    p4 = {
        "goal": "P4",
        "title": f"Python: contended, {PROCESSES} processes x {args.sections} sections",
        "target": "hand-off p50 <= 2 RTT, wait max <= 10 ms, <= 4 commands/section",
        "headline": {
            "label": (
                f"{OURS} hand-off p50 / PING p50 (met: <= 2, with wait max <= 10 ms and"
                " <= 4 commands/section)"
            ),
            "value": value,
            "met": met,
        },
        "series": series,
        "ping_rtt_us": p4_ping,
        "notes": (
            f"{args.reps} interleaved repetitions of {PROCESSES} processes x {args.sections} "
            f"empty sections of one lock per library; latency_us = wait from asking to holding; "
            f"wait figures over all repetitions (wait_max_ms_rep_median = median of each "
            f"repetition's own max); steal_pct = share of the machine's vCPU time the "
            f"hypervisor stole during the timed repetitions (/proc/stat); hand-off = release "
            f"start -> next acquire returned, counted when the next holder was already waiting "
            f"(wall clock time.time_ns in the workers), p50 over all repetitions / the median "
            f"of the repetitions' p50s of {PINGS_PER_RUN} redis-py PINGs each, timed while the "
            f"workers wait for the start; hand_changes = median per repetition; "
            f"redis_cmds_per_section = round trips from one more untimed run under MONITOR; "
            f"{defaults}"
        ),
    }
    return [write_fragment(args.fragments / f"{f['goal']}-python.json", f) for f in (p2, p4)]


def write_async_fragment(args, runs: dict[str, list[dict]], samples: dict) -> Path:
    series = [
        {
            "library": name,
            "metric": "cycles/s",
            "better": "higher",
            **spread([r["cycles_per_s"] for r in per_rep]),
            "latency_us": latency(samples[name]),
        }
        for name, per_rep in runs.items()
    ]
    ratio = round(series[0]["median"] / series[1]["median"], 3)
    fragment = {
        "goal": "info",
        "title": "Python asyncio: uncontended acquire_async+release_async",
        "headline": {"label": f"{ASYNC_OURS} / {ASYNC_PEER} (median cycles/s)", "value": ratio},
        "series": series,
        "notes": (
            f"{args.reps} repetitions of {args.cycles} cycles of one task on a fresh loop, "
            f"after 100 warm-up cycles, alternating with P2's repetitions (order rotating); "
            f"defaults of both (redlock_sdk: a watchdog-kept hold; redis.asyncio: no expiry)"
        ),
    }
    return write_fragment(args.fragments / "info-python-asyncio.json", fragment)


def write_fragment(path: Path, fragment: dict) -> Path:
    """Writes a fragment as JSON, each list of numbers on one line."""
    text = json.dumps(fragment, indent=1, ensure_ascii=False)
    text = NUMBER_LIST.sub(
        lambda m: "[" + ", ".join(x.strip() for x in m[1].split(",")) + "]", text
    )
    path.write_text(text + "\n", encoding="utf-8")
    return path


def print_async_report(report: dict, samples: dict, args) -> None:
    if not report:
        return
    base = report[ASYNC_PEER]["cycles_per_s"]
    print(f"\nasyncio, uncontended ({args.cycles} acquire_async+release_async cycles, one task)")
    print(f"{'library':<24}{'cycles/s':>10}{'p50 us':>9}{'p99 us':>9}{'vs redis.asyncio':>18}")
    for name, r in report.items():
        p50, p99 = percentile(samples[name], 50), percentile(samples[name], 99)
        ratio = f"{r['cycles_per_s'] / base:.2f}x"
        print(f"{name:<24}{r['cycles_per_s']:>10.0f}{p50:>9.0f}{p99:>9.0f}{ratio:>18}")


def print_report(report: dict, args, pings: list[float]) -> None:
    base = report.get(PEER)
    print(
        f"\ncycles/s, sections/s, handoffs, cmds/section: medians of {args.reps} interleaved runs;"
        f" latencies, waits, hand-off: over all runs; one redis-server on 127.0.0.1"
    )
    print(
        f"PING round trip (redis-py, {len(pings)} at the start): "
        f"p50 {percentile(pings, 50):.0f} us, p99 {percentile(pings, 99):.0f} us"
    )
    print(f"\nuncontended ({args.cycles} acquire+release cycles, one thread)")
    print(f"{'library':<20}{'cycles/s':>10}{'p50 us':>9}{'p99 us':>9}{'vs redis-py':>13}")
    for name, r in report.items():
        u = r["uncontended"]
        ratio = f"{u['cycles_per_s'] / base['uncontended']['cycles_per_s']:.2f}x" if base else "-"
        print(
            f"{name:<20}{u['cycles_per_s']:>10.0f}{u['p50_us']:>9.0f}{u['p99_us']:>9.0f}{ratio:>13}"
        )
    print(f"\ncontended ({PROCESSES} processes x {args.sections} sections)")
    print(
        f"{'library':<20}{'sections/s':>11}{'wait p50 ms':>12}{'p99 ms':>9}{'max ms':>9}"
        f"{'handoffs':>10}{'hand-off us':>12}{'/ PING':>8}{'cmds/section':>14}"
        f"{'round trips':>13}{'in scripts':>12}"
    )
    for name, r in report.items():
        c, m = r["contended"], r["monitored"]
        handoff = f"{c['handoff_p50_us']:>12.0f}" if "handoff_p50_us" in c else f"{'-':>12}"
        rtt = f"{c['handoff_p50_rtt']:>8.2f}" if "handoff_p50_rtt" in c else f"{'-':>8}"
        print(
            f"{name:<20}{c['sections_per_s']:>11.0f}{c['wait_p50_ms']:>12.2f}"
            f"{c['wait_p99_ms']:>9.2f}{c['wait_max_ms']:>9.1f}{c['handoffs']:>10.0f}"
            f"{handoff}{rtt}{c['commands_per_section']:>14.2f}"
            f"{m['round_trips_per_section']:>13.2f}{m['script_commands_per_section']:>12.2f}"
        )


if __name__ == "__main__":
    main()
