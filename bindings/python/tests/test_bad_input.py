"""Bad input gets a clear exception of the right class, and nothing is sent to Redis."""

from __future__ import annotations

import math
import socket
import threading
import time

import pytest
import redlock_sdk as rl


def test_empty_and_huge_names(client: rl.Client) -> None:
    with pytest.raises(rl.InvalidArgumentError, match="name"):
        client.lock("")
    with pytest.raises(rl.InvalidArgumentError, match="1024"):
        client.lock("x" * 1025)
    with pytest.raises(rl.InvalidArgumentError):
        client.lock("🔒" * 257)  # 1028 bytes
    with pytest.raises(rl.InvalidArgumentError):
        client.inspect("")
    assert client.lock("🔒" * 256).acquire(blocking=False)  # exactly 1024 bytes


@pytest.mark.parametrize("timeout", [-2, -0.5, math.nan, -math.inf])
def test_negative_or_nan_timeouts(client: rl.Client, timeout: float) -> None:
    with pytest.raises(rl.InvalidArgumentError, match="timeout"):
        client.lock("t").acquire(timeout=timeout)


def test_minus_one_and_none_wait_forever_like_threading(client: rl.Client) -> None:
    lock = client.lock("forever")
    assert lock.acquire(timeout=-1)
    assert lock.acquire(timeout=None)
    assert lock.acquire(True, math.inf)
    assert lock.hold_count == 3


def test_non_blocking_takes_no_timeout(client: rl.Client) -> None:
    with pytest.raises(rl.InvalidArgumentError, match="non-blocking"):
        client.lock("nb").acquire(blocking=False, timeout=1)


@pytest.mark.parametrize("lease", [0, -1, math.nan, 1e-6, 1e12])
def test_bad_leases(client: rl.Client, lease: float) -> None:
    lock = client.lock("lease")
    with pytest.raises(rl.InvalidArgumentError, match="lease"):
        lock.acquire(lease=lease)
    assert not lock.locked()
    lock.acquire(lease=10)
    with pytest.raises(rl.InvalidArgumentError, match="lease"):
        lock.extend(lease=lease)
    lock.release()


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.lock(42),
        lambda c: c.lock(b"bytes"),
        lambda c: c.lock("n", owner=7),
        lambda c: c.lock("n").acquire(timeout="1"),
        lambda c: c.lock("n").acquire(blocking="yes"),
        lambda c: c.lock("n").acquire(lease=[1]),
        lambda c: c.lock("n").acquire(timeout=True),
        lambda c: c.lock("n").extend(lease=None),
        lambda c: c.rw_lock(None),
        lambda c: c.inspect(1.5),
        lambda c: c.force_unlock(object()),
    ],
)
def test_wrong_types_are_type_errors(client: rl.Client, call) -> None:
    with pytest.raises(TypeError) as raised:
        call(client)
    assert isinstance(raised.value, rl.InvalidArgumentError)
    assert "must be" in str(raised.value)


def test_owner_tokens_are_checked(client: rl.Client) -> None:
    with pytest.raises(rl.InvalidArgumentError):
        client.lock("n", owner="")
    with pytest.raises(rl.InvalidArgumentError, match="512"):
        client.lock("n", owner="x" * 513).acquire()


def test_unpaired_surrogates_are_invalid_arguments_not_encoding_errors(
    client: rl.Client, redis_server
) -> None:
    # (What os.fsdecode gives for bytes that are not UTF-8.) No UTF-8 form, so no lock name.
    bad = "orders-\udcff"
    with pytest.raises(rl.InvalidArgumentError, match="surrogate"):
        client.lock(bad)
    with pytest.raises(rl.InvalidArgumentError, match="surrogate"):
        client.rw_lock(bad)
    with pytest.raises(rl.InvalidArgumentError, match="surrogate"):
        client.inspect(bad)
    with pytest.raises(rl.InvalidArgumentError, match="surrogate"):
        client.force_unlock(bad)
    with pytest.raises(rl.InvalidArgumentError, match="surrogate"):
        client.lock("n", owner="token-\ud800")
    with pytest.raises(rl.InvalidArgumentError, match="surrogate"):
        client.lock("n", label="\ud800")
    with pytest.raises(rl.InvalidArgumentError, match="surrogate"):
        rl.Client(redis_server.url, prefix="p\ud800")


