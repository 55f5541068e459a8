"""os.fork() while other threads are inside the library: a blocking acquire waiting on a held
lock, acquire/release loops, cheap calls in a loop, and an asyncio loop with a pending
acquire_async. Each child must finish its first calls (inherited client and a new one) in
bounded time and be excluded from what the parent holds; the parent must keep working."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

FORK_UNDER_LOAD = r"""
import asyncio, os, signal, subprocess, sys, threading, time
import redlock_sdk as rl

url, prefix, forks = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = rl.Client(url, prefix=prefix, command_timeout=2.0)
held = client.lock("held")
assert held.acquire(blocking=False)  # the main thread's hold, kept by the watchdog
stop = threading.Event()
released = threading.Event()
errors = []


def waiter():  # waits on the held lock the whole time (another thread: another owner)
    try:
        got = client.lock("held").acquire(timeout=3600)
        if not released.is_set():
            errors.append(f"waiter got the held lock while the parent held it: {got}")
    except Exception as e:  # closed at the end
        if not stop.is_set():
            errors.append(f"waiter: {e!r}")


def looper(name):
    lock = client.lock(name)
    while not stop.is_set():
        try:
            if not lock.acquire(timeout=10):
                errors.append(f"{name}: timeout")
            elif lock.release() != 0:
                errors.append(f"{name}: release left holds")
        except Exception as e:
            errors.append(f"{name}: {e!r}")


def cheap():  # calls that need no Redis: making lock objects
    while not stop.is_set():
        client.lock("cheap")


def async_pending():
    async def main():
        lock = client.lock("held")
        task = asyncio.ensure_future(lock.acquire_async(timeout=3600))
        while not stop.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
    asyncio.run(main())


threads = [threading.Thread(target=waiter, daemon=True),
           threading.Thread(target=looper, args=("own-a",)),
           threading.Thread(target=looper, args=("own-b",)),
           threading.Thread(target=looper, args=("own-c",)),
           threading.Thread(target=looper, args=("own-d",)),
           threading.Thread(target=looper, args=("shared",)),
           threading.Thread(target=looper, args=("shared",)),
           threading.Thread(target=cheap),
           threading.Thread(target=async_pending)]
for t in threads:
    t.start()
time.sleep(0.3)

STEPS = ["start", "acquire on inherited client", "new client", "acquire on new client",
         "own lock on new client", "done"]
hangs = bad = 0
for f in range(forks):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            os.write(w, b"\x01")
            if client.lock("held").acquire(blocking=False):
                code = 11
            os.write(w, b"\x02")
            c2 = rl.Client(url, prefix=prefix, command_timeout=2.0)
            os.write(w, b"\x03")
            if code == 0 and c2.lock("held").acquire(blocking=False):
                code = 12
            os.write(w, b"\x04")
            own = c2.lock(f"child-{os.getpid()}")
            if code == 0 and not (own.acquire(timeout=2, lease=5) and own.release() == 0):
                code = 13
            os.write(w, b"\x05")
        except BaseException as e:
            sys.stderr.write(f"child error: {e!r}\n")
            code = 20
        os._exit(code)
    os.close(w)
    os.set_blocking(r, False)
    deadline = time.monotonic() + 10
    done = 0
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.005)
    try:
        got = os.read(r, 16)
    except BlockingIOError:
        got = b""
    os.close(r)
    step = STEPS[got[-1]] if got else STEPS[0]
    if not done:
        hangs += 1
        print(f"fork {f}: child {pid} hung in step '{step}'", flush=True)
        if hangs == 1:
            out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 8"],
                                 capture_output=True, text=True).stdout
            print("\n".join(l[:200] for l in out.splitlines()
                            if l.startswith(("#", "Thread")))[:6000], flush=True)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    elif os.waitstatus_to_exitcode(status) != 0:
        bad += 1
        print(f"fork {f}: child failed with {os.waitstatus_to_exitcode(status)} in step '{step}'",
              flush=True)

stop.set()
for t in threads[1:]:
    t.join(30)
ok = held.owned() and held.hold_count == 1
released.set()
held.release()
print(f"forks {forks} hangs {hangs} bad {bad} parent_ok {ok} errors {errors[:5]}", flush=True)
sys.stdout.flush()
os._exit(0 if hangs == 0 and bad == 0 and ok and not errors else 1)
"""


@pytest.mark.timeout(300)
def test_fork_while_other_threads_are_inside_the_library(redis_server, prefix: str) -> None:
    forks = os.environ.get("REDLOCK_FORK_COUNT", "200")
    done = subprocess.run(
        [sys.executable, "-c", FORK_UNDER_LOAD, redis_server.url, prefix, forks],
        capture_output=True,
        text=True,
        timeout=240,
    )
    print(done.stdout[-8000:])
    print(done.stderr[-4000:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
