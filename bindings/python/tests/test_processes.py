"""Fork safety and token hand-off between processes."""

from __future__ import annotations

import multiprocessing
import os

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
