"""asyncio: one owner per task, so tasks of one event loop exclude each other."""

from __future__ import annotations

import asyncio
import select
import time
from typing import TYPE_CHECKING

import pytest
import redlock_sdk as rl
from conftest import eventually_async
from redlock_sdk import _fast, _native

if TYPE_CHECKING:
    from conftest import RedisServer


def test_fifty_tasks_in_one_loop_exclude_each_other(client: rl.Client) -> None:
    lock = client.lock("tasks")
    inside = 0
    max_inside = 0
    done = 0

    async def task() -> None:
        nonlocal inside, max_inside, done
        for _ in range(3):
            async with lock:
                inside += 1
                max_inside = max(max_inside, inside)
                await asyncio.sleep(0)  # let the other tasks run while we hold it
                inside -= 1
                done += 1

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(*(task() for _ in range(50))), 60)

    asyncio.run(main())
    assert max_inside == 1
    assert done == 150
    assert not lock.locked()


def test_tasks_are_different_owners(client: rl.Client) -> None:
    lock = client.lock("task-owners")

    async def other_task_tries() -> tuple[bool, str]:
        return await lock.acquire_async(blocking=False), lock.token

    async def main() -> None:
        assert await lock.acquire_async()
        assert await lock.owned_async() and lock.owned()
        assert await lock.hold_count_async() == 1
        ok, token = await asyncio.create_task(other_task_tries())
        assert ok is False and token != lock.token
        assert await lock.acquire_async(timeout=1)  # re-entry by the same task
        assert await lock.release_async() == 1
        assert await lock.release_async() == 0
        assert not await lock.locked_async()
        with pytest.raises(rl.NotHeldError):
            await lock.release_async()

    asyncio.run(main())


def test_async_timeout_and_lease(client: rl.Client) -> None:
    lock = client.lock("async-timeout")

    async def main() -> None:
        await lock.acquire_async(lease=5)
        await lock.extend_async(10)

        async def contender() -> tuple[bool, float]:
            started = time.monotonic()
            return await lock.acquire_async(timeout=0.2), time.monotonic() - started

        ok, waited = await asyncio.create_task(contender())
        assert ok is False and 0.15 <= waited < 2
        info = await client.inspect_async("async-timeout")
        assert info["ttl"] > 5
        await lock.release_async()

    asyncio.run(main())


def test_cancelled_wait_leaves_nothing_behind(client: rl.Client) -> None:
    lock = client.lock("cancel")

    async def main() -> None:
        await lock.acquire_async()

        async def wait_in_own_task() -> bool:
            return await lock.acquire_async()

        waiter = asyncio.create_task(wait_in_own_task())
        # Polled for, not slept for: under load the waiter announces itself (and, cancelled,
        # withdraws) later than usual.
        await eventually_async(lambda: client.inspect("cancel")["waiting_writers"] == 1)
        assert client.inspect("cancel")["waiting_writers"] == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await lock.release_async()

        def nothing_left() -> bool:
            info = client.inspect("cancel")
            return info["holders"] == [] and info["waiting_writers"] == 0

        await eventually_async(nothing_left)
        info = client.inspect("cancel")
        assert info["holders"] == [] and info["waiting_writers"] == 0

    asyncio.run(main())


def test_timeout_around_acquire_async_releases_a_late_hold(client: rl.Client) -> None:
    """Cancelled right as the lock arrives: the hold must not stay behind with nobody to
    release it."""
    lock = client.lock("late")

    async def main() -> None:
        for _ in range(20):
            try:
                await asyncio.wait_for(lock.acquire_async(), 2)
            except asyncio.TimeoutError:
                holders = client.inspect("late")["holders"]
                pytest.fail(f"a cancelled acquire left a hold behind: {holders}")

            async def contender() -> None:
                try:
                    await asyncio.wait_for(lock.acquire_async(), 0.005)
                    await lock.release_async()
                except asyncio.TimeoutError:
                    pass

            task = asyncio.create_task(contender())
            await asyncio.sleep(0.004)
            await lock.release_async()
            await task
        # A hold granted to a cancelled acquire is given back in the background: polled for.
        await eventually_async(lambda: client.inspect("late")["holders"] == [])
        assert client.inspect("late")["holders"] == []

    asyncio.run(main())


