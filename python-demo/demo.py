"""Runs the three seed scenarios in Python against a redis-server of its own.

python python-demo/demo.py          # or REDIS_URL=redis://host:port/0 python ...
"""

from __future__ import annotations

import asyncio

import redlock_sdk as rl
import seed000_read_write
import seed001_pitfalls
import seed002_key_generator
from _server import redis_url


async def asyncio_tasks(url: str) -> None:
    print("asyncio: 20 tasks of one event loop, one owner per task")
    with rl.Client(url, prefix="demo-async") as client:
        lock = client.lock("inventory")
        inside = 0
        most = 0

        async def task() -> None:
            nonlocal inside, most
            async with lock:
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0.001)
                inside -= 1

        await asyncio.gather(*(task() for _ in range(20)))
        print(f"   at most {most} task inside at once")


def main() -> None:
    with redis_url() as url:
        seed000_read_write.main(url)
        seed001_pitfalls.main(url)
        seed002_key_generator.main(url)
        asyncio.run(asyncio_tasks(url))


if __name__ == "__main__":
    main()