@pytest.mark.parametrize("thread_name", ["", "worker-\ud800"])
def test_any_thread_name_can_lock(client: rl.Client, thread_name: str) -> None:
    outcome: list[object] = []

    def run() -> None:
        lock = client.lock("named")
        try:
            outcome.append(lock.acquire(blocking=False))
            outcome.append(client.inspect("named")["holders"][0]["thread"])
            lock.release()
        except Exception as e:  # reported below
            outcome.append(e)

    worker = threading.Thread(target=run)
    worker.name = thread_name  # (the constructor would replace "" by "Thread-N")
    worker.start()
    worker.join()
    assert outcome[0] is True, outcome
    label = outcome[1]
    assert isinstance(label, str) and label, "the hold is labelled"
    if thread_name:
        assert label == "worker-\ufffd"


def test_bad_client_settings(redis_server) -> None:
    with pytest.raises(rl.InvalidArgumentError):
        rl.Client("not a url")
    with pytest.raises(rl.InvalidArgumentError, match="prefix"):
        rl.Client(redis_server.url, prefix="a{b")
    with pytest.raises(rl.InvalidArgumentError, match="lease"):
        rl.Client(redis_server.url, lease=-1)
    # Under 1 ms a waiter would be announced for 0 ms: as if it never waited.
    with pytest.raises(rl.InvalidArgumentError, match="recheck"):
        rl.Client(redis_server.url, recheck_interval=0.0002)
    with pytest.raises(TypeError):
        rl.Client(redis_server.url, lease="30")
    with pytest.raises(TypeError):
        rl.Client(redis_server.url, on_lock_lost="not callable")
    with pytest.raises(TypeError):
        rl.Client(None)


def test_unreachable_redis_is_a_connection_error_not_a_hang() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(rl.LockConnectionError) as raised:
        rl.Client(f"redis://127.0.0.1:{port}/0", connect_timeout=1.0)
    assert isinstance(raised.value, ConnectionError)
    assert isinstance(raised.value, rl.ConnectionError)
    assert time.monotonic() - started < 5


def test_redis_dying_mid_wait_ends_the_wait(tmp_path) -> None:
    from conftest import RedisServer

    server = RedisServer(tmp_path)
    try:
        with rl.Client(server.url, command_timeout=0.5, connect_timeout=0.5) as client:
            lock = client.lock("dies")
            lock.acquire(lease=30)
            server.stop()
            started = time.monotonic()
            with pytest.raises(rl.LockConnectionError):
                client.lock("dies").acquire(blocking=False)
            assert time.monotonic() - started < 5
    finally:
        server.stop()


def test_closed_client(redis_server, prefix: str) -> None:
    client = rl.Client(redis_server.url, prefix=prefix)
    lock = client.lock("closing")
    client.close()
    client.close()  # harmless
    assert client.closed
    with pytest.raises(rl.ClientClosedError):
        lock.acquire()
    with pytest.raises(rl.ClientClosedError):
        client.lock("other")


def test_close_ends_a_waiting_acquire(redis_server, prefix: str) -> None:
    import threading

    holder = rl.Client(redis_server.url, prefix=prefix)
    holder.lock("wait-close").acquire(lease=30)
    waiter_client = rl.Client(redis_server.url, prefix=prefix)
    errors: list[BaseException] = []

    def wait():
        try:
            waiter_client.lock("wait-close").acquire()
        except rl.LockError as e:
            errors.append(e)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.2)
    waiter_client.close()
    t.join(5)
    assert not t.is_alive()
    assert isinstance(errors[0], rl.ClientClosedError)
    holder.force_unlock("wait-close")
    holder.close()
