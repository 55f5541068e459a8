"""The library's own log lines (a lost hold, a failed renewal, a contention alert naming its
holders, ...) as records of the logger ``redlock_sdk``, at WARNING and above unless
``set_log_level`` asks for more (or none). Each record carries the line's origin in the Rust
core as ``record.redlock_target``."""

from __future__ import annotations

import contextlib
import ctypes
import logging

from . import _fast

_logger = logging.getLogger("redlock_sdk")

# The core's levels (1 error .. 5 trace) as logging's.
_LEVELS = {
    1: logging.ERROR,
    2: logging.WARNING,
    3: logging.INFO,
    4: logging.DEBUG,
    5: logging.DEBUG,
}

_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)


@_LOG_FN
def _forward(level: int, target: bytes, message: bytes) -> None:
    # Called on the library's log thread, one line at a time: nothing, not even a handler's
    # failure, may escape into the native caller.
    with contextlib.suppress(Exception):
        _logger.log(
            _LEVELS.get(level, logging.DEBUG),
            "%s",
            message.decode("utf-8", "replace"),
            extra={"redlock_target": target.decode("utf-8", "replace")},
        )


_forward_logs = _fast._lib.redlock_python_forward_logs
_forward_logs.argtypes = (ctypes.c_int, _LOG_FN)
_forward_logs.restype = ctypes.c_int


def set_log_level(level: int | None) -> None:
    """Which of the library's log lines reach the logger ``redlock_sdk``: those at ``level`` (a
    ``logging`` level) or more severe; ``None`` for none. WARNING when the package is imported.
    (The logger's own level and handlers still apply, as for any logger.)"""
    if level is None:
        core = 0
    elif level >= logging.ERROR:
        core = 1
    elif level >= logging.WARNING:
        core = 2
    elif level >= logging.INFO:
        core = 3
    else:
        core = 4
    if _forward_logs(core, _forward) == 2:
        raise RuntimeError(
            "redlock_sdk: this process already has a Rust tracing subscriber; "
            "the library's log lines go to it"
        )


# Another Rust extension that set up tracing first keeps the lines (its subscriber logs them).
with contextlib.suppress(RuntimeError):
    set_log_level(logging.WARNING)
