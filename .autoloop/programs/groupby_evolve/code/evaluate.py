"""Scores `groupby.py`'s `group_sum` against pandas and prints one JSON object.

speedup = the geometric mean, over three datasets, of (pandas time / candidate time), each time the
best of several interleaved runs. Times are this process's CPU time (time.process_time): on a busy
machine the wall clock doubles whenever another job takes the core; the CPU time barely moves.
A candidate whose result differs from pandas in any way (keys, sums, dtype, order) scores nothing:
the evaluator prints {"error": ...} and exits 1. The data are seeded; only the timings vary.
Do not modify: the loop compares candidates by this file's output.
"""
from __future__ import annotations

import ast
import ctypes
import ctypes.util
import gc
import importlib.util
import json
import math
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np
import pandas as pd

ROWS = 250_000
SEED = 20240611
MAX_ROUNDS = 30
MIN_ROUNDS = 5
ROUND_BUDGET = 0.3  # seconds per dataset after which no further round starts (past MIN_ROUNDS)
ALLOWED_IMPORTS = {
    "__future__", "numpy", "math", "itertools", "functools", "operator", "collections", "heapq", "bisect", "typing",
}  # fmt: skip

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt() parameter numbers

Arrays = tuple[np.ndarray, np.ndarray]
GroupSum = Callable[[np.ndarray, np.ndarray], Any]


def keep_freed_memory() -> None:
    """Makes glibc reuse freed memory rather than hand it back to the kernel and fault it in again.

    Page faults on fresh allocations were the largest timing noise: up to half of pandas' time on
    the narrow dataset, varying from run to run. Elsewhere than glibc this does nothing.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024)
        libc.mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024)
    except (OSError, AttributeError):
        pass


def datasets(rows: int = ROWS) -> dict[str, Arrays]:
    """Returns the timed inputs: a narrow key range, a medium range with many keys, sparse 62-bit keys."""
    rng = np.random.default_rng(SEED)
    sparse_pool = rng.integers(-(2**62), 2**62, 20_000)
    keys = {
        "narrow": rng.integers(-500, 500, rows),
        "medium": rng.integers(0, rows // 2, rows),
        "sparse": rng.choice(sparse_pool, rows),
    }
    return {name: (k.astype(np.int64), rng.integers(-1000, 1001, rows).astype(np.int64)) for name, k in keys.items()}


def edge_cases() -> dict[str, Arrays]:
    """Returns small inputs that catch wrong answers cheaply: empty, one row, extremes, huge values."""
    big = 2**60 + 1
    extremes = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max])
    cases = {
        "empty": ([], []),
        "one row": ([7], [-3]),
        "one key": ([4] * 50, list(range(50))),
        "negative keys": ([-5, 3, -5, -1, 3], [1, 2, 3, 4, 5]),
        "int64 extremes": (extremes, [1, 2, 3, 4]),
        "values beyond 2**53": ([0, 0, 1], [big, big, 3]),
    }
    return {name: (np.asarray(k, dtype=np.int64), np.asarray(v, dtype=np.int64)) for name, (k, v) in cases.items()}


def reference(keys: np.ndarray, values: np.ndarray) -> Arrays:
    """Returns pandas' answer: the sorted distinct keys and the sum per key."""
    result = pd.Series(values, copy=False).groupby(keys).sum()
    return result.index.to_numpy(), result.to_numpy()


def load_candidate() -> GroupSum:
    """Returns group_sum from groupby.py, refusing imports other than numpy and pure standard modules."""
    sys.dont_write_bytecode = True
    path = Path(__file__).resolve().parent / "groupby.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        for name in names:
            if name.split(".")[0] not in ALLOWED_IMPORTS:
                raise ImportError(f"groupby.py imports {name}; only numpy and pure standard modules are allowed")
    spec = importlib.util.spec_from_file_location("groupby", path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.group_sum


def check(case: str, got: Any, want: Arrays) -> None:
    """Raises ValueError unless got is exactly want: two 1-D int64 arrays with equal keys and sums."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise ValueError(f"{case}: group_sum must return (keys, sums), got {type(got).__name__}")
    for label, array, expected in zip(("keys", "sums"), got, want):
        if not isinstance(array, np.ndarray) or array.dtype != np.int64 or array.ndim != 1:
            kind = getattr(array, "dtype", type(array).__name__)
            raise ValueError(f"{case}: {label} must be a 1-D int64 numpy array, got {kind}")
        if not np.array_equal(array, expected):
            raise ValueError(f"{case}: {label} differ from pandas ({_first_difference(array, expected)})")


def _first_difference(got: np.ndarray, want: np.ndarray) -> str:
    if got.shape != want.shape:
        return f"{got.size} entries instead of {want.size}"
    at = int(np.flatnonzero(got != want)[0])
    return f"at position {at}: {got[at]} instead of {want[at]}"


def _timed(function: GroupSum, keys: np.ndarray, values: np.ndarray) -> tuple[float, Any]:
    """Returns (CPU seconds, result) of one call on fresh copies, so nothing can be cached between calls."""
    keys, values = keys.copy(), values.copy()
    gc.disable()
    try:
        start = time.process_time()
        result = function(keys, values)
        return time.process_time() - start, result
    finally:
        gc.enable()


def speedup(candidate: GroupSum, name: str, keys: np.ndarray, values: np.ndarray) -> float:
    """Returns best pandas time / best candidate time over interleaved rounds, checking every result."""
    want = reference(keys, values)
    check(name, candidate(keys.copy(), values.copy()), want)  # warm-up, untimed
    best_pandas = best_candidate = math.inf
    started = time.perf_counter()
    for round_ in range(MAX_ROUNDS):
        if round_ >= MIN_ROUNDS and time.perf_counter() - started > ROUND_BUDGET:
            break
        pandas_time, _ = _timed(reference, keys, values)
        candidate_time, got = _timed(candidate, keys, values)
        check(name, got, want)
        best_pandas, best_candidate = min(best_pandas, pandas_time), min(best_candidate, candidate_time)
    return best_pandas / max(best_candidate, 1e-9)


def main() -> int:
    """Prints the metrics (or an error) as the last line of stdout; returns the exit status."""
    keep_freed_memory()
    try:
        candidate = load_candidate()
        for name, (keys, values) in edge_cases().items():
            check(name, candidate(keys.copy(), values.copy()), reference(keys, values))
        ratios = {name: speedup(candidate, name, k, v) for name, (k, v) in datasets().items()}
    except Exception as err:  # any failure of the candidate is an error, never a low score
        print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
        return 1
    geometric = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
    print(json.dumps({"speedup": round(geometric, 4), **{k: round(r, 4) for k, r in ratios.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
