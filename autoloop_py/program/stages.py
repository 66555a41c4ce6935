"""Evaluation stages: a cascade of evaluations from cheap to expensive, each gating the next (`evaluation-stages`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

STAGE_ENV = "AUTOLOOP_STAGE"
_KEYS = ("command", "threshold", "repeats", "name")


@dataclass(frozen=True)
class Stage:
    """One stage of a program's evaluation.

    Attributes:
      command: the shell command ('' runs the `## Evaluation` command, with AUTOLOOP_STAGE set to its number).
      threshold: the metric this stage must reach for the next one to run (None: the stage is pass/fail: it
        passes when it exits 0 and reports no `error`).
      repeats: runs of this stage (None: 1 for every stage but the last, which takes the program's `repeats`).
      name: a short label for the record ('' names it by its number).
    """

    command: str = ""
    threshold: float | None = None
    repeats: int | None = None
    name: str = ""


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
    return Stage(
        command=str(item.get("command") or "").strip(),
        threshold=_threshold(item.get("threshold"), number),
        repeats=_repeats(item.get("repeats"), number),
        name=str(item.get("name") or "").strip(),
    )


def _threshold(value: Any, number: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"stage {number}: threshold must be a finite number, got {value!r}")
    return float(value)


def _repeats(value: Any, number: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"stage {number}: repeats must be a whole number >= 1, got {value!r}")
    return value


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
