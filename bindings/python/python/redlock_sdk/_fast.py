"""The two hot calls, acquire and release, straight through ctypes.

The generated UniFFI wrapper of a native method costs more Python CPU than the lock's own
client work (a handle clone that is itself an FFI call, a check and a conversion per argument, a
call-status structure per call). The library exports these two calls as plain C functions of
numbers (``ffi/src/python/fast.rs``): one FFI call each, made like every other, with the GIL
released. They fail by returning -1; the error is kept for this thread and raised by
``raise_error`` as the usual ``NativeError`` exception.
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


def raise_error() -> None:
    """Raises the error of this thread's last failed fast call (a ``NativeError``)."""
    _native.raise_stashed_error()
    raise RuntimeError("redlock: a native call failed without an error")