def test_the_owner_is_the_task_that_calls(client: rl.Client) -> None:
    """`asyncio.wait_for` runs its awaitable in a task of its own on Python < 3.12: the
    acquire still belongs to the task that called `acquire_async`."""
    lock = client.lock("caller-task")

    async def main() -> None:
        assert await asyncio.wait_for(lock.acquire_async(), 5)
        assert await lock.owned_async()
        assert await asyncio.wait_for(lock.release_async(), 5) == 0

    asyncio.run(main())


def test_async_with_on_a_lock_with_timeout(client: rl.Client) -> None:
    lock = client.lock("async-with", timeout=0.1)

    async def main() -> None:
        async with lock:

            async def contender() -> None:
                with pytest.raises(rl.LockTimeoutError):
                    async with lock:
                        pass

            await asyncio.create_task(contender())

    asyncio.run(main())


def test_force_unlock_async(client: rl.Client) -> None:
    async def main() -> None:
        lock = client.lock("async-forced")
        await lock.acquire_async(lease=10)
        assert await client.force_unlock_async("async-forced") is True
        assert not await lock.locked_async()

    asyncio.run(main())


def _woken(wakeups: int, timeout: float) -> list[int]:
    """Waits up to ``timeout`` for the loop wake-ups' descriptor, then takes the woken calls."""
    import ctypes

    select.select([_fast.loop_fd(wakeups)], [], [], timeout)
    buffer = (ctypes.c_uint64 * 64)()
    taken = _fast.take_woken(wakeups, buffer, 64)
    assert taken >= 0
    return list(buffer[:taken])


def test_a_waiting_acquire_is_woken_through_its_loop_s_descriptor(
    client: rl.Client, other_client: rl.Client
) -> None:
    """The loop polls the call on its own thread and sleeps on its wake-ups' descriptor in
    between: while the call waits, it is woken only for re-checks (no busy loop); the release
    of the lock wakes it, and the next poll hands the hold out, once."""
    lock = client.lock("wake-fd")
    holder = other_client.lock("wake-fd", owner=rl.new_owner_token())
    assert holder.acquire(lease=30)
    wakeups = _fast.new_loop()
    assert wakeups > 0
    call = _fast.start_acquire(lock._id, lock._caller().id, 10.0, -1.0, wakeups)
    assert call > 0
    try:
        assert _fast.loop_fd(wakeups) == _fast.loop_fd(wakeups)
        polls = 0
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert _fast.drive(call) == _fast.RUNNING
            polls += 1
            assert set(_woken(wakeups, max(deadline - time.monotonic(), 0))) <= {call}
        # Re-checks come every 250 ms by default; a busy loop would poll thousands of times.
        assert polls <= 20, polls
        assert client.inspect("wake-fd")["waiting_writers"] == 1
        holder.release()
        outcome = _fast.drive(call)
        deadline = time.monotonic() + 10
        while outcome == _fast.RUNNING and time.monotonic() < deadline:
            _woken(wakeups, 0.5)
            outcome = _fast.drive(call)
        assert outcome == 1
        assert lock.owned()
        # The outcome came once.
        assert _fast.drive(call) == -1
        with pytest.raises(_native.NativeError.InvalidArgument, match="already taken"):
            _fast.raise_error()
    finally:
        _fast.end(call)
        _fast.end(call)  # harmless twice
        _fast.free_loop(wakeups)
    assert lock.owned()  # ending a finished acquire leaves its hold alone
    assert lock.release() == 0
    assert _fast.loop_fd(wakeups) == -1
    with pytest.raises(_native.NativeError.InvalidArgument, match="no event loop wake-ups"):
        _fast.raise_error()


