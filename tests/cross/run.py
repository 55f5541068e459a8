"""One lock, five languages: workers of every language share one redis-server.

    python3 tests/cross/run.py [--demo] [--sections N] [--langs rust,c,go,python,java]

See tests/cross/PROTOCOL.md for what each worker does. Checks, on a redis-server of its own:
1. mutual exclusion: 2 worker processes per language take one exclusive lock and, inside it,
   increment a number in a plain file (a non-atomic resource outside Redis, like seed 002's
   database); no duplicate, no gap, file = total, fencing tokens strictly increase in the
   order the numbers were taken;
2. read/write: readers in Python and Go, writers in Java and Rust; replaying the shared event
   log never finds a reader and a writer inside at once, nor two writers;
3. hand-off: Java takes the lock with a token and exits without releasing; Python releases it
   with that token; a Go waiter (re-check 60 s, hold lease 60 s) must get it at once, which only
   a cross-language pub/sub notification can explain.
Prints a table per language and `N passed, N failed`; exits non-zero on any failure. The
environment (REDLOCK_ROOT, REDLOCK_PREFIX, REDLOCK_JAVA_CLASSES, REDLOCK_PYTHON) is prepared by
scripts/lib-cross.sh.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python-demo"))
from _server import redis_url  # noqa: E402  (the demos' throwaway redis-server)

LANGS = ["rust", "c", "go", "python", "java"]
# Nothing else can wake the hand-off waiter before this: its re-check interval and the hold's
# lease are both 60 s. The bound leaves room for process start-up on a loaded machine.
NOTIFICATION_BOUND_S = 20.0


@dataclass
class Section:
    lang: str
    pid: int
    value: int
    fencing: int
    wait_us: int


def worker(lang: str, *args: str) -> list[str]:
    return [str(HERE / lang / "run.sh"), *args]


def run_all(commands: list[list[str]], timeout: float) -> None:
    """Starts every command at once; fails if any exits non-zero or outlives the timeout."""
    processes = [
        subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c in commands
    ]
    deadline = time.monotonic() + timeout
    failures = []
    for command, process in zip(commands, processes):
        try:
            out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            failures.append(f"{' '.join(command[:2])}: timed out\n{err}")
            continue
        if process.returncode != 0:
            failures.append(f"{' '.join(command)}: exit {process.returncode}\n{out}{err}")
    if failures:
        raise AssertionError("worker failed:\n" + "\n".join(failures))


def read_sections(paths: list[Path]) -> list[Section]:
    sections = []
    for path in paths:
        for line in path.read_text().splitlines():
            lang, pid, value, fencing, wait_us = line.split()
            sections.append(Section(lang, int(pid), int(value), int(fencing), int(wait_us)))
    return sections


# -- the checks ---------------------------------------------------------------------------------


def mutual_exclusion(url: str, work: Path, langs: list[str], per_worker: int) -> list[Section]:
    counter = work / "counter"
    records = []
    commands = []
    for lang in langs:
        for i in range(2):
            record = work / f"mutex-{lang}-{i}.rec"
            records.append(record)
            commands.append(
                worker(
                    lang, "mutex", url, "cross:mutex", str(counter), str(per_worker), str(record)
                )
            )
    run_all(commands, timeout=600)
    sections = read_sections(records)
    total = 2 * len(langs) * per_worker
    values = sorted(s.value for s in sections)
    assert len(sections) == total, f"{len(sections)} sections recorded, {total} expected"
    duplicates = sorted({v for v in values if values.count(v) > 1})
    assert not duplicates, f"numbers taken twice (mutual exclusion broken): {duplicates[:10]}"
    assert values == list(range(1, total + 1)), "a gap in the numbers taken (lost update)"
    assert int(counter.read_text()) == total, f"file holds {counter.read_text()}, not {total}"
    by_order = sorted(sections, key=lambda s: s.value)
    for earlier, later in zip(by_order, by_order[1:]):
        assert later.fencing > earlier.fencing, (
            f"fencing went from {earlier.fencing} ({earlier.lang}, #{earlier.value}) to "
            f"{later.fencing} ({later.lang}, #{later.value})"
        )
    return sections


def read_write(url: str, work: Path, langs: list[str], per_worker: int) -> list[Section]:
    readers = [lang for lang in ("python", "go") if lang in langs]
    writers = [lang for lang in ("java", "rust") if lang in langs]
    log = work / "rw-events.log"
    records, commands = [], []
    for mode, group in (("read", readers), ("write", writers)):
        for lang in group:
            record = work / f"rw-{mode}-{lang}.rec"
            records.append(record)
            commands.append(
                worker(lang, mode, url, "cross:rw", str(log), str(per_worker), str(record))
            )
    run_all(commands, timeout=600)
    inside_r: set[str] = set()
    inside_w: set[str] = set()
    overlapping_reads = 0
    for n, line in enumerate(log.read_text().splitlines(), 1):
        event, kind, pid = line.split()
        if event == "enter" and kind == "W":
            assert not inside_w, f"event {n}: two writers inside ({inside_w} and {pid})"
            assert not inside_r, f"event {n}: a writer entered among readers {inside_r}"
            inside_w.add(pid)
        elif event == "enter":
            assert not inside_w, f"event {n}: a reader entered while writer {inside_w} was in"
            overlapping_reads += bool(inside_r)
            inside_r.add(pid)
        else:
            (inside_w if kind == "W" else inside_r).remove(pid)
    sections = read_sections(records)
    expected = (len(readers) + len(writers)) * per_worker
    assert len(sections) == expected, f"{len(sections)} rw sections, {expected} expected"
    write_tokens = [s.fencing for s in sections if s.lang in writers]
    assert len(set(write_tokens)) == len(write_tokens), "two write holds shared a fencing token"
    print(
        f"   read/write: {len(sections)} sections, readers overlapped {overlapping_reads} times, "
        "never with a writer"
    )
    return sections


def hand_off(url: str, work: Path) -> float:
    token = f"cross-handoff-{uuid.uuid4()}"
    name = "cross:handoff"
    held = subprocess.run(
        worker("java", "hold", url, name, token),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert held.stdout.startswith("held "), held.stdout
    ready = work / "waiter.ready"
    waiter = subprocess.Popen(
        worker("go", "wait", url, name, str(ready)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert waiter.poll() is None, f"the waiter ended early: {waiter.communicate()}"
        assert time.monotonic() < deadline, "the waiter never got ready"
        time.sleep(0.02)
    time.sleep(0.5)  # let it subscribe and queue behind the Java hold
    assert waiter.poll() is None, "the waiter got a lock that Java holds"
    release_started_ms = time.time() * 1000
    released = subprocess.run(
        worker("python", "release", url, name, token),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    release_took_ms = time.time() * 1000 - release_started_ms
    assert released.stdout.strip() == "released 0", released.stdout
    out, err = waiter.communicate(timeout=NOTIFICATION_BOUND_S)
    assert waiter.returncode == 0, err
    word, _fencing, acquired_ms = out.split()
    assert word == "acquired", out
    after_ms = float(acquired_ms) - release_started_ms
    print(
        f"   the Go waiter had the lock {after_ms:.0f} ms after the Python release process "
        f"started (which ran {release_took_ms:.0f} ms, interpreter start-up included); its "
        "re-check was 60 s, so a notification woke it"
    )
    return after_ms


# -- report -------------------------------------------------------------------------------------


def table(sections: list[Section], langs: list[str]) -> str:
    rows = [
        f"{'language':10}{'sections':>9}{'wait p50 ms':>13}{'wait max ms':>13}"
        f"{'fencing tokens seen':>22}"
    ]
    for lang in langs:
        mine = [s for s in sections if s.lang == lang]
        if not mine:
            continue
        waits = [s.wait_us / 1000 for s in mine]
        tokens = [s.fencing for s in mine]
        rows.append(
            f"{lang:10}{len(mine):9d}{statistics.median(waits):13.2f}{max(waits):13.2f}"
            f"{f'{len(set(tokens))} ({min(tokens)}..{max(tokens)})':>22}"
        )
    return "\n".join(rows)


def run_checks(checks: list, langs: list[str]) -> tuple[int, int]:
    passed = failed = 0
    for title, check in checks:
        started = time.monotonic()
        try:
            result = check()
        except AssertionError as failure:
            failed += 1
            print(f"FAIL {title}: {failure}")
            continue
        passed += 1
        print(f"ok   {title} ({time.monotonic() - started:.1f} s)")
        if isinstance(result, list) and title.startswith("mutual"):
            total = len(result)
            print(f"\n{table(result, langs)}\n")
            print(
                f"   {total} sections by {2 * len(langs)} processes in {len(langs)} "
                f"languages: numbers 1..{total}, no duplicate, no gap; fencing tokens "
                "strictly increase in the order the numbers were taken\n"
            )
    return passed, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--demo", action="store_true", help="the mutual-exclusion run and table only"
    )
    parser.add_argument("--sections", type=int, default=None, help="sections per worker process")
    parser.add_argument("--langs", default=",".join(LANGS))
    args = parser.parse_args()
    langs = [lang for lang in args.langs.split(",") if lang]
    per_worker = args.sections or (25 if args.demo else 40)

    for lang in langs:
        subprocess.run([str(HERE / lang / "build.sh")], check=True)

    with redis_url() as url, tempfile.TemporaryDirectory(prefix="redlock-cross-") as tmp:
        work = Path(tmp)
        checks = [
            (
                "mutual exclusion across languages",
                lambda: mutual_exclusion(url, work, langs, per_worker),
            )
        ]
        if not args.demo:
            checks.append(
                ("read/write across languages", lambda: read_write(url, work, langs, per_worker))
            )
            if {"java", "python", "go"} <= set(langs):
                checks.append(("hand-off Java -> Python -> Go", lambda: hand_off(url, work)))
        passed, failed = run_checks(checks, langs)
    print(f"cross: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
