"""The contract's rules for the exclusive reentrant lock, through the Python API."""

from __future__ import annotations

import threading
import time

import pytest
import redlock_sdk as rl


def in_thread(fn):
    """Runs `fn` in another thread (another default owner) and returns its result."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(30)
    assert not t.is_alive()
    return out[0]


def test_with_holds_and_releases(client: rl.Client) -> None:
    lock = client.lock("orders:42")
    assert not lock.locked()
    with lock as held:
        assert held is lock
        assert lock.locked() and lock.owned()
        assert lock.hold_count == 1
        assert isinstance(lock.fencing_token, int)
    assert not lock.locked() and not lock.owned()
    assert lock.hold_count == 0
    assert lock.fencing_token is None


def test_one_owner_at_a_time(client: rl.Client) -> None:
    lock = client.lock("one")
    assert lock.acquire()
    assert in_thread(lambda: lock.acquire(blocking=False)) is False
    assert in_thread(lambda: lock.owned()) is False
    lock.release()
    assert in_thread(lambda: lock.acquire(blocking=False)) is True


def test_reentrant_counts_and_keeps_its_token(client: rl.Client) -> None:
    lock = client.lock("reentrant")
    assert lock.acquire()
    token = lock.fencing_token
    assert lock.acquire(timeout=1)
    assert lock.hold_count == 2
    assert lock.fencing_token == token
    assert lock.release() == 1
    assert lock.locked()
    assert lock.release() == 0
    assert not lock.locked()


def test_release_by_non_owner_fails_and_changes_nothing(client: rl.Client) -> None:
    lock = client.lock("guarded")
    lock.acquire()

    def release_elsewhere():
        with pytest.raises(rl.NotHeldError):
            lock.release()
        return lock.locked()

    assert in_thread(release_elsewhere) is True
    assert lock.hold_count == 1
    lock.release()
    with pytest.raises(rl.NotHeldError):
        lock.release()


def test_fencing_tokens_strictly_increase(client: rl.Client) -> None:
    lock = client.lock("fenced")
    seen = []
    for _ in range(5):
        with lock:
            seen.append(lock.fencing_token)
    assert seen == sorted(seen) and len(set(seen)) == 5


def test_timeout_returns_false_in_time(client: rl.Client) -> None:
    lock = client.lock("busy")
    lock.acquire()

    def try_for_a_while():
        started = time.monotonic()
        ok = lock.acquire(timeout=0.3)
        return ok, time.monotonic() - started

    ok, waited = in_thread(try_for_a_while)
    assert ok is False
    assert 0.25 <= waited < 2.0
    lock.release()


def test_with_on_a_lock_with_timeout_raises_lock_timeout(client: rl.Client) -> None:
    holder = client.lock("with-timeout")
    holder.acquire()

    def enter():
        impatient = client.lock("with-timeout", timeout=0.2)
        with pytest.raises(rl.LockTimeoutError), impatient:
            pass
        return True

    assert in_thread(enter)
    holder.release()


def test_waiter_gets_the_lock_soon_after_release(client: rl.Client) -> None:
    lock = client.lock("handoff")
    lock.acquire()
    got = threading.Event()
    released_at: list[float] = []
    acquired_at: list[float] = []

    def waiter():
        assert lock.acquire(timeout=10)
        acquired_at.append(time.monotonic())
        got.set()
        lock.release()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    assert not got.is_set()
    released_at.append(time.monotonic())
    lock.release()
    t.join(10)
    assert got.is_set()
    # Woken by notification, not by polling the lease.
    assert acquired_at[0] - released_at[0] < 0.2


def test_lease_expires_without_watchdog(client: rl.Client) -> None:
    lock = client.lock("leased")
    assert lock.acquire(lease=0.2)
    assert 0 < client.inspect("leased")["ttl"] <= 0.2
    time.sleep(0.35)
    assert not lock.locked()
    assert in_thread(lambda: lock.acquire(blocking=False))
    with pytest.raises(rl.NotHeldError):
        lock.release()


def test_watchdog_keeps_a_hold_past_its_lease(redis_server, prefix: str) -> None:
    with rl.Client(redis_server.url, prefix=prefix, lease=0.3) as client:
        lock = client.lock("watched")
        with lock:
            time.sleep(0.8)
            assert lock.owned()
            assert not in_thread(lambda: lock.acquire(blocking=False))


def test_extend(client: rl.Client) -> None:
    lock = client.lock("extended")
    lock.acquire(lease=0.3)
    lock.extend(lease=5.0)
    time.sleep(0.4)
    assert lock.owned()
    assert client.inspect("extended")["ttl"] > 4
    lock.release()
    with pytest.raises(rl.NotHeldError):
        lock.extend(lease=1.0)


def test_explicit_owner_hands_a_hold_to_another_thread(client: rl.Client) -> None:
    lock = client.lock("token-owned")
    lock.acquire(lease=10)
    token = lock.token

    def release_with_token():
        other = client.lock("token-owned", owner=token)
        assert other.token == token
        assert other.owned()
        return other.release()

    assert in_thread(release_with_token) == 0
    assert not lock.locked()


def test_owner_tokens_are_per_thread(client: rl.Client) -> None:
    lock = client.lock("tokens")
    mine = lock.token
    assert lock.token == mine
    assert in_thread(lambda: lock.token) != mine
    assert client.lock("other-name").token == mine  # the owner is the thread, not the lock


def test_inspect_describes_holders(client: rl.Client) -> None:
    lock = client.lock("inspected")
    free = client.inspect("inspected")
    assert free["mode"] is None and free["holders"] == [] and free["ttl"] is None
    with lock:
        lock.acquire()
        info = client.inspect("inspected")
        assert info["name"] == "inspected"
        assert info["mode"] == "write"
        assert 0 < info["ttl"] <= 30
        assert info["fencing_token"] >= lock.fencing_token
        (holder,) = info["holders"]
        assert holder["owner"] == lock.token
        assert holder["hold_count"] == 2
        assert holder["fencing_token"] == lock.fencing_token
        assert holder["thread"] == threading.current_thread().name
        assert holder["pid"] > 0 and holder["host"]
        assert holder["held_for"] is not None and holder["held_for"] >= 0
        lock.release()
    assert lock.inspect()["holders"] == []


def test_a_label_replaces_the_thread_name_in_inspect(client: rl.Client) -> None:
    lock = client.lock("labelled", label="billing job 7")
    with lock:
        (holder,) = client.inspect("labelled")["holders"]
        assert holder["thread"] == "billing job 7"
    reader = client.rw_lock("labelled", label="report").read_lock()
    with reader:
        (holder,) = client.inspect("labelled")["holders"]
        assert holder["thread"] == "report" and holder["mode"] == "read"
    with pytest.raises(rl.InvalidArgumentError):
        client.lock("labelled", label="")
    with pytest.raises(rl.InvalidArgumentError):
        client.lock("labelled", label=7)  # type: ignore[arg-type]


def test_force_unlock_frees_and_wakes_waiters(client: rl.Client) -> None:
    lock = client.lock("forced")
    lock.acquire(lease=30)
    woke = threading.Event()

    def waiter():
        if lock.acquire(timeout=10):
            woke.set()
            lock.release()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    assert client.force_unlock("forced") is True
    t.join(5)
    assert woke.is_set()
    assert client.force_unlock("forced") is False
    with pytest.raises(rl.NotHeldError):
        lock.release()


def test_any_name_is_legal_and_names_do_not_collide(client: rl.Client) -> None:
    names = ["a{b}c", "a", "a:b", "with space", "🔒 lock", "x" * 1024, "{", "}", "%7B"]
    locks = [client.lock(n) for n in names]
    for lock in locks:
        assert lock.acquire(blocking=False)
    for lock in locks:
        assert lock.hold_count == 1
        lock.release()