def test_ending_an_unfinished_acquire_leaves_nothing_in_redis(
    redis_server: RedisServer, prefix: str, other_client: rl.Client
) -> None:
    # Announcements last four re-check intervals: here long enough that only the withdrawal of
    # the ended acquire, not an expiry, can clear it within the test.
    client = rl.Client(redis_server.url, prefix=prefix, recheck_interval=60)
    lock = client.lock("end-unfinished")
    holder = other_client.lock("end-unfinished", owner=rl.new_owner_token())
    assert holder.acquire(lease=30)
    wakeups = _fast.new_loop()
    call = _fast.start_acquire(lock._id, lock._caller().id, 10.0, -1.0, wakeups)
    deadline = time.monotonic() + 10
    while client.inspect("end-unfinished")["waiting_writers"] == 0:
        assert time.monotonic() < deadline, "the acquire never announced itself"
        assert _fast.drive(call) == _fast.RUNNING
        _woken(wakeups, 0.05)
    _fast.end(call)
    _fast.free_loop(wakeups)
    deadline = time.monotonic() + 5
    while client.inspect("end-unfinished")["waiting_writers"] != 0:
        assert time.monotonic() < deadline, "the ended acquire stayed in the queue"
        time.sleep(0.02)
    holder.release()
    assert not lock.locked()  # nobody was granted it on the way out
    assert _fast.drive(call) == -1
    with pytest.raises(_native.NativeError.InvalidArgument, match="no running call"):
        _fast.raise_error()
    client.close()


def test_a_loop_without_add_reader_still_gets_the_lock(
    client: rl.Client, other_client: rl.Client
) -> None:
    """Loops that cannot watch a descriptor (add_reader: NotImplementedError) wait for each
    wake-up in an executor thread instead."""
    lock = client.lock("no-add-reader")
    holder = other_client.lock("no-add-reader", owner=rl.new_owner_token())

    class NoReaders(asyncio.SelectorEventLoop):
        def add_reader(self, fd, callback, *args):  # type: ignore[override]
            raise NotImplementedError

    async def main() -> None:
        assert await lock.acquire_async()
        assert await lock.release_async() == 0
        assert holder.acquire(lease=30)
        waiting = asyncio.create_task(lock.acquire_async(timeout=10))
        await asyncio.sleep(0.1)
        holder.release()
        assert await asyncio.wait_for(waiting, 10)
        assert await lock.release_async() == 0

    loop = NoReaders()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_a_release_whose_task_is_cancelled_still_completes(client: rl.Client, redis_server) -> None:
    """Cancelling the task that awaits a release does not take the release back; its outcome
    can be taken once, and not before it is ready."""
    lock = client.lock("release-cancelled")

    async def main() -> None:
        assert await lock.acquire_async()
        owner = lock._caller()  # the task's owner
        # Redis holds every command a while, so the release is still running when its task is
        # cancelled (a fast reply could otherwise end it within its first step).
        assert "OK" in redis_server.command("CLIENT", "PAUSE", "300")
        releasing = asyncio.ensure_future(lock._release_async(owner))
        await asyncio.sleep(0)
        releasing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await releasing
        deadline = time.monotonic() + 5
        while lock.locked() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert not lock.locked()

    asyncio.run(main())
    # The outcome of a release driven by hand (a call of no loop: it rings its sleeper): once.
    call = _fast.start_release(lock._id, lock._caller().id, 0)
    try:
        outcome = _fast.drive(call)
        while outcome == _fast.RUNNING:
            _fast.sleep(call, 0.5)
            outcome = _fast.drive(call)
        assert outcome == -1
        with pytest.raises(_native.NativeError.NotHeld):
            _fast.raise_error()
        assert _fast.drive(call) == -1
        with pytest.raises(_native.NativeError.InvalidArgument):
            _fast.raise_error()
    finally:
        _fast.end(call)


def test_a_silent_redis_ends_async_calls_with_a_connection_error(tmp_path) -> None:
    """A request written by the loop whose reply never comes: the command timeout (a runtime
    timer) wakes the loop, and the call ends with a connection error instead of hanging."""
    import signal

    from conftest import RedisServer

    server = RedisServer(tmp_path)
    try:
        with rl.Client(server.url, command_timeout=0.5, connect_timeout=0.5) as client:
            lock = client.lock("silent")

            async def main() -> None:
                assert await lock.acquire_async(lease=30)  # warm: its own connection, scripts
                server.process.send_signal(signal.SIGSTOP)
                try:
                    started = time.monotonic()
                    with pytest.raises(rl.LockConnectionError):
                        await lock.release_async()
                    other = client.lock("silent-2")
                    with pytest.raises(rl.LockConnectionError):
                        await other.acquire_async(blocking=False)
                    assert time.monotonic() - started < 5
                finally:
                    server.process.send_signal(signal.SIGCONT)

            asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        server.stop()


