"""The gain scheduler's state on the memory branch: `schedule.md`, one row per program of its recent yield.

Each row holds decayed sums over about the last WINDOW iterations: how many, the metric improvement, the
runner minutes and the model dollars they took. The record step updates a program's row after each
iteration; a hand edit of a row is read as written by the next plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping

from autoloop_py.errors import StateError
from autoloop_py.markdown import tables
from autoloop_py.render import render

SCHEDULE_PATH = "schedule.md"
WINDOW = 20
HEADER = ("Program", "Iterations", "Gain", "Minutes", "Dollars")


@dataclass(frozen=True)
class Arm:
    """One program's recent yield (decayed sums over about WINDOW iterations)."""

    program: str
    iterations: float = 0.0
    gain: float = 0.0
    minutes: float = 0.0
    dollars: float = 0.0


def observe(arm: Arm, gain: float, minutes: float, dollars: float, window: int = WINDOW) -> Arm:
    """Returns the arm after one more iteration: older sums decay by 1 - 1/window, so ~window iterations count."""
    keep = 1.0 - 1.0 / window
    return replace(arm, iterations=arm.iterations * keep + 1, gain=arm.gain * keep + max(0.0, gain),
                   minutes=arm.minutes * keep + max(0.0, minutes), dollars=arm.dollars * keep + max(0.0, dollars))


def parse_schedule_table(text: str, path: str = SCHEDULE_PATH) -> dict[str, Arm]:
    """Returns the rows of schedule.md by program; raises StateError naming path:line for an unreadable one."""
    found = [t for t in tables(text) if tuple(c.strip().lower() for c in t.header) == tuple(h.lower() for h in HEADER)]
    if not found:
        return {}
    arms: dict[str, Arm] = {}
    for row in found[0].rows:
        cells = [c.strip() for c in row.cells]
        try:
            numbers = [float(c) for c in cells[1:5]]
        except ValueError:
            numbers = []
        if len(cells) != len(HEADER) or len(numbers) != 4 or not all(math.isfinite(n) and n >= 0 for n in numbers):
            raise StateError(f"a row needs a program and four numbers of at least 0 ({', '.join(HEADER)}), got "
                             f"{' | '.join(cells)}; correct or delete the row", path, row.line + 1)
        arms[cells[0]] = Arm(cells[0], *numbers)
    return arms


def render_schedule_table(arms: Mapping[str, Arm], window: int = WINDOW) -> str:
    """Returns schedule.md with one row per program, by name."""
    return render("schedule.md.j2", arms=[arms[name] for name in sorted(arms)], window=window)


def improvement(before: float | None, after: float | None, direction: str) -> float:
    """Returns how far the best metric moved the right way (0 when it did not, or the first was unknown)."""
    if before is None or after is None:
        return 0.0
    moved = after - before if direction != "lower" else before - after
    return max(0.0, moved)


def observed_table(text: str | None, program: str, gain: float, minutes: float, dollars: float) -> str:
    """Returns schedule.md with the program's row updated by one iteration (a new table when text is None)."""
    arms = parse_schedule_table(text) if text else {}
    arms[program] = observe(arms.get(program, Arm(program)), gain, minutes, dollars)
    return render_schedule_table(arms)
