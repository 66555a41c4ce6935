"""The held-out evaluation: a command the model never sees, run only for a candidate about to become the best.

`evaluation-holdout:` names it (a command, or a mapping with `command` and the `metric` it reports, by default
the program's metric); `holdout-must-not-drop:` (true, or a tolerance) refuses a candidate whose held-out value
is worse than the incumbent's by more than the tolerance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

_KEYS = ("command", "metric")


@dataclass(frozen=True)
class Holdout:
    """A program's held-out evaluation.

    Attributes:
      command: the shell command, run at the top of the candidate's tree as the `## Evaluation` command is.
      metric: the key of its report to read ('' : the program's metric).
    """

    command: str
    metric: str = ""


def parse_holdout(value: Any) -> Holdout:
    """Returns the held-out evaluation an `evaluation-holdout` value names; raises ValueError."""
    if isinstance(value, str) and value.strip():
        return Holdout(value.strip())
    if not isinstance(value, dict):
        raise ValueError(f"must be a command, or a mapping of {', '.join(_KEYS)}, got {value!r}")
    unknown = sorted(str(key) for key in value if key not in _KEYS)
    if unknown:
        raise ValueError(f"has unknown key(s) {', '.join(unknown)}; use {', '.join(_KEYS)}")
    command = str(value.get("command") or "").strip()
    if not command:
        raise ValueError("needs a `command`, e.g. `command: python3 holdout.py`")
    return Holdout(command, str(value.get("metric") or "").strip())


def parse_tolerance(value: Any) -> float | None:
    """Returns a `holdout-must-not-drop` value as a tolerance (true: 0; false: None, no check); raises ValueError."""
    if isinstance(value, bool):
        return 0.0 if value else None
    if isinstance(value, (int, float)) and math.isfinite(value) and value >= 0:
        return float(value)
    raise ValueError(f"must be true, false or a tolerance >= 0 (e.g. 0.01), got {value!r}")


def drops(candidate: float, incumbent: float, direction: str, tolerance: float) -> bool:
    """Returns whether the candidate's held-out value is worse than the incumbent's by more than the tolerance."""
    loss = incumbent - candidate if direction != "lower" else candidate - incumbent
    return loss > tolerance
