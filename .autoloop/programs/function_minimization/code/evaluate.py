"""Scores `search.py` on f(x, y) over ten seeded trials and reports one JSON object.

Deterministic: trial t uses random.Random(1000 + t), so the same search always scores the same.
The search runs in a process of its own (autoloop_py.candidate): only the points it returns come
back, and this file computes f and the score itself, so the candidate cannot set its own metric.
The report goes to the file $AUTOLOOP_RESULT names (stdout when run by hand), with the best point
found as `feedback`. Do not modify: the loop compares candidates by this file's report.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from autoloop_py.candidate import CandidateError, call_each

GLOBAL_MIN = (-1.704083, 0.677508)
GLOBAL_MIN_VALUE = -1.518686
BOUNDS = ((-5.0, 5.0), (-5.0, 5.0))
TRIALS = 10
SEARCH_SECONDS = 30.0  # for all trials, so tuning cannot just raise iterations forever
RELIABLE_DISTANCE = 0.5
SEARCH = Path(__file__).resolve().parent / "search.py"


def objective(x: float, y: float) -> float:
    """Returns f(x, y) = sin(x)·cos(y) + sin(x·y) + (x² + y²)/20: the scorer's own copy, never the candidate's."""
    return math.sin(x) * math.cos(y) + math.sin(x * y) + (x * x + y * y) / 20


def trial_points() -> list[tuple[float, float]]:
    """Returns the point each seeded trial's search returns, run in the candidate's own process."""
    points = call_each(SEARCH, "trial_point", [(1000 + trial, BOUNDS) for trial in range(TRIALS)],
                       timeout=SEARCH_SECONDS)  # fmt: skip
    return [checked(trial, point) for trial, point in enumerate(points)]


def checked(trial: int, point: Any) -> tuple[float, float]:
    """Returns the point as two finite floats within BOUNDS; raises ValueError otherwise."""
    x, y = (float(v) for v in point)
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"trial {trial}: the search returned a non-finite point ({x}, {y})")
    if not all(lo - 1e-9 <= v <= hi + 1e-9 for v, (lo, hi) in zip((x, y), BOUNDS)):
        raise ValueError(f"trial {trial}: the point ({x:.4g}, {y:.4g}) lies outside the bounds {BOUNDS}")
    return x, y


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
    """Writes the report where the runner reads it (printed when run by hand)."""
    path = os.environ.get("AUTOLOOP_RESULT")
    if not path:
        print(json.dumps(metrics))
        return
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(metrics, handle)


def main() -> int:
    """Reports the metrics and the best point (or an error); returns the exit status."""
    try:
        results = [(point, objective(*point), math.dist(point, GLOBAL_MIN)) for point in trial_points()]
    except (CandidateError, ValueError, TypeError) as err:  # any failure of the candidate is an error, never 0
        report({"error": f"{type(err).__name__}: {err}"})
        return 1
    metrics = score([v for _, v, _ in results], [d for _, _, d in results])
    report({**metrics, "feedback": best_point(results)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
