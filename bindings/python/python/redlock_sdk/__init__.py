"""redlock_sdk: Redis distributed locks for Python, reentrant and read/write, owned by tokens.

    import redlock_sdk as rl

    with rl.Client("redis://127.0.0.1:6379/0") as client:
        lock = client.lock("orders:42")
        with lock:                      # waits as long as needed; the watchdog keeps it alive
            print(lock.fencing_token)

Sync calls default to one owner per thread, async calls (``async with lock``) to one owner per
asyncio task; ``client.lock(name, owner=token)`` hands a hold over to another thread or
process. All locking is done by the redlock-sdk Rust core (libredlock.so), shared with the
Java, Go and C bindings.
"""

from ._client import Client
from ._errors import (
    ArgumentTypeError,
    ClientClosedError,
    InvalidArgumentError,
    LockCancelledError,
    LockConnectionError,
    LockError,
    LockLostError,
    LockTimeoutError,
    NotHeldError,
    RedisError,
    UpgradeNotAllowedError,
)
from ._events import ContentionAlert, LockLostEvent
from ._lock import Lock, ReadWriteLock
from ._logs import set_log_level
from ._native import new_owner_token

# `rl.ConnectionError` for connection failures (a subclass of the builtin ConnectionError);
# not in __all__ so that `from redlock_sdk import *` never shadows the builtin.
ConnectionError = LockConnectionError

__all__ = [
    "ArgumentTypeError",
    "Client",
    "ClientClosedError",
    "ContentionAlert",
    "InvalidArgumentError",
    "Lock",
    "LockCancelledError",
    "LockConnectionError",
    "LockError",
    "LockLostError",
    "LockLostEvent",
    "LockTimeoutError",
    "NotHeldError",
    "ReadWriteLock",
    "RedisError",
    "UpgradeNotAllowedError",
    "new_owner_token",
    "set_log_level",
]
