"""Scores `groupby.py`'s `group_sum` against pandas and prints one JSON object.

speedup = the geometric mean, over three kinds of dataset, of (pandas' time / the candidate's time), each the
median of ROUNDS timed calls after an untimed warm-up. The candidate runs in a process of its own
(autoloop_py.candidate.Session) and reports nothing but its answer: this file times each call's round trip with
its own clock, so the candidate cannot set its own time. Pandas runs the same way (harness.py moves the arrays
through .npy files for both), all of it before the candidate's process starts, so nothing of the candidate runs
while pandas is timed. Each round's data are drawn afresh from an unpredictable seed, so no answer can be
computed ahead or cached between calls. An answer that differs from pandas' in any way (keys, sums, dtype,
order) scores nothing: the evaluator prints {"error": ...} and exits 1.
Do not modify: the loop compares candidates by this file's output.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from autoloop_py.candidate import CandidateError, Session

ROWS = 250_000
ROUNDS = 5  # timed calls per dataset kind, after one untimed warm-up; the median counts
KINDS = ("narrow", "medium", "sparse")
CALL_SECONDS = 20.0  # for one call, warm-up included
CODE = Path(__file__).resolve().parent
ALLOWED_IMPORTS = {
    "__future__", "numpy", "math", "itertools", "functools", "operator", "collections", "heapq", "bisect", "typing",
}  # fmt: skip

Arrays = tuple[np.ndarray, np.ndarray]
Seeds = dict[str, list[int]]
Case = tuple[str, int, Arrays]  # (kind, round, inputs)
Judge = Callable[[str, int, Arrays, Arrays], None]  # (kind, round, inputs, answer)


def dataset(kind: str, seed: int, rows: int = ROWS) -> Arrays:
    """Returns one input of a kind: a narrow key range, a medium range with many keys, or sparse 62-bit keys."""
    rng = np.random.default_rng(seed)
    if kind == "narrow":
        keys = rng.integers(-500, 500, rows)
    elif kind == "medium":
        keys = rng.integers(0, rows // 2, rows)
    else:
        keys = rng.choice(rng.integers(-(2**62), 2**62, 20_000), rows)
    return keys.astype(np.int64), rng.integers(-1000, 1001, rows).astype(np.int64)


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
    """Returns pandas' answer, computed in this process (only to say where a wrong answer differs)."""
    import pandas as pd

    result = pd.Series(values, copy=False).groupby(keys).sum()
    return result.index.to_numpy(), result.to_numpy()


def check_imports() -> None:
    """Raises ImportError when groupby.py imports anything but numpy and pure standard modules."""
    for node in ast.walk(ast.parse((CODE / "groupby.py").read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        for name in names:
            if name.split(".")[0] not in ALLOWED_IMPORTS:
                raise ImportError(f"groupby.py imports {name}; only numpy and pure standard modules are allowed")


def check(case: str, got: Arrays, want: Arrays) -> None:
    """Raises ValueError unless got is exactly want: two 1-D int64 arrays with equal keys and sums."""
    for label, array, expected in zip(("keys", "sums"), got, want):
        if array.dtype != np.int64 or array.ndim != 1:
            raise ValueError(f"{case}: {label} must be a 1-D int64 numpy array, got {array.dtype} of {array.ndim} dims")
        if not np.array_equal(array, expected):
            raise ValueError(f"{case}: {label} differ from pandas ({_first_difference(array, expected)})")


def _first_difference(got: np.ndarray, want: np.ndarray) -> str:
    if got.shape != want.shape:
        return f"{got.size} entries instead of {want.size}"
    at = int(np.flatnonzero(got != want)[0])
    return f"at position {at}: {got[at]} instead of {want[at]}"


def digest(answer: Arrays) -> str:
    """Returns a fingerprint of an answer: its dtypes, shapes and bytes."""
    hashed = hashlib.sha256()
    for array in answer:
        hashed.update(f"{array.dtype}{array.shape}".encode())
        hashed.update(np.ascontiguousarray(array).tobytes())
    return hashed.hexdigest()


def round_trip(
    session: Session, which: str, folder: Path, keys: np.ndarray, values: np.ndarray
) -> tuple[float, Arrays]:
    """Returns (wall seconds from request to reply, the answer) of one call, on fresh files in folder."""
    for name in ("keys_out", "sums_out"):
        (folder / f"{name}.npy").unlink(missing_ok=True)
    np.save(folder / "keys.npy", keys)
    np.save(folder / "values.npy", values)
    started = time.perf_counter()
    session.call(which, str(folder))
    took = time.perf_counter() - started
    return took, (np.load(folder / "keys_out.npy"), np.load(folder / "sums_out.npy"))


def inputs(seeds: Seeds) -> Iterator[Case]:
    """Yields (kind, round, arrays): the edge cases (round 0), then each kind's warm-up (round 0) and timed rounds."""
    for name, arrays in edge_cases().items():
        yield name, 0, arrays
    for kind, kind_seeds in seeds.items():
        for number, seed in enumerate(kind_seeds):
            yield kind, number, dataset(kind, seed)


def timed(which: str, cases: list[Case], kinds: Sequence[str], judge: Judge) -> dict[str, list[float]]:
    """Returns the timed round trips of `which` ("pandas" or "groupby") per kind, judging every answer."""
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix=f"groupby-{which}-") as folder, \
            Session(CODE / "harness.py", "group_sum_files", timeout=CALL_SECONDS) as session:  # fmt: skip
        for kind, number, arrays in cases:
            took, answer = round_trip(session, which, Path(folder), *arrays)
            judge(kind, number, arrays, answer)
            if kind in times and number:  # the first call of a kind is its warm-up
                times[kind].append(took)
    return times


def speedups(seeds: Seeds) -> dict[str, float]:
    """Returns pandas' median time over the candidate's, per kind: pandas first, the candidate after."""
    wanted: dict[tuple[str, int], str] = {}

    def remember(kind: str, number: int, arrays: Arrays, answer: Arrays) -> None:
        wanted[kind, number] = digest(answer)

    def compare(kind: str, number: int, arrays: Arrays, answer: Arrays) -> None:
        if digest(answer) != wanted[kind, number]:  # pandas again, in this process, to say where they differ
            check(f"{kind} dataset" if kind in seeds else kind, answer, reference(*arrays))

    cases = list(inputs(seeds))  # drawn once, kept in this process only
    pandas = timed("pandas", cases, list(seeds), remember)
    candidate = timed("groupby", cases, list(seeds), compare)
    return {kind: statistics.median(pandas[kind]) / max(statistics.median(candidate[kind]), 1e-9) for kind in seeds}


def main() -> int:
    """Prints the metrics (or an error) as the last line of stdout; returns the exit status."""
    # Unpredictable seeds: the candidate cannot compute the answers ahead, nor know which data come next.
    seeds = {kind: [secrets.randbits(63) for _ in range(ROUNDS + 1)] for kind in KINDS}
    try:
        check_imports()
        ratios = speedups(seeds)
    except (CandidateError, ValueError, ImportError, OSError) as err:  # a failure is an error, never a low score
        print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
        return 1
    geometric = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
    print(json.dumps({"speedup": round(geometric, 4), **{k: round(r, 4) for k, r in ratios.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
