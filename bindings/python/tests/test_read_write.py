"""The contract's rules for the read/write lock."""

from __future__ import annotations

import threading
import time

import pytest
import redlock_sdk as rl
from conftest import eventually
from test_exclusive import in_thread


def test_many_readers_at_once(client: rl.Client) -> None:
    rw = client.rw_lock("article")
    with rw.read_lock():
        assert in_thread(lambda: rw.read_lock().acquire(blocking=False))
        info = client.inspect("article")
        assert info["mode"] == "read" and info["holder_count"] == 2
        assert not in_thread(lambda: rw.write_lock().acquire(blocking=False))


def test_writer_excludes_readers_and_writers(client: rl.Client) -> None:
    rw = client.rw_lock("doc")
    with rw.write_lock():
        assert not in_thread(lambda: rw.read_lock().acquire(blocking=False))
        assert not in_thread(lambda: client.lock("doc").acquire(blocking=False))
    assert in_thread(lambda: rw.read_lock().acquire(blocking=False))


def test_write_view_is_the_exclusive_lock(client: rl.Client) -> None:
    with client.lock("same"):
        assert client.rw_lock("same").write_lock().owned()


def test_both_views_are_reentrant(client: rl.Client) -> None:
    rw = client.rw_lock("reentrant-rw")
    read, write = rw.read_lock(), rw.write_lock()
    write.acquire()
    write.acquire()
    assert write.hold_count == 2
    write.release()
    write.release()
    read.acquire()
    read.acquire()
    assert read.hold_count == 2
    read.release()
    assert read.release() == 0


def test_downgrade(client: rl.Client) -> None:
    rw = client.rw_lock("downgrade")
    write, read = rw.write_lock(), rw.read_lock()
    write.acquire()
    assert read.acquire(blocking=False)
    write.release()
    assert read.owned() and not write.locked()
    assert in_thread(lambda: rw.read_lock().acquire(blocking=False))
    assert not in_thread(lambda: rw.write_lock().acquire(blocking=False))
    read.release()


def test_upgrade_fails_at_once(client: rl.Client) -> None:
    rw = client.rw_lock("upgrade")
    with rw.read_lock():
        started = time.monotonic()
        with pytest.raises(rl.UpgradeNotAllowedError):
            rw.write_lock().acquire(timeout=1.0)
        assert time.monotonic() - started < 0.5
        with pytest.raises(rl.UpgradeNotAllowedError):
            rw.write_lock().acquire()  # even without a timeout: never a hang
    assert rw.write_lock().acquire(blocking=False)
    rw.write_lock().release()


def test_waiting_writer_is_not_starved(client: rl.Client) -> None:
    rw = client.rw_lock("starve")
    rw.read_lock().acquire()
    writer_got = threading.Event()

    def writer():
        assert rw.write_lock().acquire(timeout=30)
        writer_got.set()
        rw.write_lock().release()

    t = threading.Thread(target=writer)
    t.start()
    # The writer is waiting now (polled for: under load its first attempt may come late).
    eventually(lambda: client.inspect("starve")["waiting_writers"] == 1)
    assert client.inspect("starve")["waiting_writers"] == 1
    # A new reader queues behind the waiting writer...
    assert not in_thread(lambda: rw.read_lock().acquire(blocking=False))
    # ...while the current reader may re-enter.
    assert rw.read_lock().acquire(blocking=False)
    rw.read_lock().release()
    rw.read_lock().release()
    t.join(30)
    assert writer_got.is_set()


def test_each_reader_has_its_own_lease(client: rl.Client) -> None:
    rw = client.rw_lock("leases")
    rw.read_lock().acquire(lease=0.2)
    assert in_thread(lambda: rw.read_lock().acquire(lease=10))
    time.sleep(0.35)
    info = client.inspect("leases")
    assert info["holder_count"] == 1
    assert info["holders"][0]["ttl"] > 5
    assert not rw.read_lock().owned()


def test_read_fencing_token(client: rl.Client) -> None:
    rw = client.rw_lock("read-fence")
    with rw.read_lock():
        assert isinstance(rw.read_lock().fencing_token, int)
        assert rw.write_lock().fencing_token is None


def test_inspect_counts_the_readers_waiting(client: rl.Client) -> None:
    # As C's "waiting_readers", Go's LockInfo.WaitingReaders and Java's waitingReaders().
    rw = client.rw_lock("waiting-readers", owner="writer-token")
    assert rw.write_lock().acquire(blocking=False)
    reader = client.rw_lock("waiting-readers").read_lock()
    got: list[bool] = []

    def read() -> None:
        got.append(reader.acquire(timeout=30.0))
        reader.release()

    t = threading.Thread(target=read)
    t.start()
    try:
        # The reader is waiting now (polled for: under load its first attempt may come late).
        eventually(lambda: client.inspect("waiting-readers")["waiting_readers"] == 1)
        info = client.inspect("waiting-readers")
        assert (info["waiting_writers"], info["waiting_readers"]) == (0, 1), info
    finally:
        rw.write_lock().release()
        t.join()
    assert got == [True]
    assert client.inspect("waiting-readers")["waiting_readers"] == 0
