"""asyncio's native calls, polled on the loop's own thread (see ffi/src/python/polled.rs).

A call is started by ``_fast.start_acquire``/``start_release`` and polled by ``_fast.drive``
(``run``); between polls its task sleeps until the runtime says the call is worth polling again.
Those wake-ups reach a loop through one descriptor per loop, whatever the number of its calls
(``_LoopWakeups``): a process may have thousands of tasks waiting for locks, and a few hundred
descriptors at most to spare.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
import weakref
from collections.abc import Callable

from . import _fast

_TAKE = 64  # woken call ids taken per native call


class _Sentinel:
    __slots__ = ("__weakref__",)


class _LoopWakeups:
    """One event loop's wake-ups: the loop watches their descriptor, and each time it is
    readable, takes the ids of the woken calls and wakes the tasks polling them."""

    __slots__ = ("__weakref__", "_buffer", "_free", "_running", "_waiting", "_woken", "id")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        wakeups = _fast.new_loop()
        if wakeups < 0:
            _fast.raise_error()
        self.id = wakeups
        self._free = weakref.finalize(self, _fast.free_loop, wakeups)
        self._buffer = (ctypes.c_uint64 * _TAKE)()
        self._running: set[int] = set()
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._woken: set[int] = set()
        # The loop's reader holds the only reference to `gone`: it goes when the loop can no
        # longer run its reader (closed, or collected), and then the calls still polled by this
        # loop are ended, since their tasks can never run again (an acquire is cancelled, and a
        # lock granted to it meanwhile is given back, instead of staying held for its lease).
        gone = _Sentinel()
        weakref.finalize(gone, self._end_running)
        try:
            loop.add_reader(_fast.loop_fd(wakeups), self._take, gone)
        except BaseException:
            self._free()
            raise

    def close(self) -> None:
        """Frees the native side (for a closed loop, which can no longer remove its reader)."""
        self._free()

    async def wait(self, call: int) -> None:
        """Returns once ``call`` was woken since it last asked."""
        if call in self._woken:
            self._woken.discard(call)
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting[call] = future
        try:
            await future
        finally:
            if self._waiting.get(call) is future:
                del self._waiting[call]

    def _end_running(self) -> None:
        for call in list(self._running):
            _fast.end(call)

    def _take(self, _gone: _Sentinel | None = None) -> None:
        buffer = self._buffer
        while True:
            taken = _fast.take_woken(self.id, buffer, _TAKE)
            for call in buffer[: max(taken, 0)]:
                future = self._waiting.pop(call, None)
                if future is not None and not future.done():
                    future.set_result(None)
                elif call in self._running:
                    # Woken while polled, or before its task got back to waiting.
                    self._woken.add(call)
            if taken < _TAKE:
                return


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWakeups | None] = (
    weakref.WeakKeyDictionary()
)
_MAKING = threading.Lock()


def loop_wakeups() -> _LoopWakeups | None:
    """The running loop's wake-ups; None for a loop that cannot watch a descriptor (its calls
    wait in an executor thread)."""
    loop = asyncio.get_running_loop()
    wakeups = _BY_LOOP.get(loop, False)
    if wakeups is not False:
        return wakeups
    with _MAKING:
        # Closed loops' wake-ups are freed here rather than whenever the loop is collected.
        for closed in [other for other in _BY_LOOP if other.is_closed()]:
            old = _BY_LOOP.pop(closed, None)
            if old is not None:
                old.close()
        try:
            wakeups = _LoopWakeups(loop)
        except NotImplementedError:
            wakeups = None
        _BY_LOOP[loop] = wakeups
        return wakeups


async def run(start: Callable[[int], int]) -> int:
    """Starts a native call with ``start(the loop's wake-ups id, or 0)`` and polls it on this
    loop's thread until it ends; returns its outcome, or raises its error (a ``NativeError``).
    Left unfinished (the task was cancelled), the call is ended: an acquire is cancelled and
    leaves nothing, a release completes in the background."""
    wakeups = loop_wakeups()
    call = start(wakeups.id if wakeups is not None else 0)
    if call < 0:
        _fast.raise_error()
    try:
        outcome = await _driven(call, wakeups)
        if outcome < 0:
            _fast.raise_error()
        return outcome
    finally:
        _fast.end(call)


async def _driven(call: int, wakeups: _LoopWakeups | None) -> int:
    """Polls a native call on this loop's thread until it ends, sleeping between polls until it
    is woken; returns the last ``_fast.drive`` answer (-1: failed, the error is stashed for this
    thread)."""
    outcome = _fast.drive(call)
    if outcome != _fast.RUNNING:
        return outcome
    if wakeups is None:
        return await _driven_from_a_thread(call)
    wakeups._running.add(call)
    try:
        while outcome == _fast.RUNNING:
            await wakeups.wait(call)
            outcome = _fast.drive(call)
        return outcome
    finally:
        wakeups._running.discard(call)
        wakeups._woken.discard(call)


async def _driven_from_a_thread(call: int) -> int:
    """``_driven`` for loops that cannot watch a descriptor: an executor thread waits for each
    wake-up (ending the call wakes it too), and the loop's thread polls."""
    loop = asyncio.get_running_loop()
    outcome = _fast.RUNNING
    while outcome == _fast.RUNNING:
        await loop.run_in_executor(None, _fast.sleep, call, 1.0)
        outcome = _fast.drive(call)
    return outcome
