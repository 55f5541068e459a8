"""A loop closed while its tasks still wait for a lock: those tasks can never run again, so
their calls, polled on that loop's thread, must not keep a lock for nobody."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
import redlock_sdk as rl
from conftest import eventually_async


@pytest.mark.parametrize("granted_before_close", [False, True])
def test_a_closed_loop_s_waiting_task_leaves_the_lock_to_others(
    redis_server, prefix: str, granted_before_close: bool
) -> None:
    """A background task waits for a lock and its loop is closed, before the holder releases
    (the dead task must not be granted the lock) or after (the grant reached its call while the
    loop did not run; it must be given back). Either way a waiter of another client gets the
    lock, rather than wait until the lease of a grant to the dead task ends."""
    name = f"closed-loop-{granted_before_close}"
    with (
        rl.Client(redis_server.url, prefix=prefix, lease=8.0) as a,
        rl.Client(redis_server.url, prefix=prefix, lease=8.0) as b,
    ):
        holder = b.lock(name, owner="holder-token")
        assert holder.acquire()
        background: list[asyncio.Task] = []

        async def main() -> None:
            # A background task that waits for the lock; main returns before it is done.
            background.append(asyncio.create_task(a.lock(name).acquire_async()))
            # Polled for: under load the task announces itself later than usual.
            await eventually_async(lambda: b.inspect(name)["waiting_writers"] == 1)
            assert b.inspect(name)["waiting_writers"] == 1

        loop = asyncio.new_event_loop()
        loop.run_until_complete(main())
        if granted_before_close:
            holder.release()  # granted to the waiting task while its loop does not run
            time.sleep(0.2)
            assert b.inspect(name)["holder_count"] == 1
        loop.close()  # with the task still pending: it can never run again
        del loop
        background.clear()
        gc.collect()
        if not granted_before_close:
            holder.release()

        other = b.lock(name, owner="other-token")
        started = time.monotonic()
        got = other.acquire(timeout=4.0)
        waited = time.monotonic() - started
        holders = b.inspect(name)["holders"]
        if got:
            other.release()
        assert got, f"another client's waiter waited {waited:.1f} s in vain; held by: {holders}"
