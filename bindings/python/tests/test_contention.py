"""Contention: 8 threads, and seed 002's 5 processes x 5 threads taking keys from a counter."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import redlock_sdk as rl


class Section:
    """A deliberately non-atomic critical section that notices two holders at once."""

    def __init__(self) -> None:
        self.inside = 0
        self.max_inside = 0
        self.total = 0

    def run(self) -> None:
        self.inside += 1
        self.max_inside = max(self.max_inside, self.inside)
        seen = self.total
        time.sleep(0.001)  # invite a race
        self.total = seen + 1
        self.inside -= 1


def hammer(section: Section, enter, threads: int = 8, rounds: int = 25) -> None:
    def worker():
        for _ in range(rounds):
            with enter():
                section.run()

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert not w.is_alive()


def test_eight_threads_exclude_each_other(client: rl.Client) -> None:
    lock = client.lock("eight")
    section = Section()
    hammer(section, lambda: lock)
    assert section.max_inside == 1
    assert section.total == 8 * 25
    assert not lock.locked()


def test_the_check_detects_a_race_without_the_lock() -> None:
    """Control: the same section without the lock does overlap, so the test above can fail."""
    section = Section()

    class NoLock:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    hammer(section, NoLock, rounds=5)
    assert section.max_inside > 1 and section.total < 8 * 5


# -- seed 002: 5 processes x 5 threads, keys from a shared counter, no duplicate, no gap --------

KEYS = 300


def take_keys(lock: rl.Lock, counter: Path, out: Path) -> None:
    """One process: 5 threads take keys from the counter file inside the lock."""
    taken: list[int] = []
    guard = threading.Lock()

    def worker():
        while True:
            with lock:
                key = int(counter.read_text())  # read ...
                if key >= KEYS:
                    return
                time.sleep(0.0005)
                counter.write_text(str(key + 1))  # ... then write: only safe inside the lock
            with guard:
                taken.append(key)

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.write_text(",".join(map(str, taken)))


def test_five_processes_of_five_threads_take_each_key_once(
    client: rl.Client, tmp_path: Path
) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    lock = client.lock("key-generator")
    with lock:  # the parent used the client before forking: children must still work
        pass
    fork = multiprocessing.get_context("fork")
    outputs = [tmp_path / f"keys-{i}" for i in range(5)]
    processes = [fork.Process(target=take_keys, args=(lock, counter, out)) for out in outputs]
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
        assert p.exitcode == 0, f"worker exit code {p.exitcode}"
    keys = [int(k) for out in outputs for k in out.read_text().split(",") if k]
    assert sorted(keys) == list(range(KEYS))  # no duplicate, no gap
    assert sum(1 for out in outputs if out.read_text()) >= 2  # the work really was shared
    assert not lock.locked()
