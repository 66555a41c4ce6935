"""Validates the packing from `packing.py` and prints one JSON object.

Do not modify: the loop compares candidates by this file's output.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

CIRCLES = 26
BEST_KNOWN = 2.635  # best known sum of radii for 26 circles
TOLERANCE = 1e-6


class InvalidPacking(Exception):
    """The packing breaks a rule; the message says which circle and how."""


def load_packing() -> ModuleType:
    """Returns the packing module loaded from beside this file."""
    sys.dont_write_bytecode = True
    path = Path(__file__).resolve().parent / "packing.py"
    spec = importlib.util.spec_from_file_location("packing", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def measure(module: ModuleType) -> dict[str, Any]:
    """Returns the metrics of the module's packing, or raises on an invalid one."""
    centers = as_floats(module.construct_packing(), 2, "centres")
    radii = [r for (r,) in as_floats(module.compute_max_radii(centers), 1, "radii")]
    validate(centers, radii)
    total = sum(radii)
    return {"combined_score": round(total / BEST_KNOWN, 6), "sum_radii": round(total, 6), "validity": 1.0}


def main() -> int:
    """Prints the metrics (or an error) as the last line of stdout; returns the exit status."""
    try:
        metrics = measure(load_packing())
    except Exception as err:  # an invalid or crashing candidate is an error, never a score of 0
        print(json.dumps({"error": f"{type(err).__name__}: {err}", "validity": 0.0}))
        return 1
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
