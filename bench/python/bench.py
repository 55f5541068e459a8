"""Python lock libraries on one redis-server, in one run: redlock_sdk, redis-py's Lock,
python-redis-lock and pottery's Redlock.

Uncontended: acquire+release cycles of one thread (cycles/s, p50/p99 of one cycle).
Contended: 4 processes x 500 sections of one lock (sections/s, wait p50/p99/max, how often the
lock changes hands, Redis commands per section from INFO commandstats, which counts the commands
run inside Lua scripts too). One more untimed contended run per library under MONITOR splits
them into round trips (commands sent by clients) and commands run by scripts.
Runs are interleaved (the library order rotates every repetition) and medians are reported.

    python bench/python/bench.py [--reps 3] [--cycles 2000] [--sections 500] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
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
    "redlock_sdk": redlock_sdk_lock,
    "redis-py Lock": redis_py_lock,
    "python-redis-lock": python_redis_lock,
    "pottery Redlock": pottery_redlock,
}

# -- measurements ------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def uncontended(make, url: str, cycles: int) -> dict:
    acquire, release = make(url, "uncontended")
    for _ in range(100):  # warm up connections and script caches
        acquire()
        release()
    times = []
    started = time.perf_counter()
    for _ in range(cycles):
        t0 = time.perf_counter()
        acquire()
        release()
        times.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - started
    return {
        "cycles_per_s": cycles / elapsed,
        "p50_us": percentile(times, 50) * 1e6,
        "p99_us": percentile(times, 99) * 1e6,
    }


def contender(make, url: str, sections: int, start, out) -> None:
    acquire, release = make(url, "contended")
    acquire()
    release()
    start.wait()
    rows = []
    for _ in range(sections):
        t0 = time.monotonic()
        acquire()
        t1 = time.monotonic()
        release()
        rows.append((t1, t1 - t0))
    out.put(rows)


def command_count(r: redis.Redis) -> int:
    stats = r.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")


def contended(make, url: str, sections: int) -> dict:
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
    admin = redis.Redis.from_url(url)
    before = command_count(admin)
    began = time.monotonic()
    start.set()
    results = [out.get(timeout=600) for _ in workers]
    ended = time.monotonic()
    after = command_count(admin)
    for w in workers:
        w.join(60)
    timeline = sorted((t, pid) for pid, rows in enumerate(results) for t, _ in rows)
    handoffs = sum(1 for i in range(1, len(timeline)) if timeline[i][1] != timeline[i - 1][1])
    waits = [w for rows in results for _, w in rows]
    total = PROCESSES * sections
    return {
        "sections_per_s": total / (ended - began),
        "wait_p50_ms": percentile(waits, 50) * 1e3,
        "wait_p99_ms": percentile(waits, 99) * 1e3,
        "wait_max_ms": max(waits) * 1e3,
        "handoffs": handoffs,
        "commands_per_section": (after - before) / total,
    }


class MonitorCount:
    """Counts the commands Redis runs, from MONITOR: those sent by clients (round trips) and
    those run inside Lua scripts."""

    END = "bench-monitor-end"

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
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
    monitor = MonitorCount(admin.connection_pool.connection_kwargs["port"])
    contended(make, url, sections)
    monitor.stop(admin)
    total = PROCESSES * sections
    return {
        "round_trips_per_section": monitor.sent / total,
        "script_commands_per_section": monitor.scripted / total,
    }


def medians(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--sections", type=int, default=500)
    parser.add_argument("--only", nargs="*", default=list(LIBRARIES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    names = [n for n in LIBRARIES if n in args.only]
    runs: dict[str, dict[str, list[dict]]] = {
        n: {"uncontended": [], "contended": []} for n in names
    }
    with redis_url() as url:
        for rep in range(args.reps):
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for name in order:
                make = LIBRARIES[name]
                runs[name]["uncontended"].append(uncontended(make, url, args.cycles))
                runs[name]["contended"].append(contended(make, url, args.sections))
                print(f"rep {rep + 1}/{args.reps} {name}: done", file=sys.stderr, flush=True)
        report = {n: {kind: medians(r) for kind, r in runs[n].items()} for n in names}
        for name in names:  # untimed: MONITOR slows Redis down
            report[name]["monitored"] = round_trips(LIBRARIES[name], url, args.sections)
    print_report(report, args)
    if args.json:
        args.json.write_text(json.dumps({"medians": report, "runs": runs}, indent=2))


def print_report(report: dict, args) -> None:
    base = report.get("redis-py Lock")
    print(f"\nmedians of {args.reps} interleaved runs, one redis-server on 127.0.0.1")
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
        f"{'handoffs':>10}{'cmds/section':>14}{'round trips':>13}{'in scripts':>12}"
    )
    for name, r in report.items():
        c, m = r["contended"], r["monitored"]
        print(
            f"{name:<20}{c['sections_per_s']:>11.0f}{c['wait_p50_ms']:>12.2f}"
            f"{c['wait_p99_ms']:>9.2f}{c['wait_max_ms']:>9.1f}{c['handoffs']:>10.0f}"
            f"{c['commands_per_section']:>14.2f}{m['round_trips_per_section']:>13.2f}"
            f"{m['script_commands_per_section']:>12.2f}"
        )


if __name__ == "__main__":
    main()
