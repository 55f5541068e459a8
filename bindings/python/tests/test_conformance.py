"""The shared conformance scenarios (``tests/conformance/scenarios.txt``), run against a real
redis-server through the Python API. Every language runs the same file; the format and the
verbs are described in ``tests/conformance/README.md`` (parsed by ``conformance_format``), and
the Rust runner (``core/tests/conformance.rs``) is the reference for their meaning.

Foreground steps use the sync API; background acquires (``acquire&``) run as asyncio tasks on an
event loop of the scenario's own, so that ``cancel`` is Python's own cancellation (a task
cancel).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redlock_sdk as rl
from conformance_format import (
    ALERT_SETTLE,
    ALERT_WAIT,
    SCENARIOS,
    SPEND_FENCES,
    Scenario,
    Step,
    parse,
    seconds,
)

# How long `await` waits for a background acquire beyond its own wait before calling it hung.
_AWAIT_GRACE = 30.0

ALL_SCENARIOS = parse(SCENARIOS.read_text(encoding="utf-8"))


def test_the_scenario_file_was_read() -> None:
    assert len(ALL_SCENARIOS) >= 10, f"only {len(ALL_SCENARIOS)} scenarios in {SCENARIOS}"


class StepFailed(AssertionError):
    pass


def error_verdict(e: BaseException) -> str:
    """The contract's name for an error (an error kind in snake case), or a failure."""
    if isinstance(e, rl.InvalidArgumentError):
        return "invalid_argument"
    if isinstance(e, rl.UpgradeNotAllowedError):
        return "upgrade_not_allowed"
    if isinstance(e, rl.LockLostError):  # before NotHeldError: it is a subclass
        return "lock_lost"
    if isinstance(e, rl.NotHeldError):
        return "not_held"
    if isinstance(e, rl.ClientClosedError):
        return "closed"
    if isinstance(e, rl.RedisError):
        return "redis"
    return f"unexpected error {type(e).__name__}: {e}"


def verdict(call: Callable[[], Any]) -> tuple[str, Any]:
    """The contract's name for a call's outcome (``ok`` or an error kind), and its value."""
    try:
        value = call()
    except Exception as e:
        return error_verdict(e), None
    return "ok", value


def acquire_verdict(call: Callable[[], bool]) -> str:
    got, value = verdict(call)
    if got == "ok" and value is False:
        return "timeout"
    return got


