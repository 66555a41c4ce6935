"""Evaluation stages: a cascade of evaluations from cheap to expensive, each gating the next (`evaluation-stages`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

STAGE_ENV = "AUTOLOOP_STAGE"
# What a stage's non-zero exit status says: its evaluator broke (an error), or the candidate failed the check.
ERROR, REJECT = "error", "reject"


@dataclass(frozen=True)
class Stage:
    """One stage of a program's evaluation.

    Attributes:
      command: the shell command ('' runs the `## Evaluation` command, with AUTOLOOP_STAGE set to its number).
      threshold: the metric this stage must reach for the next one to run (None: the stage is pass/fail: it
        passes when it exits 0 and reports no `error`).
      repeats: runs of this stage (None: 1 for every stage but the last, which takes the program's `repeats`).
      name: a short label for the record ('' names it by its number).
      failing_exit: what the stage's non-zero exit status means: `error` (its evaluator broke, the default, as
        for the Evaluation) or `reject` (the stage is a check, such as a compiler or a test command, and the
        candidate failed it). A timeout, a kill or a broken confinement is an error either way.
    """

    command: str = ""
    threshold: float | None = None
    repeats: int | None = None
    name: str = ""
    failing_exit: str = ERROR


_KEYS = tuple(item.name.replace("_", "-") for item in fields(Stage))  # a stage mapping's keys

def parse_stages(value: Any) -> tuple[Stage, ...]:
    """Returns the stages of an `evaluation-stages` value: a list of mappings or commands; raises ValueError."""
    if not isinstance(value, list) or not value:
        raise ValueError("must be a list of stages, e.g. `- command: python3 quick.py` then `threshold: 0.5`")
    return tuple(_stage(item, number) for number, item in enumerate(value, start=1))


def _stage(item: Any, number: int) -> Stage:
    if isinstance(item, str):
        return Stage(command=item.strip())
    if item is None:
        return Stage()
    if not isinstance(item, dict):
        raise ValueError(f"stage {number} must be a command or a mapping of {', '.join(_KEYS)}, got {item!r}")
    unknown = sorted(str(key) for key in item if key not in _KEYS)
    if unknown:
        raise ValueError(f"stage {number} has unknown key(s) {', '.join(unknown)}; use {', '.join(_KEYS)}")
    threshold, repeats, failing_exit = item.get("threshold"), item.get("repeats"), item.get("failing-exit")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold)
    ):
        raise ValueError(f"stage {number}: threshold must be a finite number, got {threshold!r}")
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        raise ValueError(f"stage {number}: repeats must be a whole number >= 1, got {repeats!r}")
    if failing_exit is not None and failing_exit not in (ERROR, REJECT):
        raise ValueError(f"stage {number}: failing-exit must be `{ERROR}` or `{REJECT}`, got {failing_exit!r}")
    return Stage(
        command=str(item.get("command") or "").strip(),
        threshold=None if threshold is None else float(threshold),
        repeats=repeats,
        name=str(item.get("name") or "").strip(),
        failing_exit=str(failing_exit or ERROR),
    )


def label(stage: Stage, number: int, count: int) -> str:
    """Returns how a record names a stage: `stage 1 of 2` (and its name when it has one)."""
    return f"stage {number} of {count}" + (f" ({stage.name})" if stage.name else "")


def passes(metric: float | None, stage: Stage, direction: str) -> bool:
    """Returns whether a stage's metric lets the next stage run (a pass/fail stage passes with or without one)."""
    if stage.threshold is None:
        return True
    if metric is None:
        return False
    return metric >= stage.threshold if direction != "lower" else metric <= stage.threshold
