"""What the client reports to ``on_contention`` and ``on_lock_lost`` callbacks, and ``inspect``."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable

from . import _native

log = logging.getLogger("redlock_sdk")


@dataclass(frozen=True)
class ContentionAlert:
    """A waiter passed the client's contention threshold: a possible dead lock (seed 000)."""

    name: str
    mode: str
    """``"read"`` or ``"write"``."""
    owner: str
    """The waiting owner's token."""
    waited: float
    """Seconds waited so far."""
    failed_attempts: int
    holders: list[dict[str, Any]]
    """The holders at the time of the alert (as in ``Client.inspect``)."""


@dataclass(frozen=True)
class LockLostEvent:
    """A hold kept alive by the watchdog is gone from Redis (expired or force-unlocked)."""

    name: str
    mode: str
    owner: str


def holder_dict(h: _native.HolderRecord) -> dict[str, Any]:
    return {
        "owner": h.owner_token,
        "mode": h.mode,
        "hold_count": h.hold_count,
        "fencing_token": h.fencing_token,
        "ttl": h.lease_left,
        "host": h.host,
        "pid": h.pid,
        "thread": h.thread,
        "acquired_at": h.acquired_at or None,
        "held_for": h.held_for,
    }


def info_dict(info: _native.LockInfoRecord) -> dict[str, Any]:
    return {
        "name": info.name,
        "mode": info.mode,
        "holders": [holder_dict(h) for h in info.holders],
        "holder_count": info.holder_count,
        "waiting_writers": info.waiting_writers,
        "waiting_readers": info.waiting_readers,
        "ttl": info.lease_left,
        "fencing_token": info.last_fencing_token,
    }


ContentionCallback = Callable[[ContentionAlert], Any]
LockLostCallback = Callable[[LockLostEvent], Any]


class Listener(_native.EventListener):
    """Forwards the core's events to the user's callbacks; a failing callback is logged, never
    propagated into the core."""

    def __init__(
        self,
        on_contention: ContentionCallback | None,
        on_lock_lost: LockLostCallback | None,
    ) -> None:
        self._on_contention = on_contention
        self._on_lock_lost = on_lock_lost
        self._dispatch = _Dispatcher()

    def on_contention(self, alert: _native.ContentionRecord) -> None:
        if self._on_contention is not None:
            event = ContentionAlert(
                name=alert.name,
                mode=alert.mode,
                owner=alert.owner_token,
                waited=alert.waited,
                failed_attempts=alert.failed_attempts,
                holders=[holder_dict(h) for h in alert.holders],
            )
            self._dispatch.call(self._on_contention, event)

    def on_lock_lost(self, event: _native.LockLostRecord) -> None:
        if self._on_lock_lost is not None:
            lost = LockLostEvent(name=event.name, mode=event.mode, owner=event.owner_token)
            self._dispatch.call(self._on_lock_lost, lost)


class _Dispatcher:
    """Runs one client's callbacks one at a time, in the order they came, on a daemon Python
    thread that ends after a few idle seconds: a storm of thousands of lost holds takes one
    thread, not one each."""

    _IDLE_SECONDS = 2.0

    def __init__(self) -> None:
        self._start_in(os.getpid())

    def _start_in(self, pid: int) -> None:
        # Anew in a forked child: the parent's lock may have been held at the fork by a thread
        # that does not exist there, and its queued events are the parent's to report.
        self._pid = pid
        self._queue: queue.SimpleQueue[tuple[Callable[[Any], Any], object]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def call(self, callback: Callable[[Any], Any], event: object) -> None:
        # Called on a native thread of the library. The user's callback runs on a Python
        # thread instead: CPython ends a thread that asks for the GIL while the interpreter
        # finalizes with pthread_exit(), and that forced unwind aborts the process when it
        # meets the native frames below this one ("FATAL: exception not rethrown"). A Python
        # thread has none, so it just ends; this native thread leaves Python at once. Daemon: a
        # callback still running does not hold up the exit.
        if sys.is_finalizing():
            return
        if os.getpid() != self._pid:
            self._start_in(os.getpid())
        with self._lock:
            self._queue.put((callback, event))
            if self._thread is not None and self._thread.is_alive():
                return
            thread = threading.Thread(target=self._run, name="redlock-callback", daemon=True)
            with contextlib.suppress(RuntimeError):  # "can't create new thread at shutdown"
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        while True:
            try:
                callback, event = self._queue.get(timeout=self._IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            try:
                callback(event)
            except Exception:
                log.exception("redlock_sdk: a %s callback raised", type(event).__name__)
