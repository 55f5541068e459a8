"""A loop closed while its tasks still wait for a lock (audit pyasync): those tasks can never
run again, so their calls, polled on that loop's thread, must not keep a lock for nobody."""

from __future__ import annotations

import asyncio
import gc
import time

import redlock_sdk as rl


def _other_waiter_gets_it(b: rl.Client, name: str) -> None:
    other = b.lock(name, owner="other-token")
    started = time.monotonic()
    got = other.acquire(timeout=4.0)
    waited = time.monotonic() - started
    holders = b.inspect(name)["holders"]
    if got:
        other.release()
    assert got, f"another client's waiter waited {waited:.1f} s in vain; held by: {holders}"


def test_a_closed_loop_s_waiting_task_is_not_granted_the_lock(redis_server, prefix: str) -> None:
    """A background task waits for a lock; its loop is closed; the holder releases. A waiter of
    another client must get the lock, not wait until the lease of a grant to the dead task
    ends."""
    with (
        rl.Client(redis_server.url, prefix=prefix, lease=8.0) as a,
        rl.Client(redis_server.url, prefix=prefix, lease=8.0) as b,
    ):
        holder = b.lock("orphan", owner="holder-token")
        assert holder.acquire()
        background: list[asyncio.Task] = []

        async def main() -> None:
            # A background task that waits for the lock; main returns before it is done.
            background.append(asyncio.create_task(a.lock("orphan").acquire_async()))
            await asyncio.sleep(0.3)
            assert b.inspect("orphan")["waiting_writers"] == 1

        loop = asyncio.new_event_loop()
        loop.run_until_complete(main())
        loop.close()  # with the task still pending: it can never run again
        del loop
        background.clear()
        gc.collect()  # does not help either

        holder.release()
        _other_waiter_gets_it(b, "orphan")


def test_a_lock_granted_to_a_task_whose_loop_then_closes_is_given_back(
    redis_server, prefix: str
) -> None:
    """The grant reaches the waiting task's call while its loop does not run; the loop is then
    closed, so the task never learns it was granted: the lock must be given back."""
    with (
        rl.Client(redis_server.url, prefix=prefix, lease=8.0) as a,
        rl.Client(redis_server.url, prefix=prefix, lease=8.0) as b,
    ):
        holder = b.lock("granted", owner="holder-token")
        assert holder.acquire()
        background: list[asyncio.Task] = []

        async def main() -> None:
            background.append(asyncio.create_task(a.lock("granted").acquire_async()))
            await asyncio.sleep(0.3)

        loop = asyncio.new_event_loop()
        loop.run_until_complete(main())
        holder.release()  # granted to the waiting task while its loop does not run
        time.sleep(0.2)
        assert b.inspect("granted")["holder_count"] == 1
        loop.close()
        del loop
        background.clear()
        _other_waiter_gets_it(b, "granted")
