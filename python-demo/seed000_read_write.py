"""Seed 000: a distributed read/write lock on an ARTICLE, unlocked on another instance, with a
dead-lock alert when a waiter counts too many failures."""

from __future__ import annotations

import multiprocessing
import threading
import time

import redlock_sdk as rl


def reader(client: rl.Client, n: int, article: dict) -> None:
    with client.rw_lock("ARTICLE").read_lock():
        print(f"  reader {n}: reads {article['text']!r} (other readers may read at once)")
        time.sleep(0.1)


def writer(client: rl.Client, article: dict) -> None:
    with client.rw_lock("ARTICLE").write_lock() as lock:
        print(f"  writer: alone, fencing token {lock.fencing_token}")
        article["text"] = "edited"
        time.sleep(0.1)


def unlock_on_another_instance(url: str, prefix: str, token: str) -> None:
    with rl.Client(url, prefix=prefix) as other:
        left = other.rw_lock("ARTICLE", owner=token).write_lock().release()
        print(
            f"  instance B (pid {multiprocessing.current_process().pid}) released it, "
            f"{left} holds left"
        )


def main(url: str) -> None:
    print("seed 000: read/write lock on ARTICLE")
    prefix = "demo000"
    alerts: list[rl.ContentionAlert] = []
    with rl.Client(
        url, prefix=prefix, contention_alert_after=0.3, on_contention=alerts.append
    ) as client:
        article = {"text": "draft"}
        threads = [threading.Thread(target=reader, args=(client, n, article)) for n in range(3)]
        threads.append(threading.Thread(target=writer, args=(client, article)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        print("- lock on instance A, unlock on instance B (the token is the owner)")
        lock = client.rw_lock("ARTICLE").write_lock()
        lock.acquire(lease=30)
        spawn = multiprocessing.get_context("spawn")
        b = spawn.Process(target=unlock_on_another_instance, args=(url, prefix, lock.token))
        b.start()
        b.join()
        print(f"  locked now: {lock.locked()}")

        print("- a stuck holder: the waiter's alert names it (dead-lock detection)")
        lock.acquire(lease=30)
        waiter = threading.Thread(
            target=lambda: client.rw_lock("ARTICLE").read_lock().acquire(timeout=0.6)
        )
        waiter.start()
        waiter.join()
        for alert in alerts[:1]:
            holders = ", ".join(
                f"{h['thread']} (pid {h['pid']}, held {h['held_for']:.2f} s)" for h in alert.holders
            )
            print(
                f"  ALERT {alert.name}: waited {alert.waited:.2f} s, "
                f"{alert.failed_attempts} failed attempts; held by {holders}"
            )
        lock.release()
