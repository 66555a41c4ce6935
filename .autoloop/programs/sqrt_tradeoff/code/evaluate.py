"""Evaluator for sqrt_tradeoff: prints accuracy (correct digits, higher) and cost (steps, lower) as JSON.

`approx_sqrt` runs in a process of its own (autoloop_py.candidate): only its values come back, and this
file computes the digits and prints the report, so nothing the candidate prints or patches counts.
"""

import json
import math
import random
import sys
from pathlib import Path

from autoloop_py.candidate import CandidateError, call_each

INPUTS = [10 ** random.Random(1000 + i).uniform(-6, 6) for i in range(200)]
MAX_DIGITS = 16.0
ROUTINE = Path(__file__).with_name("routine.py")


def _digits(value: float, exact: float) -> float:
    error = abs(value - exact) / exact
    return MAX_DIGITS if error == 0 else max(0.0, min(MAX_DIGITS, -math.log10(error)))


def main() -> int:
    try:
        digits, steps = [], []
        for x, (value, cost) in zip(INPUTS, call_each(ROUTINE, "approx_sqrt", [(x,) for x in INPUTS], timeout=30)):
            if not math.isfinite(value) or not isinstance(cost, int) or cost < 0:
                raise ValueError(f"approx_sqrt({x!r}) returned {value!r}, {cost!r}")
            digits.append(_digits(value, math.sqrt(x)))
            steps.append(cost)
    except (CandidateError, ValueError, TypeError) as err:  # report any failure of the candidate as an error
        print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
        return 1
    accuracy = round(sum(digits) / len(digits), 4)
    print(json.dumps({"combined_score": accuracy, "accuracy": accuracy, "cost": round(sum(steps) / len(steps), 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
