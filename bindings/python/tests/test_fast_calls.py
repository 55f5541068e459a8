"""Acquire and release go through plain C calls (redlock_sdk/_fast.py): their errors must arrive
as the same exceptions, once, on the thread that made the call."""

from __future__ import annotations

import threading

import pytest
import redlock_sdk as rl
from redlock_sdk import _fast, _native


def test_an_error_is_raised_once_and_a_later_call_is_clean(client: rl.Client) -> None:
    lock = client.lock("fast-once")
    with pytest.raises(rl.NotHeldError):
        lock.release()
    with pytest.raises(rl.NotHeldError):  # double release: the same answer, not a stale one
        lock.release()
    assert _native.raise_stashed_error() is None  # taken by the raise above
    assert lock.acquire(blocking=False)
    assert lock.acquire(blocking=False)  # reentrant
    assert lock.release() == 1
    assert lock.release() == 0
    with pytest.raises(rl.NotHeldError):
        lock.release()


def test_a_busy_try_is_false_and_leaves_no_error(client: rl.Client, other_client) -> None:
    other_client.lock("fast-busy", owner=rl.new_owner_token()).acquire(lease=30)
    lock = client.lock("fast-busy")
    assert lock.acquire(blocking=False) is False
    assert lock.acquire(timeout=0.05) is False
    assert _native.raise_stashed_error() is None


def test_each_thread_gets_its_own_error(client: rl.Client) -> None:
    """Errors are kept per thread: two threads failing at once each get their own."""
    rw = client.rw_lock("fast-threads")
    barrier = threading.Barrier(2)
    seen: dict[str, list[type]] = {"reader": [], "stranger": []}

    def reader() -> None:
        with rw.read_lock():
            barrier.wait()
            for _ in range(50):
                try:
                    rw.write_lock().acquire()  # an upgrade
                except rl.LockError as e:
                    seen["reader"].append(type(e))

    def stranger() -> None:
        barrier.wait()
        for _ in range(50):
            try:
                client.lock("fast-threads-other").release()
            except rl.LockError as e:
                seen["stranger"].append(type(e))

    threads = [threading.Thread(target=reader), threading.Thread(target=stranger)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert seen["reader"] == [rl.UpgradeNotAllowedError] * 50
    assert seen["stranger"] == [rl.NotHeldError] * 50


def test_a_closed_client_through_the_fast_calls(redis_server, prefix: str) -> None:
    client = rl.Client(redis_server.url, prefix=prefix)
    lock = client.lock("fast-closed")
    assert lock.acquire(lease=30)
    client.close()
    with pytest.raises(rl.ClientClosedError):
        lock.release()
    with pytest.raises(rl.ClientClosedError):
        lock.acquire(blocking=False)


def test_unknown_ids_are_invalid_arguments() -> None:
    """Ids no live object has (the layer above never passes one) fail cleanly, not crash."""
    for lock_id in (0, 2**64 - 1):
        assert _fast.release(lock_id, 1) == -1
        with pytest.raises(_native.NativeError.InvalidArgument, match="no live lock"):
            _fast.raise_error()
        assert _fast.acquire(lock_id, 1, 0.0, -1.0, 0.0, 1) == -1
        with pytest.raises(_native.NativeError.InvalidArgument):
            _fast.raise_error()


def test_a_live_lock_with_an_unknown_owner_id(client: rl.Client) -> None:
    lock = client.lock("fast-owner")
    assert _fast.acquire(lock._id, 2**64 - 1, 0.0, -1.0, 0.0, 1) == -1
    with pytest.raises(_native.NativeError.InvalidArgument, match="no live owner"):
        _fast.raise_error()
    assert not lock.locked()


def test_raise_error_without_an_error_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="without an error"):
        _fast.raise_error()