class Background:
    """An ``acquire&``: an asyncio task on the run's event loop; ``await`` and ``cancel`` wait
    for its outcome (``outcome`` is set however the task ends)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, lock: rl.Lock, wait: float | None, lease: Any
    ) -> None:
        self.lock = lock
        self.wait = wait
        self.outcome: concurrent.futures.Future[str] = concurrent.futures.Future()
        self.task = asyncio.run_coroutine_threadsafe(self._acquire(lease), loop)

    async def _acquire(self, lease: float | None) -> None:
        try:
            if self.wait == 0:
                got = await self.lock.acquire_async(blocking=False, lease=lease)
            else:
                got = await self.lock.acquire_async(timeout=self.wait, lease=lease)
            self.outcome.set_result("ok" if got else "timeout")
        except asyncio.CancelledError:
            self.outcome.set_result("cancelled")
        except Exception as e:
            self.outcome.set_result(error_verdict(e))

    def result(self) -> str | None:
        """The outcome, or ``None`` if the task is still running after its wait and a grace."""
        try:
            return self.outcome.result((self.wait or 0.0) + _AWAIT_GRACE)
        except concurrent.futures.TimeoutError:
            return None


class Run:
    def __init__(self, scenario: Scenario, server: Any, name: str) -> None:
        settings = scenario.client_settings()
        self.server = server  # the conftest RedisServer: `spend_fences` talks to it directly
        self.prefix: str = settings["prefix"]
        self.alerts: tuple[list[str], list[str]] = ([], [])
        self.clients = tuple(
            rl.Client(server.url, on_contention=self._recorder(i), **settings) for i in range(2)
        )
        self.name = name
        self.owners: dict[str, str] = {}
        self.fences: dict[str, int] = {}
        self.background: dict[str, Background] = {}
        self.loop = asyncio.new_event_loop()
        self.loop_thread = threading.Thread(
            target=self.loop.run_forever, name="conformance acquire&", daemon=True
        )
        self.loop_thread.start()

    def _recorder(self, client: int) -> Callable[[rl.ContentionAlert], None]:
        # list.append is atomic: no lock needed between the callback thread and the steps.
        return lambda alert: self.alerts[client].append(alert.owner)

    def owner(self, spec: str) -> tuple[int, str]:
        letter, at, client = spec.partition("@")
        if at and client == "2":
            index = 1  # the same token on client 2 (a hand-off)
        else:
            letter, index = spec, 0
        token = self.owners.get(letter)
        if token is None:
            token = self.owners[letter] = rl.new_owner_token()
        return index, token

    def view(
        self, client: rl.Client, target: str | None, owner: str | None, label: str | None = None
    ) -> rl.Lock:
        if target == "lock":
            return client.lock(self.name, owner=owner, label=label)
        if target == "read":
            return client.rw_lock(self.name, owner=owner, label=label).read_lock()
        if target == "write":
            return client.rw_lock(self.name, owner=owner, label=label).write_lock()
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

    @staticmethod
    def check_inspect(
        call: Callable[[], dict[str, Any]], holder: tuple[str, str] | None, expect: list[str]
    ) -> None:
        """Checks ``ok [mode=M] [holders=N] [count=N] [label=T]``; ``holder`` is OWNER's token
        and TARGET's mode (``None`` for ``-``)."""
        got, info = verdict(call)
        if got != "ok" or expect[:1] != ["ok"]:
            if got != " ".join(expect):
                raise StepFailed(f"expected {' '.join(expect)}, got {got}")
            return
        holds = [h for h in info["holders"] if (h["owner"], h["mode"]) == holder]
        hold = holds[0] if holds else None
        for check in expect[1:]:
            key, _, want = check.partition("=")
            if key == "mode":
                value = info["mode"] or "none"
            elif key == "holders":
                value = info["holder_count"]
            elif key in ("count", "label") and holder is None:
                raise StepFailed(f"{check} needs an owner and a target")
            elif key == "count":
                value = 0 if hold is None else hold["hold_count"]
            elif key == "label":
                if hold is None:
                    raise StepFailed(f"expected {check}, got no such hold in {info}")
                value = hold["thread"]
            else:
                raise StepFailed(f"unknown inspect check {check!r}")
            if str(value) != want:
                raise StepFailed(f"expected {check}, got {key}={value} in {info}")

    def check_alerts(self, client: int, token: str, expect: list[str]) -> None:
        """Waits for the client's alerts naming ``token`` to reach ``N`` (and stay exactly N)
        or ``>=N`` (README: alerts are delivered asynchronously)."""
        word = expect[0] if expect else ""
        at_least = word.startswith(">=")
        want = int(word[2:] if at_least else word)

        def count() -> int:
            return sum(1 for t in list(self.alerts[client]) if t == token)

        deadline = time.monotonic() + ALERT_WAIT
        while count() < want and time.monotonic() < deadline:
            time.sleep(0.02)
        if not at_least:
            time.sleep(ALERT_SETTLE)
        got = count()
        if not (got >= want if at_least else got == want):
            raise StepFailed(f"expected {word} alerts, got {got}")

    def admin_step(self, step: Step, check: Callable[[str], None]) -> bool:
        """The steps of OWNER ``-``; false for any other verb."""
        verb = step.verb
        if verb == "clients":
            raise StepFailed("clients must be a scenario's first step")
        if verb == "close":
            self.clients[0].close()
        elif verb == "sleep":
            time.sleep(seconds(step.args["ms"]))
        elif verb == "locked":
            rw = self.clients[1].rw_lock(self.name)
            check(str(rw.read_lock().locked() or rw.write_lock().locked()).lower())
        elif verb == "force_unlock":
            check(str(self.clients[1].force_unlock(self.name)).lower())
        elif verb == "inspect":
            self.check_inspect(lambda: self.clients[1].inspect(self.name), None, step.expect)
        elif verb == "spend_fences":
            script = SPEND_FENCES.read_text(encoding="utf-8")
            reply = self.server.command("EVAL", script, "0", self.prefix)
            # A RESP integer (":N\r\n"): how many fencing counters the script set.
            counters = int(reply[1:]) if reply.startswith(":") else 0
            check("ok" if counters >= 1 else f"no fencing counter was set: {reply.strip()}")
        else:
            return False
        return True

    def step(self, step: Step) -> None:
        expect = step.expect
        wanted = " ".join(expect)

        def check(got: str) -> None:
            if got != wanted:
                raise StepFailed(f"expected {wanted}, got {got}")

        def arg_seconds(key: str) -> float | None:
            value = step.args.get(key)
            return None if value is None or value == "watchdog" else seconds(value)

        if step.owner == "-" and self.admin_step(step, check):
            return
        verb = step.verb
        index, owner = self.owner(step.owner)
        if verb == "alerts":
            self.check_alerts(index, owner, expect)
            return
        if verb in ("await", "cancel"):
            task = self.background.pop(step.owner, None)
            if task is None:
                raise StepFailed(f"no acquire& of {step.owner} to {verb}")
            if verb == "cancel":
                task.task.cancel()  # cancels the asyncio task (thread-safe)
            result = task.result()
            if result is None:
                raise StepFailed(f"expected {wanted}, got a background acquire still waiting")
            if verb == "await":
                self.check_acquired(result, task.lock, expect)
            else:
                check("ok" if result == "cancelled" else f"an acquire that had ended: {result}")
            return
        try:
            lock = self.view(self.clients[index], step.target, owner, step.args.get("label"))
        except rl.ClientClosedError as e:
            check(error_verdict(e))  # a closed client refuses the handle
            return
        if verb in ("acquire", "acquire&"):
            wait, lease = arg_seconds("wait"), arg_seconds("lease")
            if verb == "acquire&":
                if step.owner in self.background:
                    raise StepFailed(f"{step.owner} already has a background acquire")
                self.background[step.owner] = Background(self.loop, lock, wait, lease)
                return

            def call() -> bool:
                if wait == 0:
                    return lock.acquire(blocking=False, lease=lease)
                return lock.acquire(timeout=wait, lease=lease)

            self.check_acquired(acquire_verdict(call), lock, expect)
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
            got, held = verdict(lock.owned)
            check(str(held).lower() if got == "ok" else got)
        elif verb == "hold_count":
            got, count = verdict(lambda: lock.hold_count)
            check(str(count) if got == "ok" else got)
        elif verb == "inspect":
            self.check_inspect(lock.inspect, (owner, lock.mode), expect)
        else:
            raise StepFailed(f"unknown verb {verb!r}")

    def close(self) -> None:
        for client in self.clients:
            client.close()  # also ends background acquires still waiting
        for task in self.background.values():
            with contextlib.suppress(concurrent.futures.TimeoutError):
                task.outcome.exception(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.loop_thread.join(5)
        self.loop.close()


@pytest.mark.parametrize(
    ("index", "scenario"), list(enumerate(ALL_SCENARIOS)), ids=[s.title for s in ALL_SCENARIOS]
)
def test_scenario(redis_server: Any, index: int, scenario: Scenario) -> None:
    unsupported = scenario.unsupported()
    if unsupported is not None:
        pytest.skip(f"not expressible in Python: {unsupported}")
    run = Run(scenario, redis_server, f"conformance:{index}:{uuid.uuid4().hex}")
    try:
        for step in scenario.steps_to_run():
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
