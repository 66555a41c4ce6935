"""Evaluator for sqrt_tradeoff: prints accuracy (correct digits, higher) and cost (steps, lower) as JSON."""

import importlib.util
import json
import math
import random
import sys
from pathlib import Path

INPUTS = [10 ** random.Random(1000 + i).uniform(-6, 6) for i in range(200)]
MAX_DIGITS = 16.0


def _load():
    path = Path(__file__).with_name("routine.py")
    spec = importlib.util.spec_from_file_location("routine", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digits(value: float, exact: float) -> float:
    error = abs(value - exact) / exact
    return MAX_DIGITS if error == 0 else max(0.0, min(MAX_DIGITS, -math.log10(error)))


def main() -> int:
    try:
        routine = _load()
        digits, steps = [], []
        for x in INPUTS:
            value, cost = routine.approx_sqrt(x)
            if not math.isfinite(value) or not isinstance(cost, int) or cost < 0:
                raise ValueError(f"approx_sqrt({x!r}) returned {value!r}, {cost!r}")
            digits.append(_digits(value, math.sqrt(x)))
            steps.append(cost)
    except Exception as err:  # report any failure of the candidate as an error
        print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
        return 1
    accuracy = round(sum(digits) / len(digits), 4)
    print(json.dumps({"combined_score": accuracy, "accuracy": accuracy, "cost": round(sum(steps) / len(steps), 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
