"""Seed 002: 5 processes x 5 threads take keys from a shared counter inside one lock: no key
is taken twice and none is skipped. Waiters of one process queue locally first, so only one
of them at a time asks Redis (the seed's "process lock first")."""

from __future__ import annotations

import multiprocessing
import tempfile
import threading
import time
from pathlib import Path

import redlock_sdk as rl

KEYS = 500


def worker_process(lock: rl.Lock, counter: Path, out: Path) -> None:
    taken: list[int] = []
    guard = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                key = int(counter.read_text())  # not atomic on its own ...
                if key >= KEYS:
                    return
                counter.write_text(str(key + 1))  # ... safe only inside the lock
            with guard:
                taken.append(key)

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.write_text(",".join(map(str, taken)))


def main(url: str) -> None:
    print(f"seed 002: 5 processes x 5 threads take {KEYS} keys")
    with rl.Client(url, prefix="demo002") as client, tempfile.TemporaryDirectory() as tmp:
        lock = client.lock("key-generator")
        counter = Path(tmp, "counter")
        counter.write_text("0")
        outs = [Path(tmp, f"p{i}") for i in range(5)]
        fork = multiprocessing.get_context("fork")
        started = time.monotonic()
        procs = [fork.Process(target=worker_process, args=(lock, counter, o)) for o in outs]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        elapsed = time.monotonic() - started
        per_process = [len([k for k in o.read_text().split(",") if k]) for o in outs]
        keys = sorted(int(k) for o in outs for k in o.read_text().split(",") if k)
        duplicates = len(keys) - len(set(keys))
        gaps = sorted(set(range(KEYS)) - set(keys))
        print(f"   {len(keys)} keys in {elapsed:.2f} s, per process {per_process}")
        print(
            f"   duplicates: {duplicates}, gaps: {len(gaps)} -> "
            f"{'OK' if not duplicates and not gaps else 'BROKEN'}"
        )
