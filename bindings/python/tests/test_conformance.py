"""The shared conformance scenarios (``tests/conformance/scenarios.txt``), run against a real
redis-server through the Python API. Every language runs the same file; the format and the
verbs are described in ``tests/conformance/README.md``, and the Rust runner
(``core/tests/conformance.rs``) is the reference for their meaning.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redlock_sdk as rl

SCENARIOS = Path(__file__).resolve().parents[3] / "tests" / "conformance" / "scenarios.txt"

# How long `await` waits for a background acquire beyond its own wait before calling it hung.
_AWAIT_GRACE = 30.0


@dataclass
class Step:
    line: int
    text: str
    owner: str
    verb: str
    target: str | None
    args: dict[str, str]
    expect: list[str]


@dataclass
class Scenario:
    line: int
    title: str
    steps: list[Step] = field(default_factory=list)


def parse(text: str) -> list[Scenario]:
    scenarios: list[Scenario] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("scenario "):
            scenarios.append(Scenario(n, line[len("scenario ") :].strip()))
            continue
        call, _, expect = line.partition("->")
        words = call.split()
        if len(words) < 2:
            raise ValueError(f"{SCENARIOS}:{n}: a step needs an owner and a verb: {line!r}")
        target = None
        args: dict[str, str] = {}
        for word in words[2:]:
            key, eq, value = word.partition("=")
            if eq:
                args[key] = value
            else:
                target = word
        if not scenarios:
            raise ValueError(f"{SCENARIOS}:{n}: a step before any scenario")
        scenarios[-1].steps.append(Step(n, line, words[0], words[1], target, args, expect.split()))
    return scenarios


ALL_SCENARIOS = parse(SCENARIOS.read_text(encoding="utf-8"))


def test_the_scenario_file_was_read() -> None:
    assert len(ALL_SCENARIOS) >= 10, f"only {len(ALL_SCENARIOS)} scenarios in {SCENARIOS}"


class StepFailed(AssertionError):
    pass


def verdict(call: Callable[[], Any]) -> tuple[str, Any]:
    """The contract's name for a call's outcome (``ok`` or an error kind), and its value."""
    try:
        value = call()
    except rl.UpgradeNotAllowedError:
        return "upgrade_not_allowed", None
    except rl.LockLostError:  # before NotHeldError: it is a subclass
        return "lock_lost", None
    except rl.NotHeldError:
        return "not_held", None
    except Exception as e:
        return f"unexpected error {type(e).__name__}: {e}", None
    return "ok", value


def acquire_verdict(call: Callable[[], bool]) -> str:
    got, value = verdict(call)
    if got == "ok" and value is False:
        return "timeout"
    return got


def seconds(ms: str) -> float:
    return int(ms) / 1000


class Background:
    """An ``acquire&``: the acquire runs in a thread; ``await`` joins it."""

    def __init__(self, call: Callable[[], bool], lock: rl.Lock, wait: float | None) -> None:
        self.lock = lock
        self.wait = wait
        self.result: str | None = None
        self.thread = threading.Thread(target=self._run, name="conformance acquire&", daemon=True)
        self._call = call
        self.thread.start()

    def _run(self) -> None:
        self.result = acquire_verdict(self._call)


class Run:
    def __init__(self, clients: tuple[rl.Client, rl.Client], name: str) -> None:
        self.clients = clients
        self.name = name
        self.owners: dict[str, str] = {}
        self.fences: dict[str, int] = {}
        self.background: dict[str, Background] = {}

    def owner(self, spec: str) -> tuple[rl.Client, str]:
        letter, at, client = spec.partition("@")
        if at and client == "2":
            index = 1  # the same token on client 2 (a hand-off)
        else:
            letter, index = spec, 0
        token = self.owners.get(letter)
        if token is None:
            token = self.owners[letter] = rl.new_owner_token()
        return self.clients[index], token

    def view(self, client: rl.Client, target: str | None, owner: str | None) -> rl.Lock:
        if target == "lock":
            return client.lock(self.name, owner=owner)
        if target == "read":
            return client.rw_lock(self.name, owner=owner).read_lock()
        if target == "write":
            return client.rw_lock(self.name, owner=owner).write_lock()
        raise StepFailed(f"unknown target {target!r}")

    def check_acquired(self, got: str, lock: rl.Lock, expect: list[str]) -> None:
        """Checks ``ok count=N fence=T fence>T`` against an acquisition's verdict."""
        if not expect:
            raise StepFailed(f"no expected verdict, got {got}")
        if got != expect[0]:
            raise StepFailed(f"expected {expect[0]}, got {got}")
        if got != "ok":
            return
        checks = expect[1:]
        count = lock.hold_count if any(c.startswith("count=") for c in checks) else None
        fence = lock.fencing_token if any(c.startswith("fence") for c in checks) else None
        for check in checks:
            if check.startswith("count="):
                n = check[len("count=") :]
                if str(count) != n:
                    raise StepFailed(f"expected {' '.join(expect)}, got hold count {count}")
            elif check.startswith("fence>"):
                bound_name = check[len("fence>") :]
                bound = self.fences[bound_name]
                if fence is None or fence <= bound:
                    raise StepFailed(
                        f"expected {' '.join(expect)}, got fencing token {fence}, "
                        f"not above {bound_name}={bound}"
                    )
            elif check.startswith("fence="):
                bound_name = check[len("fence=") :]
                if fence is None:
                    raise StepFailed(f"expected {' '.join(expect)}, got no fencing token")
                bound = self.fences.setdefault(bound_name, fence)
                if fence != bound:
                    raise StepFailed(
                        f"expected {' '.join(expect)}, got fencing token {fence}, "
                        f"not {bound_name}={bound}"
                    )
            else:
                raise StepFailed(f"unknown check {check!r}")

    def step(self, step: Step) -> None:
        expect = step.expect
        wanted = " ".join(expect)

        def check(got: str) -> None:
            if got != wanted:
                raise StepFailed(f"expected {wanted}, got {got}")

        def arg_seconds(key: str) -> float | None:
            value = step.args.get(key)
            return None if value is None or value == "watchdog" else seconds(value)

        verb = step.verb
        if verb == "sleep":
            time.sleep(seconds(step.args["ms"]))
            return
        if verb == "locked":
            rw = self.clients[1].rw_lock(self.name)
            check(str(rw.read_lock().locked() or rw.write_lock().locked()).lower())
            return
        if verb == "force_unlock":
            check(str(self.clients[1].force_unlock(self.name)).lower())
            return

        client, owner = self.owner(step.owner)
        lock = self.view(client, step.target, owner)
        if verb in ("acquire", "acquire&"):
            wait, lease = arg_seconds("wait"), arg_seconds("lease")

            def call() -> bool:
                if wait == 0:
                    return lock.acquire(blocking=False, lease=lease)
                return lock.acquire(timeout=wait, lease=lease)

            if verb == "acquire":
                self.check_acquired(acquire_verdict(call), lock, expect)
            else:
                if step.owner in self.background:
                    raise StepFailed(f"{step.owner} already has a background acquire")
                self.background[step.owner] = Background(call, lock, wait)
        elif verb == "await":
            task = self.background.pop(step.owner, None)
            if task is None:
                raise StepFailed(f"no acquire& of {step.owner} to await")
            task.thread.join((task.wait or 0.0) + _AWAIT_GRACE)
            if task.thread.is_alive():
                raise StepFailed(f"expected {wanted}, got a background acquire still waiting")
            assert task.result is not None
            self.check_acquired(task.result, task.lock, expect)
        elif verb == "release":
            got, remaining = verdict(lock.release)
            if got == "ok" and len(expect) > 1:
                got = f"ok remaining={remaining}"
            check(got)
        elif verb == "extend":
            lease = arg_seconds("lease")
            if lease is None:
                raise StepFailed("extend needs lease=MS")
            check(verdict(lambda: lock.extend(lease=lease))[0])
        elif verb == "held_by":
            check(str(lock.owned()).lower())
        elif verb == "hold_count":
            check(str(lock.hold_count))
        else:
            raise StepFailed(f"unknown verb {verb!r}")

    def close(self) -> None:
        for client in self.clients:
            client.close()  # also ends background acquires still waiting
        for task in self.background.values():
            task.thread.join(5)


@pytest.mark.parametrize(
    ("index", "scenario"), list(enumerate(ALL_SCENARIOS)), ids=[s.title for s in ALL_SCENARIOS]
)
def test_scenario(redis_server: Any, index: int, scenario: Scenario) -> None:
    clients = (
        rl.Client(redis_server.url, prefix="conformance"),
        rl.Client(redis_server.url, prefix="conformance"),
    )
    run = Run(clients, f"conformance:{index}:{uuid.uuid4().hex}")
    try:
        for step in scenario.steps:
            why = None
            try:
                run.step(step)
            except StepFailed as e:
                why = str(e)
            except Exception as e:  # an error outside the verdicts (connection, bad input)
                why = f"{type(e).__name__}: {e}"
            if why is not None:
                pytest.fail(
                    f"scenario {scenario.title!r} (line {scenario.line}), "
                    f"line {step.line} `{step.text}`: {why}",
                    pytrace=False,
                )
    finally:
        run.close()
