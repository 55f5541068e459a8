"""The library's own log lines reach the logger ``redlock_sdk`` (WARNING and above by default;
``rl.set_log_level`` asks for more, or none)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator

import pytest
import redlock_sdk as rl
from redlock_sdk._client import _close_at_exit


@pytest.fixture(autouse=True)
def _default_level_after() -> Iterator[None]:
    yield
    rl.set_log_level(logging.WARNING)


def _lost_lines(
    caplog: pytest.LogCaptureFixture, name: str, wait: float = 3.0
) -> list[logging.LogRecord]:
    """The "lock lost" records of `name`, once there are some or `wait` seconds passed."""
    deadline = time.monotonic() + wait
    while True:
        found = [
            r
            for r in caplog.records
            if r.name == "redlock_sdk"
            and r.getMessage().startswith("lock lost")
            and name in r.getMessage()
        ]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_a_lost_hold_is_a_warning_of_the_redlock_sdk_logger(
    client: rl.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="redlock_sdk")
    lock = client.lock("logged {name}")
    lock.acquire()  # kept by the watchdog
    client.force_unlock("logged {name}")  # reported lost at once
    [record] = _lost_lines(caplog, "logged {name}")
    assert record.levelno == logging.WARNING
    assert record.redlock_target.startswith("redlock_core")  # type: ignore[attr-defined]
    # WARNING by default: the core's debug lines are not forwarded.
    assert all(r.levelno >= logging.WARNING for r in caplog.records if r.name == "redlock_sdk")


def test_set_log_level_none_stops_the_lines_and_debug_adds_some(
    client: rl.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="redlock_sdk")
    rl.set_log_level(None)
    lock = client.lock("quiet")
    lock.acquire()
    client.force_unlock("quiet")
    assert _lost_lines(caplog, "quiet", wait=0.3) == []

    rl.set_log_level(logging.ERROR)  # a warning is below it
    lock.acquire()
    client.force_unlock("quiet")
    assert _lost_lines(caplog, "quiet", wait=0.3) == []

    rl.set_log_level(logging.DEBUG)
    lock.acquire()
    client.force_unlock("quiet")
    assert len(_lost_lines(caplog, "quiet")) == 1


def test_a_child_forked_while_a_line_is_in_python_exits_at_once(
    client: rl.Client,
) -> None:
    """The library's log thread inside a slow handler when the process forks: the child's exit
    does not wait for that thread, which does not exist in the child."""
    entered = threading.Event()

    class Slow(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            entered.set()
            time.sleep(3)

    handler = Slow()
    logger = logging.getLogger("redlock_sdk")
    logger.addHandler(handler)
    try:
        lock = client.lock("slow-line")
        lock.acquire()
        client.force_unlock("slow-line")  # a warn line: the slow handler runs on the log thread
        assert entered.wait(5)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: runs the package's atexit hook, as its exit would
            try:
                _close_at_exit()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        took = time.monotonic() - started
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert took < 1.5, f"the child took {took:.2f} s to exit"
    finally:
        logger.removeHandler(handler)


def test_a_newline_in_a_lock_name_forges_no_log_line(client: rl.Client) -> None:
    # Any text is a valid name; a newline in one must stay inside its record's message, and a
    # space must not let it forge a field: the name is quoted.
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(logging.DEBUG)
    logger = logging.getLogger("redlock_sdk")
    logger.addHandler(keep)
    name = "inj owner=forged\nERROR redlock_core: forged line"
    try:
        lock = client.lock(name)
        lock.acquire()
        client.force_unlock(name)
        deadline = time.monotonic() + 5
        while not any("inj" in r.getMessage() for r in records):
            assert time.monotonic() < deadline, "no line names the lock"
            time.sleep(0.02)
        (message,) = [r.getMessage() for r in records if "inj" in r.getMessage()]
        assert "\n" not in message
        assert 'lock="inj owner=forged\\nERROR redlock_core: forged line"' in message
    finally:
        logger.removeHandler(keep)
