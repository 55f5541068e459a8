"""Seed 001: the five pitfalls of a SETNX lock, and what redlock_sdk does about each."""

from __future__ import annotations

import threading
import time

import redlock_sdk as rl


def other_thread(fn):
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def main(url: str) -> None:
    print("seed 001: SETNX pitfalls")
    with rl.Client(url, prefix="demo001", lease=0.6) as client:
        lock = client.lock("stock:1")

        print("1. lock and expiry are one step: an explicit lease is set atomically")
        lock.acquire(lease=5)
        print(f"   ttl right after acquire: {client.inspect('stock:1')['ttl']:.2f} s")
        lock.release()

        print("2. nobody releases someone else's lock")
        lock.acquire()

        def release_foreign():
            try:
                lock.release()
                return "released?!"
            except rl.NotHeldError as e:
                return f"NotHeldError: {e}"

        print(f"   another thread: {other_thread(release_foreign)}")

        print("3. a long job keeps its lock: the watchdog renews it (lease here is 0.6 s)")
        time.sleep(1.5)
        print(
            f"   after 1.5 s still owned: {lock.owned()}, others get it: "
            f"{other_thread(lambda: lock.acquire(blocking=False))}"
        )

        print("4. reentrant: the owner may take it again")
        lock.acquire()
        print(f"   hold count {lock.hold_count}")
        lock.release()
        lock.release()

        print("5. waiting is by notification, not by polling")
        lock.acquire()
        got: list[float] = []
        t = threading.Thread(
            target=lambda: (lock.acquire(), got.append(time.monotonic()), lock.release())
        )
        t.start()
        time.sleep(0.3)
        released = time.monotonic()
        lock.release()
        t.join()
        print(f"   the waiter had it {1000 * (got[0] - released):.1f} ms after the release")

        print("cluster failover: fencing tokens let the resource refuse an old writer")
        with lock:
            first = lock.fencing_token
        with lock:
            second = lock.fencing_token
        print(f"   tokens {first} < {second}: a store that saw {second} rejects {first}")
