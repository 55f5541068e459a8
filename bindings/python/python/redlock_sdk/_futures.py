"""UniFFI's async calls (``inspect_async``, ``force_unlock_async``, ``extend_async``...) wake
their task through a continuation callback that the generated module calls on a native thread
of the library; for a loop closed meanwhile, its ``call_soon_threadsafe`` raised RuntimeError
and ctypes printed a traceback per call. The task can never run again: nothing to wake."""

from __future__ import annotations

import asyncio

from ._native import redlock as _generated


@_generated._UNIFFI_RUST_FUTURE_CONTINUATION_CALLBACK
def _continuation(future_ptr: int, poll_code: int) -> None:
    eventloop, future = _generated._UniffiContinuationHandleMap.remove(future_ptr)
    try:
        if eventloop is asyncio._get_running_loop():
            # Called inside the poll, on the loop's own thread (a reply already there): no
            # self-pipe write, which would let go of the GIL inside a native frame (see
            # ffi/src/python/events.rs for why a thread must not do that at exit).
            eventloop.call_soon(_generated._uniffi_set_future_result, future, poll_code)
        else:
            eventloop.call_soon_threadsafe(_generated._uniffi_set_future_result, future, poll_code)
    except RuntimeError:
        if not eventloop.is_closed():
            raise


# Looked up by the generated `_uniffi_rust_call_async` at each poll; the module global keeps
# the ctypes callback alive for as long as the library may call it.
_generated._uniffi_continuation_callback = _continuation
