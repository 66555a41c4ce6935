"""Search algorithm for the function-minimization example; only the EVOLVE-BLOCK may change.

`objective(x, y)` is the function to minimise. The evaluator calls `trial_point` in a process of
its own and scores the point it returns with its own copy of f, so nothing here can set the score.
"""

from __future__ import annotations

import math
import random


def objective(x: float, y: float) -> float:
    """Returns f(x, y) = sin(x)·cos(y) + sin(x·y) + (x² + y²)/20."""
    return math.sin(x) * math.cos(y) + math.sin(x * y) + (x * x + y * y) / 20


# EVOLVE-BLOCK-START
iterations = 60
restarts = 1
step_size = 3.0
cooling = 0.5
initial_temperature = 2.0


def search_algorithm(
    rng: random.Random, bounds: tuple[tuple[float, float], tuple[float, float]]
) -> tuple[float, float, float]:
    """Returns (x, y, value): the best point found by simulated annealing with random restarts."""
    (x_lo, x_hi), (y_lo, y_hi) = bounds
    best = (x_lo, y_lo, math.inf)
    for _ in range(restarts):
        x, y = rng.uniform(x_lo, x_hi), rng.uniform(y_lo, y_hi)
        value = objective(x, y)
        temperature = initial_temperature
        for _ in range(iterations):
            nx = min(max(x + rng.uniform(-step_size, step_size), x_lo), x_hi)
            ny = min(max(y + rng.uniform(-step_size, step_size), y_lo), y_hi)
            new_value = objective(nx, ny)
            # Metropolis rule written as a log-threshold: no division, so temperature may reach 0.
            if new_value - value < -temperature * math.log1p(-rng.random()):
                x, y, value = nx, ny, new_value
            if value < best[2]:
                best = (x, y, value)
            temperature *= cooling
    return best


# EVOLVE-BLOCK-END


def trial_point(seed: int, bounds: list[list[float]]) -> tuple[float, float]:
    """Returns the point search_algorithm finds with random.Random(seed): what `evaluate.py` calls."""
    x_range, y_range = bounds
    x, y, _ = search_algorithm(random.Random(seed), (tuple(x_range), tuple(y_range)))
    return x, y
