"""A hold removed behind the holder's back is reported lost, never silently kept."""

from __future__ import annotations

import threading
import time

import pytest
import redlock_sdk as rl


def test_release_after_force_unlock_raises_lock_lost(
    client: rl.Client, other_client: rl.Client
) -> None:
    lock = client.lock("lost")
    lock.acquire()  # kept by the watchdog
    assert other_client.force_unlock("lost") is True
    assert not lock.owned()
    assert lock.fencing_token is None
    with pytest.raises(rl.LockLostError):
        lock.release()


def test_lost_inside_with_surfaces_at_exit(client: rl.Client, other_client: rl.Client) -> None:
    lock = client.lock("lost-with")
    with pytest.raises(rl.LockLostError), lock:
        other_client.force_unlock("lost-with")


def test_own_force_unlock_ends_the_hold(client: rl.Client) -> None:
    lock = client.lock("lost-kind")
    lock.acquire()
    client.force_unlock("lost-kind")
    # The core reports this client's own watched holds lost at once; the release says so, and
    # a second release finds nothing (LockLostError is a NotHeldError: one except covers both).
    with pytest.raises(rl.LockLostError):
        lock.release()
    with pytest.raises(rl.NotHeldError) as second:
        lock.release()
    assert not isinstance(second.value, rl.LockLostError)


def test_watchdog_reports_a_lost_hold_to_the_callback(
    redis_server, prefix: str, other_client: rl.Client
) -> None:
    events: list[rl.LockLostEvent] = []
    seen = threading.Event()

    def on_lost(event: rl.LockLostEvent) -> None:
        events.append(event)
        seen.set()

    with rl.Client(redis_server.url, prefix=prefix, lease=0.3, on_lock_lost=on_lost) as client:
        lock = client.lock("lost-callback")
        lock.acquire()
        other_client.force_unlock("lost-callback")
        assert seen.wait(3)
        (event,) = events
        assert event == rl.LockLostEvent(name="lost-callback", mode="write", owner=lock.token)
        # Once the watchdog has reported the loss, the core forgets the hold and a release says
        # NotHeld (LockLostError would be a NotHeldError too).
        with pytest.raises(rl.NotHeldError):
            lock.release()


def test_contention_alert_names_the_holder(redis_server, prefix: str) -> None:
    alerts: list[rl.ContentionAlert] = []
    seen = threading.Event()

    def on_contention(alert: rl.ContentionAlert) -> None:
        alerts.append(alert)
        seen.set()

    with rl.Client(
        redis_server.url, prefix=prefix, contention_alert_after=0.2, on_contention=on_contention
    ) as client:
        lock = client.lock("contended")
        lock.acquire()
        holder = lock.token
        waiter = threading.Thread(target=lambda: lock.acquire(timeout=1.0))
        started = time.monotonic()
        waiter.start()
        assert seen.wait(3)
        assert time.monotonic() - started < 1.0
        waiter.join(5)
        alert = alerts[0]
        assert alert.name == "contended" and alert.mode == "write"
        assert alert.waited >= 0.2 and alert.failed_attempts >= 1
        assert alert.owner != holder
        assert [h["owner"] for h in alert.holders] == [holder]
        lock.release()


def test_a_failing_callback_is_logged_not_fatal(
    redis_server, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    called = threading.Event()

    def broken(_event: object) -> None:
        called.set()
        raise RuntimeError("boom")

    with rl.Client(redis_server.url, prefix=prefix, on_lock_lost=broken) as client:
        lock = client.lock("broken-callback")
        lock.acquire()
        client.force_unlock("broken-callback")
        assert called.wait(3)
        time.sleep(0.1)
        assert lock.acquire(blocking=False)  # the client still works
        lock.release()
    assert any("callback raised" in r.getMessage() for r in caplog.records)


def test_a_storm_of_lost_holds_runs_one_callback_at_a_time(redis_server, prefix: str) -> None:
    # A Redis that drops every hold at once (flushed, failed over) reports thousands of losses:
    # one thread for them, in order, not a thread each (before: 300 threads, all stuck here).
    gate = threading.Event()
    seen: list[str] = []
    callers: set[int] = set()

    def on_lost(event: rl.LockLostEvent) -> None:
        seen.append(event.name)
        callers.add(threading.get_ident())
        gate.wait(30)

    def callback_threads() -> int:
        return sum(t.name == "redlock-callback" for t in threading.enumerate())

    with rl.Client(redis_server.url, prefix=prefix, lease=0.3, on_lock_lost=on_lost) as client:
        locks = [client.lock(f"storm-{i}") for i in range(300)]
        for lock in locks:
            lock.acquire()
        before = callback_threads()  # (other tests' clients may still have one)
        redis_server.command(
            "EVAL",
            "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end",
            "0",
            f"{prefix}*",
        )
        deadline = time.monotonic() + 10
        while any(lock.owned() for lock in locks):
            assert time.monotonic() < deadline, "the losses were not all found"
            time.sleep(0.05)
        time.sleep(0.3)
        assert callback_threads() <= before + 1
        assert len(seen) == 1
        gate.set()
        while len(seen) < 300:
            assert time.monotonic() < deadline + 10, f"{len(seen)} of 300 callbacks ran"
            time.sleep(0.05)
        assert sorted(seen) == sorted(f"storm-{i}" for i in range(300))
        assert len(callers) == 1
