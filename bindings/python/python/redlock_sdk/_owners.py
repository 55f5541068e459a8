"""Default owners: one per thread for sync code, one per asyncio task for async code.

The caller's owner is the lock's explicit ``owner=`` token if it has one; otherwise the
current asyncio task's (when called inside a running task, so that tasks of one event loop
exclude each other), otherwise the current thread's. A forked child gets fresh tokens: it must
never share its parent's identity.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref

from . import _args
from ._native import NativeOwner


class Owner:
    """An owner token with its native handle (made once, passed to every lock call)."""

    __slots__ = ("id", "native", "token")

    def __init__(self, native: NativeOwner) -> None:
        self.native = native
        self.token = native.token()
        self.id = native.id()  # names the owner in the hot native calls (see NativeOwner::id)

    @classmethod
    def random(cls, label: str) -> Owner:
        return cls(NativeOwner.random(label))


class _Registry:
    def __init__(self) -> None:
        self.threads = threading.local()
        self.tasks: weakref.WeakKeyDictionary[asyncio.Task, Owner] = weakref.WeakKeyDictionary()
        self.tasks_guard = threading.Lock()


_registry = _Registry()


def _forget_parent_owners() -> None:
    global _registry
    _registry = _Registry()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_owners)


def current_task() -> asyncio.Task | None:
    """The asyncio task running in this thread, if any (no exception when there is no loop)."""
    loop = asyncio._get_running_loop()
    return None if loop is None else asyncio.current_task(loop)


def caller() -> Owner:
    """The caller's default owner: the running asyncio task's, else the current thread's."""
    registry = _registry
    task = current_task()
    if task is not None:
        with registry.tasks_guard:
            owner = registry.tasks.get(task)
            if owner is None:
                label = _args.label(f"{task.get_name()} ({threading.current_thread().name})")
                owner = registry.tasks[task] = Owner.random(label)
        return owner
    owner = getattr(registry.threads, "owner", None)
    if owner is None:
        owner = registry.threads.owner = Owner.random(_args.label(threading.current_thread().name))
    return owner


def explicit(token: str) -> Owner:
    """An owner for a token handed over from elsewhere, labelled with the current thread."""
    label = _args.label(f"{threading.current_thread().name} (handed-over token)")
    return Owner(NativeOwner(token, label))
