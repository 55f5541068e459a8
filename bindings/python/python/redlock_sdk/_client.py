"""``Client``: a connection to one Redis server, the factory of locks."""

from __future__ import annotations

import atexit
import weakref
from types import TracebackType
from typing import Any

from . import _args, _fast, _futures, _owners  # noqa: F401 (_futures: installs the continuation)
from ._errors import NATIVE_ERRORS, translate
from ._events import ContentionCallback, Listener, LockLostCallback, info_dict
from ._lock import Lock, ReadWriteLock
from ._native import ClientOptions, LockMode, NativeClient

_open_clients: weakref.WeakSet[Client] = weakref.WeakSet()


class Client:
    """Connects to Redis and hands out locks. Thread-safe; share one per process.

    ``url``: ``redis://[user:password@]host[:port][/db]`` or ``rediss://`` for TLS.
    ``prefix``: prefix of every Redis key and channel. ``lease``: seconds Redis keeps a hold
    without renewal; holds taken without a lease are renewed by the watchdog every lease/3.
    ``command_timeout`` / ``connect_timeout``: limits on each Redis call and on connecting
    (``None``: 3 s and 5 s). ``contention_alert_after``: seconds one acquire may wait before an
    alert is logged and ``on_contention`` is called (``None`` disables it);
    ``contention_alert_attempts``: the same after that many failed attempts. ``on_lock_lost``
    is called when the watchdog finds a hold gone. Callbacks run on a background thread.

    Safe under ``fork()``: a child process that uses an inherited client reconnects.
    """

    def __init__(
        self,
        url: str,
        prefix: str = "redlock",
        lease: float = 30.0,
        *,
        command_timeout: float | None = None,
        connect_timeout: float | None = None,
        watchdog: bool = True,
        recheck_interval: float | None = None,
        contention_alert_after: float | None = 30.0,
        contention_alert_attempts: int | None = None,
        on_contention: ContentionCallback | None = None,
        on_lock_lost: LockLostCallback | None = None,
    ) -> None:
        url = _args.string("url", url)
        attempts = contention_alert_attempts
        if attempts is not None and (isinstance(attempts, bool) or not isinstance(attempts, int)):
            raise _args.ArgumentTypeError("contention_alert_attempts must be an int")
        if attempts is not None and attempts < 1:
            raise _args.InvalidArgumentError("contention_alert_attempts must be at least 1")
        for name, callback in (("on_contention", on_contention), ("on_lock_lost", on_lock_lost)):
            if callback is not None and not callable(callback):
                raise _args.ArgumentTypeError(f"{name} must be callable")
        options = ClientOptions(
            prefix=_args.string("prefix", prefix),
            lease=_args.number("lease", lease),
            command_timeout=_args.optional_number("command_timeout", command_timeout),
            connect_timeout=_args.optional_number("connect_timeout", connect_timeout),
            recheck_interval=_args.optional_number("recheck_interval", recheck_interval),
            watchdog=bool(watchdog),
            contention_alert_after=_args.optional_number(
                "contention_alert_after", contention_alert_after
            ),
            disable_contention_alert_after=contention_alert_after is None,
            contention_alert_attempts=attempts,
        )
        listener = None
        if on_contention is not None or on_lock_lost is not None:
            listener = Listener(on_contention, on_lock_lost)
        try:
            self._native = NativeClient(url, options, listener)
        except NATIVE_ERRORS as e:
            raise translate(e) from None
        self._prefix = options.prefix
        _open_clients.add(self)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<redlock_sdk.Client prefix={self._prefix!r} {state}>"

    def _native_lock(self, name: object, mode: LockMode, label: object) -> Any:
        label = _args.optional_string("label", label)
        try:
            return self._native.lock(_args.string("name", name), mode, label)
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    def lock(
        self,
        name: str,
        owner: str | None = None,
        *,
        timeout: float | None = None,
        lease: float | None = None,
        label: str | None = None,
    ) -> Lock:
        """The exclusive reentrant lock ``name`` (any UTF-8 string of 1 to 1024 bytes).

        ``owner``: an explicit owner token for every call on this object (hand-off across
        threads or processes); default: the current asyncio task, else the current thread.
        ``timeout`` / ``lease``: what ``with lock:`` uses (default: wait as long as needed,
        watchdog-kept hold); ``with`` raises ``LockTimeoutError`` when the timeout passes.
        ``label``: stored with each hold taken through this object and shown by ``inspect``
        (default: the owner's thread or task name; at most 256 bytes are kept).
        """
        owner, timeout, lease = _lock_settings(owner, timeout, lease)
        native = self._native_lock(name, LockMode.WRITE, label)
        return Lock(self, native, "write", owner, timeout, lease)

    def rw_lock(
        self,
        name: str,
        owner: str | None = None,
        *,
        timeout: float | None = None,
        lease: float | None = None,
        label: str | None = None,
    ) -> ReadWriteLock:
        """The read/write lock ``name``: ``.read_lock()`` and ``.write_lock()`` (see ``lock``)."""
        owner, timeout, lease = _lock_settings(owner, timeout, lease)
        read = self._native_lock(name, LockMode.READ, label)
        write = self._native_lock(name, LockMode.WRITE, label)
        return ReadWriteLock(
            Lock(self, read, "read", owner, timeout, lease),
            Lock(self, write, "write", owner, timeout, lease),
        )

    def inspect(self, name: str) -> dict[str, Any]:
        """A snapshot of lock ``name``::

            {"name", "mode": "write" | "read" | None, "holders": [{"owner", "mode",
             "hold_count", "fencing_token", "ttl", "host", "pid", "thread", "acquired_at",
             "held_for"}], "holder_count", "waiting_writers", "waiting_readers", "ttl",
             "fencing_token"}

        ``ttl`` values are seconds of lease left; the top-level ``fencing_token`` is the newest
        token issued for the name's hash slot (an upper bound of the name's own last token).
        """
        try:
            return info_dict(self._native.inspect(_args.string("name", name)))
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    async def inspect_async(self, name: str) -> dict[str, Any]:
        """``inspect`` for asyncio."""
        try:
            return info_dict(await self._native.inspect_async(_args.string("name", name)))
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    def force_unlock(self, name: str) -> bool:
        """Clears lock ``name`` whoever holds it and wakes its waiters; ``True`` if it was held.
        Holders find out: their release raises ``LockLostError`` (watchdog-kept holds) or
        ``NotHeldError``."""
        try:
            return self._native.force_unlock(_args.string("name", name))
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    async def force_unlock_async(self, name: str) -> bool:
        """``force_unlock`` for asyncio."""
        try:
            return await self._native.force_unlock_async(_args.string("name", name))
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    def close(self) -> None:
        """Stops the watchdog and ends waiting acquires (``ClientClosedError``). Holds stay in
        Redis until their lease ends: release them first. Closing twice is harmless."""
        self._native.close()
        _open_clients.discard(self)

    @property
    def closed(self) -> bool:
        return self._native.is_closed()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _lock_settings(
    owner: object, timeout: object, lease: object
) -> tuple[_owners.Owner | None, float | None, float | None]:
    """Checks a lock's settings early, so that mistakes surface where the lock is made."""
    token = _args.optional_string("owner", owner)
    _args.wait_seconds(True, timeout)
    _args.lease_seconds(lease)
    explicit = None
    if token is not None:
        try:
            explicit = _owners.explicit(token)
        except NATIVE_ERRORS as e:
            raise translate(e) from None
    return explicit, timeout, lease


@atexit.register
def _close_at_exit() -> None:
    # Stops every watchdog before the interpreter goes away, so that no callback can call into
    # a finalizing interpreter.
    for client in list(_open_clients):
        client.close()
    # No native thread of the library may enter Python once the interpreter finalizes (see
    # ffi/src/python/events.rs): closes that gate, waiting (without the GIL) for those inside.
    _fast.exiting(2.0)