def test_a_dead_redis_ends_async_calls_with_a_connection_error(tmp_path) -> None:
    from conftest import RedisServer

    server = RedisServer(tmp_path)
    try:
        with rl.Client(server.url, command_timeout=0.5, connect_timeout=0.5) as client:
            lock = client.lock("dead")

            async def main() -> None:
                assert await lock.acquire_async(lease=30)
                server.stop()
                started = time.monotonic()
                with pytest.raises(rl.LockConnectionError):
                    await lock.release_async()
                with pytest.raises(rl.LockConnectionError):
                    await lock.acquire_async(blocking=False)
                assert time.monotonic() - started < 5

            asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        server.stop()


def test_close_ends_a_waiting_async_acquire_and_later_calls(redis_server, prefix: str) -> None:
    holder = rl.Client(redis_server.url, prefix=prefix)
    holder.lock("async-close").acquire(lease=30)
    client = rl.Client(redis_server.url, prefix=prefix)
    lock = client.lock("async-close")

    async def main() -> None:
        waiting = asyncio.create_task(lock.acquire_async(timeout=30))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        client.close()
        with pytest.raises(rl.ClientClosedError):
            await asyncio.wait_for(waiting, 5)
        with pytest.raises(rl.ClientClosedError):
            await lock.acquire_async()
        with pytest.raises(rl.ClientClosedError):
            await lock.release_async()

    asyncio.run(main())
    assert holder.force_unlock("async-close")
    holder.close()


def test_many_async_calls_leave_no_descriptors_behind(client: rl.Client) -> None:
    """A loop's polled calls share one wake-up socket pair (redlock_sdk/_wakeups.py), and the
    client's direct connections are bounded (4 by default): cycles, cancelled waits and failed
    calls do not leak descriptors."""
    import os

    lock = client.lock("fds")
    holder = client.lock("fds", owner=rl.new_owner_token())

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def churn() -> None:
        for _ in range(300):
            assert await lock.acquire_async()
            assert await lock.release_async() == 0
        assert holder.acquire(lease=30)
        for _ in range(30):
            waiting = asyncio.create_task(lock.acquire_async(timeout=10))
            await asyncio.sleep(0.005)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            with pytest.raises(rl.NotHeldError):
                await lock.release_async()
        assert holder.release() == 0

    asyncio.run(churn())  # warm: connections, scripts, spare signals
    before = open_fds()
    for _ in range(3):
        asyncio.run(churn())
    assert open_fds() - before <= 8, (before, open_fds())


def test_many_waiting_tasks_need_no_descriptor_each(redis_server, prefix: str) -> None:
    """A loop's calls share one wake-up descriptor: under a descriptor limit far below the
    number of waiting tasks, every one of them waits, and the lock is then handed on."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import asyncio, os, resource
        import redlock_sdk as rl

        client = rl.Client({redis_server.url!r}, prefix={prefix!r})
        holder = client.lock("fd-limit", owner=rl.new_owner_token())
        lock = client.lock("fd-limit")
        assert holder.acquire(lease=30)

        async def main():
            assert not await lock.acquire_async(blocking=False)  # the loop's wake-ups exist
            used = len(os.listdir("/proc/self/fd"))
            resource.setrlimit(resource.RLIMIT_NOFILE, (used + 20, used + 20))
            tries = [lock.acquire_async(timeout=0.5) for _ in range(300)]
            outcomes = await asyncio.gather(*tries, return_exceptions=True)
            assert all(o is False for o in outcomes), [o for o in outcomes if o is not False][:3]
            assert holder.release() == 0
            held = 0

            async def section():
                nonlocal held
                async with lock:
                    held += 1

            await asyncio.gather(*(section() for _ in range(100)))
            assert held == 100
            print("ok")

        asyncio.run(main())
        client.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok", done.stdout
