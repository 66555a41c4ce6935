"""Runs in a child process of evaluate.py: one group-by on arrays read from .npy files, the answer saved beside them.

evaluate.py times each call's round trip from its own process (autoloop_py.candidate.Session); this file only
moves the arrays, through files because JSON of 250 000 rows takes far longer than the group-by itself. Pandas'
reference runs through this same file, in a child of its own, so both pay the same overhead.
Do not modify: it is part of the evaluation.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib
from pathlib import Path

import numpy as np

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt() parameter numbers


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


def pandas_group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns pandas' answer: the sorted distinct keys and the sum per key."""
    import pandas as pd

    result = pd.Series(values, copy=False).groupby(keys).sum()
    return result.index.to_numpy(), result.to_numpy()


def group_sum_files(which: str, folder: str) -> None:
    """Calls the candidate's group_sum (which="groupby") or pandas' on folder's keys.npy and values.npy; saves
    the answer as keys_out.npy and sums_out.npy."""
    function = pandas_group_sum if which == "pandas" else importlib.import_module("groupby").group_sum
    where = Path(folder)
    got = function(np.load(where / "keys.npy"), np.load(where / "values.npy"))
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise ValueError(f"group_sum must return (keys, sums), got {type(got).__name__}")
    for name, array in zip(("keys_out", "sums_out"), got):
        if not isinstance(array, np.ndarray):
            raise ValueError(f"group_sum must return numpy arrays, got {type(array).__name__}")
        np.save(where / f"{name}.npy", array, allow_pickle=False)


keep_freed_memory()
