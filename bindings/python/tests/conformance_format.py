"""The format of ``tests/conformance/scenarios.txt`` (described in ``tests/conformance/README.md``):
parsing, the ``clients`` directive, and the scenarios this binding cannot run. Used by
``test_conformance.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCENARIOS = Path(__file__).resolve().parents[3] / "tests" / "conformance" / "scenarios.txt"
# The script of the admin verb `spend_fences`, next to the scenarios (read when the verb runs).
SPEND_FENCES = SCENARIOS.with_name("spend_fences.lua")

# The clients' key prefix unless the `clients` directive gives one.
DEFAULT_PREFIX = "conformance"


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

    def client_settings(self) -> dict[str, Any]:
        """The ``Client`` keyword arguments of the scenario's ``clients`` directive (its first
        step): ``prefix`` (always, ``conformance`` by default), ``lease`` and the contention-alert
        thresholds. Either alert threshold given turns the one not given off."""
        settings: dict[str, Any] = {"prefix": DEFAULT_PREFIX}
        if not self.steps or self.steps[0].verb != "clients":
            return settings
        directive = self.steps[0]
        for key, value in directive.args.items():
            if key == "prefix":
                settings["prefix"] = value
            elif key == "lease":
                settings["lease"] = int(value) / 1000
            elif key == "alert_after":
                settings["contention_alert_after"] = int(value) / 1000
            elif key == "alert_attempts":
                settings["contention_alert_attempts"] = int(value)
            else:
                raise ValueError(f"{SCENARIOS}:{directive.line}: unknown client setting {key}")
        if "contention_alert_attempts" in settings:
            settings.setdefault("contention_alert_after", None)
        return settings

    def steps_to_run(self) -> list[Step]:
        """The steps after the ``clients`` directive (applied when the clients are made)."""
        if self.steps and self.steps[0].verb == "clients":
            return self.steps[1:]
        return self.steps

    def unsupported(self) -> str | None:
        """Why this binding cannot run the scenario at all (README: "What a language cannot
        express"), or ``None``. Python expresses every scenario at the moment."""
        return None


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


def seconds(ms: str) -> float:
    return int(ms) / 1000


# `alerts`: how long the count may take to reach N, and how much longer an exact count must hold.
ALERT_WAIT = 2.0
ALERT_SETTLE = 0.2
