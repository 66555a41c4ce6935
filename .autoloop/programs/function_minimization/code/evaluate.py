"""Scores `search.py` on f(x, y) over ten seeded trials and reports one JSON object.

Deterministic: trial t uses random.Random(1000 + t), so the same search always scores the same.
The report goes to the file $AUTOLOOP_RESULT names (stdout when run by hand), with the best point found
as `feedback`. Do not modify: the loop compares candidates by this file's report.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

GLOBAL_MIN = (-1.704083, 0.677508)
GLOBAL_MIN_VALUE = -1.518686
BOUNDS = ((-5.0, 5.0), (-5.0, 5.0))
TRIALS = 10
BUDGET = 20_000  # objective calls per trial, so tuning cannot just raise iterations forever
RELIABLE_DISTANCE = 0.5


class BudgetExceeded(Exception):
    """The search called the objective more often than BUDGET in one trial."""


def load_search() -> ModuleType:
    """Returns the search module loaded from beside this file."""
    sys.dont_write_bytecode = True
    path = Path(__file__).resolve().parent / "search.py"
    spec = importlib.util.spec_from_file_location("search", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_trial(module: ModuleType, trial: int) -> tuple[float, float]:
    """Returns the (value, distance) of the point that one seeded search run returns."""
    _, value, distance = run_trial_point(module, trial)
    return value, distance


def run_trial_point(module: ModuleType, trial: int) -> tuple[tuple[float, float], float, float]:
    """Returns the point that one seeded search run returns, its value and its distance to the minimum."""
    function = module.objective
    calls = 0

    def counted(x: float, y: float) -> float:
        nonlocal calls
        calls += 1
        if calls > BUDGET:
            raise BudgetExceeded(f"the search used more than {BUDGET} objective calls in trial {trial}")
        return function(x, y)

    setattr(module, "objective", counted)
    try:
        x, y, _ = module.search_algorithm(random.Random(1000 + trial), BOUNDS)
    finally:
        setattr(module, "objective", function)
    x, y = float(x), float(y)
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"trial {trial}: the search returned a non-finite point ({x}, {y})")
    if not all(lo - 1e-9 <= v <= hi + 1e-9 for v, (lo, hi) in zip((x, y), BOUNDS)):
        raise ValueError(f"trial {trial}: the point ({x:.4g}, {y:.4g}) lies outside the bounds {BOUNDS}")
    # Score the point, not the value the search reports about it.
    return (x, y), function(x, y), math.dist((x, y), GLOBAL_MIN)


def score(values: list[float], distances: list[float]) -> dict[str, Any]:
    """Returns the metrics of a set of trials; combined_score lies in [0, 1.5]."""
    avg_value = sum(values) / len(values)
    avg_distance = sum(distances) / len(distances)
    value_score = 1.0 / (1.0 + abs(avg_value - GLOBAL_MIN_VALUE))
    distance_score = 1.0 / (1.0 + avg_distance)
    reliability = sum(d < RELIABLE_DISTANCE for d in distances) / len(distances)
    multiplier = 0.7 + 0.8 * math.exp(-avg_distance)
    combined = (0.5 * value_score + 0.3 * distance_score + 0.2 * reliability) * multiplier
    return {
        "combined_score": round(combined, 6),
        "avg_value": round(avg_value, 6),
        "avg_distance": round(avg_distance, 6),
        "reliability": reliability,
        "value_score": round(value_score, 6),
        "distance_score": round(distance_score, 6),
        "multiplier": round(multiplier, 6),
    }


def best_point(results: list[tuple[tuple[float, float], float, float]]) -> str:
    """Returns the feedback line: the best point the trials found and how many came near the minimum."""
    (x, y), value, distance = min(results, key=lambda result: result[1])
    near = sum(d < RELIABLE_DISTANCE for _, _, d in results)
    return (f"best point over {len(results)} trials: ({x:.6f}, {y:.6f}) with f = {value:.6f}, {distance:.4f} from the "
            f"global minimum {GLOBAL_MIN} (f = {GLOBAL_MIN_VALUE}); {near} of {len(results)} trials ended within "
            f"{RELIABLE_DISTANCE} of it")


def report(metrics: dict[str, Any]) -> None:
    """Writes the report where the runner reads it and ends the process (no atexit handler of the candidate runs)."""
    path = os.environ.get("AUTOLOOP_RESULT")
    if not path:
        print(json.dumps(metrics))
        return
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(metrics, handle)
    sys.stdout.flush()
    os._exit(1 if "combined_score" not in metrics else 0)


def main() -> int:
    """Reports the metrics and the best point (or an error); returns the exit status."""
    try:
        module = load_search()
        results = [run_trial_point(module, trial) for trial in range(TRIALS)]
    except Exception as err:  # any failure of the candidate is an error, never a score of 0
        report({"error": f"{type(err).__name__}: {err}"})
        return 1
    metrics = score([v for _, v, _ in results], [d for _, _, d in results])
    report({**metrics, "feedback": best_point(results)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
