"""``Lock``: one view (exclusive/write, or read) of a lock name, in Python's idioms.

The core does all the locking; this class picks the caller's owner, converts waits and
timeouts, waits in short slices so that Ctrl-C ends a blocked acquire, and maps errors.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Awaitable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from . import _args, _fast, _owners, _wakeups
from ._errors import NATIVE_ERRORS, LockTimeoutError, translate
from ._native import NativeError, NativeLock

if TYPE_CHECKING:
    from ._client import Client

T = TypeVar("T")

# A blocked acquire returns to Python this often, so that signal handlers (Ctrl-C) run in the
# main thread. It costs nothing in Redis: the acquire keeps running and keeps its place.
_SLICE = 0.1
# Tickets of blocking acquires still waiting after their first slice (unique per process).
_tickets = itertools.count(1)


class Lock:
    """A distributed lock: reentrant per owner, like ``threading.RLock``.

    Get one from ``client.lock(name)`` (exclusive) or ``client.rw_lock(name).read_lock()`` /
    ``.write_lock()``. Without an explicit ``owner=``, the owner is the current asyncio task
    when called inside one, else the current thread. Lock objects are cheap and thread-safe.
    """

    __slots__ = ("_client", "_id", "_lease", "_mode", "_native", "_owner", "_timeout")

    def __init__(
        self,
        client: Client,
        native: NativeLock,
        mode: str,
        owner: _owners.Owner | None,
        timeout: float | None,
        lease: float | None,
    ) -> None:
        self._client = client
        self._native = native
        self._id = native.id()  # names it in the hot calls (see _fast)
        self._mode = mode
        self._owner = owner
        self._timeout = timeout
        self._lease = lease

    def __repr__(self) -> str:
        return f"<redlock_sdk.Lock {self.name!r} mode={self._mode}>"

    @property
    def name(self) -> str:
        """The lock name."""
        return self._native.name()

    @property
    def mode(self) -> str:
        """``"write"`` (also the exclusive lock) or ``"read"``."""
        return self._mode

    @property
    def token(self) -> str:
        """The caller's owner token: hand it to another thread or process
        (``client.lock(name, owner=token)``) to release or extend the hold there."""
        return self._caller().token

    def _caller(self) -> _owners.Owner:
        return self._owner if self._owner is not None else _owners.caller()

    # -- sync ---------------------------------------------------------------------------------

    def acquire(
        self, blocking: bool = True, timeout: float | None = -1, lease: float | None = None
    ) -> bool:
        """Acquires the lock; ``True`` once held, ``False`` if ``timeout`` seconds passed.

        ``blocking=False`` tries once; ``timeout=-1`` or ``None`` waits as long as needed.
        ``lease``: seconds Redis keeps the hold without renewal; ``None`` lets the watchdog keep
        it alive until released. Re-acquiring a held lock increments its hold count.
        Raises ``UpgradeNotAllowedError`` when a reader asks for the write lock.
        """
        if blocking is True and timeout == -1 and lease is None:
            wait = lease_s = _args.FOREVER  # the common call, checked without the slow path
        else:
            wait = _args.wait_seconds(blocking, timeout)
            lease_s = _args.lease_seconds(lease)
        # The ticket is picked first: a Ctrl-C raised as the native call returns (Python runs
        # signal handlers between bytecodes, here inside the generated wrapper) must still find
        # an acquire parked under it, or that acquire would take the lock later, for nobody.
        ticket = next(_tickets)
        try:
            acquired = _fast.acquire(self._id, self._caller().id, wait, lease_s, _SLICE, ticket)
            if acquired > 0:
                return True
            if acquired < 0:
                _fast.raise_error()
        except NativeError.Timeout:
            return False
        except NATIVE_ERRORS as e:
            raise translate(e) from None
        except BaseException:
            self._native.cancel_parked(ticket)
            self._give_back_if_delivered(ticket)
            raise
        # The acquire stays parked under its ticket in the native lock until its outcome is
        # handed out, so that whatever exception arrives (Ctrl-C as a call returns), the
        # handler below still finds it: no object is handed over that an interrupt could lose.
        try:
            while not self._native.wait_parked(ticket, _SLICE):
                pass
            return True
        except NativeError.Timeout:
            return False
        except NATIVE_ERRORS as e:
            raise translate(e) from None
        except BaseException:
            # Ctrl-C or another exception: leave nothing held behind.
            self._native.cancel_parked(ticket)
            self._give_back_if_delivered(ticket)
            raise

    def _give_back_if_delivered(self, ticket: int) -> None:
        # An exception (Ctrl-C) raised after the native call handed over the hold and before
        # ``return True``: the caller never learns it holds the lock, so the hold goes back.
        if self._native.take_delivered(ticket):
            with contextlib.suppress(Exception):
                self.release()

    def release(self) -> int:
        """Releases one hold of the caller; returns how many holds it still has.

        Raises ``NotHeldError`` if the caller does not hold the lock (or its lease expired),
        ``LockLostError`` if the watchdog was keeping it and Redis lost it.
        """
        try:
            left = _fast.release(self._id, self._caller().id)
            if left < 0:
                _fast.raise_error()
            return left
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    def extend(self, lease: float) -> None:
        """Sets the caller's hold to expire ``lease`` seconds from now (``NotHeldError``
        if it holds none)."""
        lease_s = _args.number("lease", lease)
        try:
            self._native.extend(self._caller().native, lease_s)
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    def locked(self) -> bool:
        """Whether anyone holds this lock (the read view: whether anyone reads)."""
        try:
            return self._native.is_locked()
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    def owned(self) -> bool:
        """Whether the caller's owner holds this lock."""
        return self.hold_count > 0

    @property
    def hold_count(self) -> int:
        """How many times the caller's owner holds this lock (0 when not at all)."""
        try:
            return self._native.hold_count(self._caller().native)
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of the caller's current hold, ``None`` when it holds none.

        Tokens of new write holds of one name strictly increase: pass it to the guarded
        resource, which rejects a writer older than one it has seen. Read from Redis. They
        stop at 2**53 - 1, the last that Redis' Lua counts exactly: past it, acquires in that
        hash slot raise RedisError (FENCESPENT) instead of repeating one.
        """
        try:
            return self._native.fencing_token(self._caller().native)
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    def inspect(self) -> dict[str, Any]:
        """A snapshot of the lock name (see ``Client.inspect``)."""
        return self._client.inspect(self.name)

    def force_unlock(self) -> bool:
        """Clears the name whoever holds it (see ``Client.force_unlock``)."""
        return self._client.force_unlock(self.name)

    def __enter__(self) -> Lock:
        if not self.acquire(timeout=self._timeout, lease=self._lease):
            raise LockTimeoutError(f"lock {self.name!r} not acquired within {self._timeout} s")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    # -- asyncio ------------------------------------------------------------------------------

    # The async methods are plain methods that pick the owner at once and return a coroutine:
    # `asyncio.wait_for(lock.acquire_async(), 1)` runs the coroutine in a task of its own on
    # Python < 3.12, and the owner must still be the task that asked.

    def acquire_async(
        self, blocking: bool = True, timeout: float | None = -1, lease: float | None = None
    ) -> Coroutine[Any, Any, bool]:
        """``acquire`` for asyncio: the owner is the calling task. Cancelling the wait (task
        cancel, ``asyncio.wait_for`` timeout) leaves nothing held and nothing in Redis."""
        owner = self._caller()
        wait = _args.wait_seconds(blocking, timeout)
        lease_s = _args.lease_seconds(lease)
        return self._acquire_async(owner, wait, lease_s)

    async def _acquire_async(self, owner: _owners.Owner, wait: float, lease: float) -> bool:
        try:
            await _wakeups.run(
                lambda woken_by: _fast.start_acquire(self._id, owner.id, wait, lease, woken_by)
            )
            return True
        except NativeError.Timeout:
            return False
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    def release_async(self) -> Coroutine[Any, Any, int]:
        """``release`` for asyncio (the owner is the calling task). A release that was started
        completes even if the awaiting task is cancelled."""
        return self._release_async(self._caller())

    async def _release_async(self, owner: _owners.Owner) -> int:
        try:
            return await _wakeups.run(
                lambda woken_by: _fast.start_release(self._id, owner.id, woken_by)
            )
        except NATIVE_ERRORS as e:
            raise translate(e) from None

    def extend_async(self, lease: float) -> Coroutine[Any, Any, None]:
        """``extend`` for asyncio (the owner is the calling task)."""
        lease_s = _args.number("lease", lease)
        return _translated(self._native.extend_async(self._caller().native, lease_s))

    def hold_count_async(self) -> Coroutine[Any, Any, int]:
        """``hold_count`` for asyncio (the owner is the calling task)."""
        return _translated(self._native.hold_count_async(self._caller().native))

    def owned_async(self) -> Coroutine[Any, Any, bool]:
        """``owned`` for asyncio (the owner is the calling task)."""
        counting = self.hold_count_async()

        async def owned() -> bool:
            return await counting > 0

        return owned()

    def locked_async(self) -> Coroutine[Any, Any, bool]:
        """``locked`` for asyncio."""
        return _translated(self._native.is_locked_async())

    async def __aenter__(self) -> Lock:
        if not await self.acquire_async(timeout=self._timeout, lease=self._lease):
            raise LockTimeoutError(f"lock {self.name!r} not acquired within {self._timeout} s")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release_async()


async def _translated(call: Awaitable[T]) -> T:
    """Awaits a native call, raising redlock_sdk's exceptions."""
    try:
        return await call
    except NATIVE_ERRORS as e:
        raise translate(e) from None


class ReadWriteLock:
    """A read/write lock: any number of readers, or one writer. Both views are reentrant; the
    writer may also read (downgrade); a reader asking to write gets ``UpgradeNotAllowedError``.
    Once a writer waits, new readers queue behind it."""

    __slots__ = ("_read", "_write")

    def __init__(self, read: Lock, write: Lock) -> None:
        self._read = read
        self._write = write

    def __repr__(self) -> str:
        return f"<redlock_sdk.ReadWriteLock {self.name!r}>"

    @property
    def name(self) -> str:
        return self._read.name

    def read_lock(self) -> Lock:
        """The shared view (like Java's ``readLock()``)."""
        return self._read

    def write_lock(self) -> Lock:
        """The exclusive view (like Java's ``writeLock()``); the same resource as
        ``client.lock(name)``."""
        return self._write
