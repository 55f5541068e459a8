"""Callbacks that call back into the library (from the reentry audit, 2026-11-27): every call
from a lost callback answers, closing inside the callback with events queued, a chain of losses
raised from the callback arrives in order, and slow callbacks of many clients."""

from __future__ import annotations

import asyncio
import queue
import threading
import time

import redlock_sdk as rl


def _release_later(url: str, prefix: str, name: str, after: float) -> threading.Thread:
    other = rl.Client(url, prefix=prefix)
    lock = other.lock(name, owner=f"releaser-{time.monotonic_ns()}", lease=30)
    assert lock.acquire(blocking=False, lease=30)

    def run() -> None:
        time.sleep(after)
        lock.release()
        other.close()

    t = threading.Thread(target=run)
    t.start()
    return t


def test_every_call_from_a_lost_callback_answers(redis_server, prefix: str) -> None:
    url = redis_server.url
    results: queue.Queue = queue.Queue()
    me: list[rl.Client] = []

    def on_lost(event: rl.LockLostEvent) -> None:
        if event.name != "watched":
            results.put(("other event", event.name))
            return
        client = me[0]
        t = _release_later(url, prefix, "busy", 0.3)
        lock = client.lock("busy")
        start = time.monotonic()
        got = lock.acquire(timeout=5)
        results.put(("waited", got, time.monotonic() - start))
        t.join()
        lock.extend(10)
        results.put(("extend", None))
        results.put(("inspect", len(lock.inspect()["holders"])))
        results.put(("release", lock.release()))
        try:
            lock.release()
            results.put(("release again", "no error"))
        except rl.NotHeldError as e:
            results.put(("release again", type(e).__name__))
        fresh = client.lock("fresh")
        results.put(("fresh", fresh.acquire(blocking=False)))
        results.put(("force", client.force_unlock("fresh")))

        async def in_asyncio() -> tuple[bool, int]:
            alock = client.lock("async")
            ok = await alock.acquire_async(timeout=1)
            return ok, await alock.release_async()

        results.put(("asyncio", asyncio.run(in_asyncio())))
        with rl.Client(url, prefix=prefix) as newc:
            nl = newc.lock("new-client")
            results.put(("new client", nl.acquire(timeout=0.5), nl.release()))
        client.close()
        try:
            client.inspect("x")
            results.put(("after close", "no error"))
        except rl.LockError as e:
            results.put(("after close", type(e).__name__))
        results.put(("done",))

    client = rl.Client(url, prefix=prefix, lease=0.9, recheck_interval=60, on_lock_lost=on_lost)
    me.append(client)
    t = _release_later(url, prefix, "busy", 0.3)
    lock = client.lock("busy")
    start = time.monotonic()
    assert lock.acquire(timeout=5)
    outside = time.monotonic() - start
    lock.release()
    t.join()
    print("outside a callback:", outside)

    watched = client.lock("watched")
    assert watched.acquire()
    with rl.Client(url, prefix=prefix) as admin:
        assert admin.force_unlock("watched")
    seen = []
    while not seen or seen[-1] != ("done",):
        seen.append(results.get(timeout=20))
        print(seen[-1])
    d = {s[0]: s[1:] for s in seen}
    assert d["waited"][0] is True
    # Woken by its notification (~0.3 s), not by waiting out its timeout.
    assert d["waited"][1] < 4.0, (d["waited"], outside)
    assert d["inspect"] == (1,)
    assert d["release"] == (0,)
    assert d["release again"] == ("NotHeldError",)
    assert d["fresh"] == (True,)
    assert d["force"] == (True,)
    assert d["asyncio"] == ((True, 0),)
    assert d["new client"] == (True, 0)
    assert d["after close"] == ("ClientClosedError",)


def test_closing_inside_the_callback_with_events_queued(redis_server, prefix: str) -> None:
    seen: list[str] = []
    me: list[rl.Client] = []

    def on_lost(event: rl.LockLostEvent) -> None:
        if not seen:
            time.sleep(0.05)
            me[0].close()
        seen.append(event.name)

    client = rl.Client(redis_server.url, prefix=prefix, lease=0.9, on_lock_lost=on_lost)
    me.append(client)
    locks = [client.lock(f"q{i}") for i in range(30)]
    for lk in locks:
        assert lk.acquire(blocking=False)
    redis_server.command("FLUSHALL")
    deadline = time.monotonic() + 10
    while not seen:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(1.5)
    assert client.closed
    print(len(seen), "callbacks")


def test_a_chain_of_losses_from_the_callback(redis_server, prefix: str) -> None:
    n = 100
    seen: list[str] = []
    threads_seen: set[int] = set()
    me: list[rl.Client] = []

    def on_lost(event: rl.LockLostEvent) -> None:
        seen.append(event.name)
        threads_seen.add(threading.get_ident())
        i = int(event.name.split(":")[1])
        if i + 1 < n:
            me[0].force_unlock(f"chain:{i + 1}")

    client = rl.Client(redis_server.url, prefix=prefix, lease=0.9, on_lock_lost=on_lost)
    me.append(client)
    locks = [client.lock(f"chain:{i}", owner=f"tok-{i}") for i in range(n)]
    for lk in locks:
        assert lk.acquire(blocking=False)
    before = threading.active_count()
    with rl.Client(redis_server.url, prefix=prefix) as admin:
        admin.force_unlock("chain:0")
    deadline = time.monotonic() + 60
    while len(seen) < n:
        assert time.monotonic() < deadline, len(seen)
        time.sleep(0.05)
    assert seen == [f"chain:{i}" for i in range(n)]
    assert threading.active_count() <= before + 2
    client.close()


def test_many_clients_with_slow_callbacks(redis_server, prefix: str) -> None:
    got: dict[int, list[str]] = {}
    clients = []
    for c in range(10):
        got[c] = []

        def on_lost(event: rl.LockLostEvent, c: int = c) -> None:
            time.sleep(0.05)
            got[c].append(event.name)

        client = rl.Client(
            redis_server.url, prefix=f"{prefix}-{c}", lease=0.9, on_lock_lost=on_lost
        )
        clients.append(client)
        for i in range(10):
            assert client.lock(f"s{i}", owner=f"o{i}").acquire(blocking=False)
    before = threading.active_count()
    redis_server.command("FLUSHALL")
    deadline = time.monotonic() + 20
    while sum(len(v) for v in got.values()) < 100:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    during = threading.active_count()
    assert during <= before + 10, (before, during)
    for c in clients:
        c.close()
