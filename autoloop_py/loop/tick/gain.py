"""The gain policy's order of due programs: a bandit over their recent yield per unit of cost (UCB1).

A program's value is the metric improvement of its recent window per runner-minute, a model dollar counted
as DOLLAR_MINUTES minutes; values are scaled by the best one among the due programs so a unit of the
metric does not matter. The bonus sqrt(2 ln N / n) favours programs tried less (N: all iterations of the
due programs, n: this one's); a program never tried comes first. Ties are broken by the seeded rng.
"""

from __future__ import annotations

import math
import random
from typing import Mapping, Sequence

from autoloop_py.state.schedule_table import Arm

# A GitHub-hosted Linux runner costs $0.008 a minute: a model dollar buys as much as 125 runner minutes.
DOLLAR_MINUTES = 125.0
# The least cost an iteration counts for, so an iteration that cost nothing recorded does not divide by 0.
LEAST_MINUTES = 0.1


def value(arm: Arm) -> float:
    """Returns the arm's improvement per runner-minute (a dollar counted as DOLLAR_MINUTES)."""
    cost = arm.minutes + DOLLAR_MINUTES * arm.dollars
    return arm.gain / max(cost, LEAST_MINUTES * max(arm.iterations, 1.0))


def order_by_gain(
    due: Sequence[str], arms: Mapping[str, Arm], rng: random.Random, exploration: float = 1.0
) -> list[str]:
    """Returns the due programs, the most promising first (never-tried ones before all others)."""
    values = {name: value(arms[name]) for name in due if name in arms and arms[name].iterations > 0}
    best = max(values.values(), default=0.0) or 1.0
    total = sum(arms[name].iterations for name in values)
    scores: dict[str, float] = {}
    for name in due:
        if name not in values:
            scores[name] = math.inf
            continue
        bonus = math.sqrt(2 * math.log(max(total, 1.0)) / arms[name].iterations) if total > 1 else 0.0
        scores[name] = values[name] / best + exploration * bonus
    ties = {name: rng.random() for name in due}
    return sorted(due, key=lambda name: (-scores[name], ties[name]))
