"""Validates the packing from `packing.py` and reports one JSON object.

The packing's functions run in a process of their own (autoloop_py.candidate): only the centres and
radii they return come back, and this file checks and sums them, so the candidate cannot set its own
metric. The report goes to the file $AUTOLOOP_RESULT names, or to stdout when run by hand. An invalid
packing is a rejected candidate scoring 0, with the violated constraint as `error` and `feedback`; a
candidate that crashes is an error (exit 1). With AUTOLOOP_STAGE=1 (the program's cheap first stage)
it only checks that the packing is valid. Do not modify: the loop compares candidates by this file's
report.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from autoloop_py.candidate import CandidateError, call

CIRCLES = 26
BEST_KNOWN = 2.635  # best known sum of radii for 26 circles
TOLERANCE = 1e-6
PACKING = Path(__file__).resolve().parent / "packing.py"
SECONDS = 20.0  # per call of the packing's functions


class InvalidPacking(Exception):
    """The packing breaks a rule; the message says which circle and how."""


def as_floats(values: Any, width: int, what: str) -> list[tuple[float, ...]]:
    """Returns values as tuples of `width` finite floats, or raises InvalidPacking."""
    rows = [tuple(float(v) for v in (row if width > 1 else (row,))) for row in values]
    if len(rows) != CIRCLES:
        raise InvalidPacking(f"expected {CIRCLES} {what}, got {len(rows)}")
    for i, row in enumerate(rows):
        if len(row) != width or not all(math.isfinite(v) for v in row):
            raise InvalidPacking(f"{what} {i} is not {width} finite number(s): {row}")
    return rows


def validate(centers: list[tuple[float, ...]], radii: list[float]) -> None:
    """Raises InvalidPacking unless every circle lies in the unit square and no two overlap."""
    for i, ((x, y), r) in enumerate(zip(centers, radii)):
        if r < 0:
            raise InvalidPacking(f"circle {i} has a negative radius {r}")
        if min(x - r, y - r) < -TOLERANCE or max(x + r, y + r) > 1 + TOLERANCE:
            raise InvalidPacking(f"circle {i} at ({x:.6f}, {y:.6f}) with radius {r:.6f} leaves the square")
    for i in range(CIRCLES):
        for j in range(i + 1, CIRCLES):
            gap = math.dist(centers[i], centers[j])
            if radii[i] + radii[j] > gap + TOLERANCE:
                raise InvalidPacking(f"circles {i} and {j} overlap by {radii[i] + radii[j] - gap:.3g}")


def valid_packing() -> tuple[list[tuple[float, ...]], list[float]]:
    """Returns the packing's centres and radii, each computed in the candidate's process; raises InvalidPacking."""
    centers = as_floats(call(PACKING, "construct_packing", timeout=SECONDS), 2, "centres")
    radii = [r for (r,) in as_floats(call(PACKING, "compute_max_radii", (centers,), timeout=SECONDS), 1, "radii")]
    validate(centers, radii)
    return centers, radii


def measure() -> dict[str, Any]:
    """Returns the metrics and feedback of the packing; raises InvalidPacking for an invalid one."""
    if os.environ.get("AUTOLOOP_STAGE") == "1":  # the validity stage: pass/fail, no score
        valid_packing()
        return {"validity": 1.0, "feedback": "valid packing"}
    centers, radii = valid_packing()
    total = sum(radii)
    smallest = min(range(CIRCLES), key=lambda i: radii[i])
    return {
        "combined_score": round(total / BEST_KNOWN, 6), "sum_radii": round(total, 6), "validity": 1.0,
        "feedback": (f"valid packing: sum of radii {total:.6f} ({total / BEST_KNOWN:.2%} of the best known "
                     f"{BEST_KNOWN}); the smallest circle is {smallest} (radius {radii[smallest]:.4f})"),
    }


def report(metrics: dict[str, Any]) -> None:
    """Writes the report where the runner reads it (printed when run by hand)."""
    path = os.environ.get("AUTOLOOP_RESULT")
    if not path:
        print(json.dumps(metrics))
        return
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(metrics, handle)


def main() -> int:
    """Reports the metrics, a rejection (invalid packing) or an error (a crash); returns the exit status."""
    try:
        metrics = measure()
    except InvalidPacking as err:  # a poor candidate, as upstream scores it: 0, with the constraint it broke
        metrics = {"combined_score": 0.0, "validity": 0.0, "error": str(err),
                   "feedback": f"invalid packing, rejected: {err}; every circle must lie in the unit square, "
                               "no two may overlap, no radius may be negative"}
    except (CandidateError, ValueError, TypeError) as err:  # a crashing candidate is an error, never a score of 0
        report({"error": f"{type(err).__name__}: {err}"})
        return 1
    report(metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
