"""Exception classes of redlock_sdk: one per error kind of the lock contract."""

from __future__ import annotations

from ._native import InternalError, NativeError

__all__ = [
    "ArgumentTypeError",
    "ClientClosedError",
    "InvalidArgumentError",
    "LockCancelledError",
    "LockConnectionError",
    "LockError",
    "LockLostError",
    "LockTimeoutError",
    "NotHeldError",
    "RedisError",
    "UpgradeNotAllowedError",
]


class LockError(Exception):
    """Base class of every error raised by redlock_sdk."""


class InvalidArgumentError(LockError, ValueError):
    """A name, token, duration or option is out of range. Nothing was sent to Redis."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument has the wrong type (also a ``TypeError``)."""


class LockTimeoutError(LockError, TimeoutError):
    """The lock could not be acquired in time where a timeout is an error, not ``False``
    (``with lock:`` on a lock created with ``timeout=``)."""


class NotHeldError(LockError):
    """The caller's owner does not hold the lock (never held, already released, or expired).
    Nothing was changed."""


class LockLostError(NotHeldError):
    """The hold was kept alive by the watchdog and Redis no longer has it (expired during an
    outage, or removed by ``force_unlock``): the critical section was not protected to its end."""


class UpgradeNotAllowedError(LockError):
    """A reader asked for the write lock while still reading. This would deadlock, so it fails
    at once: release the read lock first."""


class LockConnectionError(LockError, ConnectionError):
    """Redis could not be reached, did not answer in time, or refused the credentials or TLS."""


class RedisError(LockError):
    """Redis answered a command with an error."""


class ClientClosedError(LockError):
    """The client was closed; it cannot be used any more."""


class LockCancelledError(LockError):
    """A waiting acquire was cancelled."""


_BY_KIND: dict[type, type[LockError]] = {
    NativeError.InvalidArgument: InvalidArgumentError,
    NativeError.Timeout: LockTimeoutError,
    NativeError.NotHeld: NotHeldError,
    NativeError.LockLost: LockLostError,
    NativeError.UpgradeNotAllowed: UpgradeNotAllowedError,
    NativeError.Connection: LockConnectionError,
    NativeError.Redis: RedisError,
    NativeError.Closed: ClientClosedError,
    NativeError.Cancelled: LockCancelledError,
}


def translate(error: Exception) -> LockError:
    """The public exception for an error raised by the native module."""
    if isinstance(error, InternalError):
        return LockError(f"internal error in redlock_sdk: {error}")
    return _BY_KIND.get(type(error), LockError)(str(error))


# Errors the native module raises; callers catch these and re-raise `translate(e) from None`.
NATIVE_ERRORS = (NativeError, InternalError)
