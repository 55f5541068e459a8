"""Fork safety and token hand-off between processes."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import redlock_sdk as rl

fork = multiprocessing.get_context("fork")
spawn = multiprocessing.get_context("spawn")


def run(ctx, target, *args, timeout: float = 60):
    """Runs `target(queue, *args)` in a child process; returns what it put on the queue."""
    queue = ctx.Queue()
    process = ctx.Process(target=target, args=(queue, *args))
    process.start()
    result = queue.get(timeout=timeout)
    process.join(timeout)
    assert process.exitcode == 0, f"child exit code {process.exitcode}"
    return result


def use_inherited(queue, client: rl.Client, lock: rl.Lock) -> None:
    with lock:
        queue.put((os.getpid(), lock.token, lock.hold_count, client.inspect(lock.name)["holders"]))


def test_child_uses_a_client_its_parent_used(client: rl.Client) -> None:
    lock = client.lock("inherited")
    with lock:  # the parent's runtime and connections are busy here
        parent_token = lock.token
    pid, token, count, holders = run(fork, use_inherited, client, lock)
    assert pid != os.getpid()
    assert token != parent_token  # a child never shares its parent's owner
    assert count == 1
    assert holders[0]["pid"] == pid
    with lock:  # and the parent still works afterwards
        assert lock.hold_count == 1


def new_client(queue, url: str, prefix: str) -> None:
    with rl.Client(url, prefix=prefix) as client:
        lock = client.lock("fresh")
        queue.put(lock.acquire(timeout=5) and lock.release() == 0)


def test_child_creates_its_own_client_after_fork(
    client: rl.Client, redis_server, prefix: str
) -> None:
    client.lock("fresh").acquire(blocking=False)
    client.lock("fresh").release()
    assert run(fork, new_client, redis_server.url, prefix) is True


def child_is_excluded(queue, lock: rl.Lock) -> None:
    queue.put(lock.acquire(blocking=False))


def test_parent_hold_excludes_a_forked_child(client: rl.Client) -> None:
    lock = client.lock("excluded")
    with lock:
        assert run(fork, child_is_excluded, lock) is False


def release_with_token(queue, url: str, prefix: str, token: str) -> None:
    with rl.Client(url, prefix=prefix) as client:
        lock = client.lock("handed-over", owner=token)
        queue.put((lock.owned(), lock.release()))


def test_token_hand_off_to_another_process(client: rl.Client, redis_server, prefix: str) -> None:
    lock = client.lock("handed-over")
    lock.acquire(lease=30)
    owned, left = run(spawn, release_with_token, redis_server.url, prefix, lock.token)
    assert owned is True and left == 0
    assert not lock.locked()


def acquire_and_hand_back(queue, url: str, prefix: str) -> None:
    with rl.Client(url, prefix=prefix) as client:
        lock = client.lock("handed-back")
        lock.acquire(lease=30)
        queue.put(lock.token)  # exit without releasing: the token is the hold now


def test_token_hand_off_from_another_process(client: rl.Client, redis_server, prefix: str) -> None:
    token = run(fork, acquire_and_hand_back, redis_server.url, prefix)
    mine = client.lock("handed-back")
    assert mine.locked() and not mine.owned()
    theirs = client.lock("handed-back", owner=token)
    assert theirs.owned() and isinstance(theirs.fencing_token, int)
    theirs.release()
    assert not mine.locked()


# The parent uses a client from asyncio, forks a child that never touches the client and exits
# normally (sys.exit: the interpreter's finalization lets go of the inherited client), then goes
# on using its client.
FORK_AND_EXIT = """
import asyncio, os, sys, time
import redlock_sdk as rl

client = rl.Client(sys.argv[1], prefix=sys.argv[2], command_timeout=2.0)
lock = client.lock("parent keeps working")


async def cycles(n):
    worst = 0.0
    for _ in range(n):
        started = time.monotonic()
        assert await lock.acquire_async(timeout=5)
        assert await lock.release_async() == 0
        worst = max(worst, time.monotonic() - started)
        await asyncio.sleep(0.01)  # lets the pool open its direct connections
    return worst


asyncio.run(cycles(50))  # warm: the async hot calls' direct connections are open and idle
pid = os.fork()
if pid == 0:
    sys.exit(0)  # the child: does nothing with the client and exits normally
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
try:
    print(f"worst {asyncio.run(cycles(10)):.3f}")
except rl.LockError as e:
    print(f"failed {e!r}")
client.close()
"""


def test_a_forked_child_exiting_leaves_the_parent_s_client_working(
    redis_server, prefix: str
) -> None:
    """The Client docs: "Safe under fork()". A child that never uses its inherited client and
    exits normally must not disturb its parent: the parent's async calls keep working."""
    done = subprocess.run(
        [sys.executable, "-c", FORK_AND_EXIT, redis_server.url, prefix],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = done.stdout.strip()
    assert outcome.startswith("worst "), (
        f"the parent's async calls broke after its child exited: {outcome}"
    )
    assert float(outcome.split()[1]) < 1.0, outcome
