"""The hot calls, acquire and release (sync, and asyncio's polled calls), straight through ctypes.

The generated UniFFI wrapper of a native method costs more Python CPU than the lock's own
client work (a handle clone that is itself an FFI call, a check and a conversion per argument, a
call-status structure per call). The library exports these two calls as plain C functions of
numbers (``ffi/src/python/fast.rs``): one FFI call each, made like every other, with the GIL
released. They fail by returning -1; the error is kept for this thread and raised by
``raise_error`` as the usual ``NativeError`` exception.

asyncio's calls are started (``start_acquire``/``start_release``, giving a call id), polled on
the loop's thread (``drive``) whenever the loop's wake-ups (``new_loop``: one descriptor per loop,
``loop_fd``) name them (``take_woken``), and ended (``end``) whatever happens (see
``ffi/src/python/polled.rs``).
"""

from __future__ import annotations

import ctypes
import os
import sys

from . import _native

if sys.platform == "darwin":
    _LIBRARY = "libredlock.dylib"
elif sys.platform.startswith("win"):
    _LIBRARY = "redlock.dll"
else:
    _LIBRARY = "libredlock.so"

# The library the generated module loaded (the same path, so the same loaded copy).
_lib = ctypes.CDLL(os.path.join(os.path.dirname(_native.__file__), _LIBRARY))

# (lock id, owner id, wait s, lease s, first wait s, ticket) -> 1 acquired, 0 parked, -1 failed
acquire = _lib.redlock_python_acquire
acquire.argtypes = (
    ctypes.c_uint64,
    ctypes.c_uint64,
    ctypes.c_double,
    ctypes.c_double,
    ctypes.c_double,
    ctypes.c_uint64,
)
acquire.restype = ctypes.c_int8

# (lock id, owner id) -> holds left (>= 0), -1 failed
release = _lib.redlock_python_release
release.argtypes = (ctypes.c_uint64, ctypes.c_uint64)
release.restype = ctypes.c_int64


# () -> the id (>= 1) of one event loop's wake-ups, -1 failed
new_loop = _lib.redlock_python_new_loop
new_loop.argtypes = ()
new_loop.restype = ctypes.c_int64

# (wake-ups id) -> the descriptor the loop watches, -1 failed
loop_fd = _lib.redlock_python_loop_fd
loop_fd.argtypes = (ctypes.c_uint64,)
loop_fd.restype = ctypes.c_int32

# (wake-ups id, out: u64[capacity], capacity) -> how many woken call ids were written, -1 failed
take_woken = _lib.redlock_python_take_woken
take_woken.argtypes = (ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t)
take_woken.restype = ctypes.c_int64

# (wake-ups id): frees them
free_loop = _lib.redlock_python_free_loop
free_loop.argtypes = (ctypes.c_uint64,)
free_loop.restype = None

# (lock id, owner id, wait s, lease s, wake-ups id or 0) -> call id (>= 1), -1 failed
start_acquire = _lib.redlock_python_start_acquire
start_acquire.argtypes = (
    ctypes.c_uint64,
    ctypes.c_uint64,
    ctypes.c_double,
    ctypes.c_double,
    ctypes.c_uint64,
)
start_acquire.restype = ctypes.c_int64

# (lock id, owner id, wake-ups id or 0) -> call id (>= 1), -1 failed
start_release = _lib.redlock_python_start_release
start_release.argtypes = (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64)
start_release.restype = ctypes.c_int64

# What ``drive`` returns while the call still runs.
RUNNING = -2

# (call id) -> RUNNING, the outcome (acquire: 1; release: holds left, >= 0), -1 failed
drive = _lib.redlock_python_drive
drive.argtypes = (ctypes.c_uint64,)
drive.restype = ctypes.c_int64

# (call id, timeout s) -> 1 woken, 0 not, -1 failed (for loops without add_reader)
sleep = _lib.redlock_python_sleep
sleep.argtypes = (ctypes.c_uint64, ctypes.c_double)
sleep.restype = ctypes.c_int8

# (call id): gives up an unfinished call (an acquire leaves nothing; a release completes)
end = _lib.redlock_python_end
end.argtypes = (ctypes.c_uint64,)
end.restype = None

# (patience s): from now on no native thread enters Python (the atexit hook; see events.rs)
exiting = _lib.redlock_python_exiting
exiting.argtypes = (ctypes.c_double,)
exiting.restype = None


def raise_error() -> None:
    """Raises the error of this thread's last failed fast call (a ``NativeError``)."""
    _native.raise_stashed_error()
    raise RuntimeError("redlock: a native call failed without an error")
