"""The Python worker of the cross-language tests: see tests/cross/PROTOCOL.md."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import redlock_sdk as rl

USAGE = "usage: worker.py MODE REDIS_URL LOCK_NAME ARG..."


def append_line(path: str, line: str) -> None:
    """One write of one whole line to a file opened with O_APPEND: lines never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def record(path: str, value: int, fencing: int, wait_us: int) -> None:
    append_line(path, f"python {os.getpid()} {value} {fencing} {wait_us}")


def timed_acquire(lock: rl.Lock) -> int:
    started = time.perf_counter_ns()
    if not lock.acquire():
        raise RuntimeError("acquire without a timeout returned False")
    return (time.perf_counter_ns() - started) // 1000


def mutex(client: rl.Client, name: str, counter: str, sections: int, out: str) -> None:
    lock = client.lock(name)
    for _ in range(sections):
        wait_us = timed_acquire(lock)
        try:
            text = Path(counter).read_text() if os.path.exists(counter) else ""
            value = int(text.strip() or 0) + 1
            with open(counter, "w") as f:  # truncate and write: a non-atomic resource
                f.write(str(value))
            record(out, value, lock.fencing_token, wait_us)
        finally:
            lock.release()


def read_write(client: rl.Client, mode: str, name: str, log: str, sections: int, out: str) -> None:
    rw = client.rw_lock(name)
    lock = rw.read_lock() if mode == "read" else rw.write_lock()
    tag = "R" if mode == "read" else "W"
    for index in range(1, sections + 1):
        wait_us = timed_acquire(lock)
        try:
            append_line(log, f"enter {tag} {os.getpid()}")
            time.sleep(0.002)
            append_line(log, f"exit {tag} {os.getpid()}")
            record(out, index, lock.fencing_token, wait_us)
        finally:
            lock.release()


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(USAGE, file=sys.stderr)
        return 2
    mode, url, name, args = argv[1], argv[2], argv[3], argv[4:]
    recheck = 60.0 if mode == "wait" else None
    with rl.Client(url, prefix="cross", recheck_interval=recheck) as client:
        if mode == "mutex" and len(args) == 3:
            mutex(client, name, args[0], int(args[1]), args[2])
        elif mode in ("read", "write") and len(args) == 3:
            read_write(client, mode, name, args[0], int(args[1]), args[2])
        elif mode == "hold" and len(args) == 1:
            lock = client.lock(name, owner=args[0])
            if not lock.acquire(lease=60.0):
                raise RuntimeError("acquire without a timeout returned False")
            print(f"held {lock.fencing_token}", flush=True)
        elif mode == "release" and len(args) == 1:
            remaining = client.lock(name, owner=args[0]).release()
            print(f"released {remaining}", flush=True)
        elif mode == "wait" and len(args) == 1:
            lock = client.lock(name)
            Path(args[0]).touch()
            timed_acquire(lock)
            acquired_ms = time.time_ns() // 1_000_000
            print(f"acquired {lock.fencing_token} {acquired_ms}", flush=True)
            lock.release()
        else:
            print(USAGE, file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
