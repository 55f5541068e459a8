"""Fixtures: a real, throwaway redis-server per test session, on a free loopback port."""

from __future__ import annotations

import itertools
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redlock_sdk as rl


class RedisServer:
    """A redis-server of our own: loopback only, no persistence, killed at the end."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (scripts/setup.sh installs it)")
        self.port = _free_port()
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self, *args: str) -> str:
        """One command in RESP over a plain socket (no client library needed)."""
        payload = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(payload.encode())
            return s.recv(1 << 20).decode(errors="replace")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"redis-server exited with {self.process.returncode}")
            try:
                if "PONG" in self.command("PING"):
                    return
            except OSError:
                time.sleep(0.02)
        pytest.fail("redis-server did not start within 10 s")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


def eventually(done: Callable[[], bool], limit: float = 10.0) -> bool:
    """Calls ``done()`` every 10 ms until it returns true or ``limit`` seconds pass; whether it
    did. For states another thread or task reaches in its own time (a waiter announcing itself
    or withdrawing), which under load (valgrind, CPU burners, a busy CI machine) may take far
    longer than a fixed sleep allows."""
    deadline = time.monotonic() + limit
    while not done():
        if time.monotonic() >= deadline:
            return done()
        time.sleep(0.01)
    return True


async def eventually_async(done: Callable[[], bool], limit: float = 10.0) -> bool:
    """``eventually`` for a coroutine: sleeps with ``asyncio.sleep``, so the loop's other tasks
    (the waiter itself) run meanwhile."""
    import asyncio

    deadline = time.monotonic() + limit
    while not done():
        if time.monotonic() >= deadline:
            return done()
        await asyncio.sleep(0.01)
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


_prefixes = itertools.count()


@pytest.fixture
def prefix() -> str:
    """A key prefix of this test alone, so tests never see each other's locks."""
    return f"t{next(_prefixes)}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def client(redis_server: RedisServer, prefix: str) -> Iterator[rl.Client]:
    with rl.Client(redis_server.url, prefix=prefix) as c:
        yield c


@pytest.fixture
def other_client(redis_server: RedisServer, prefix: str) -> Iterator[rl.Client]:
    """A second client (as another process would have) on the same keys."""
    with rl.Client(redis_server.url, prefix=prefix) as c:
        yield c
