"""Fault injection: the runner kills itself with SIGKILL at a named step, so tests can prove crash safety.

Set `AUTOLOOP_FAULT` to a step name, or several separated by commas; `step@N` fires on the N-th
time the step is reached in this process (the first time without `@N`). Unset, `checkpoint` does nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from autoloop_py.errors import AutoloopError

log = logging.getLogger(__name__)

ENV = "AUTOLOOP_FAULT"
STEPS = (
    "after-propose",
    "during-evaluation",
    "after-candidate-commit",
    "after-candidate-push",
    "after-state-commit",
)
# How often the during-evaluation watcher looks for the evaluation's process, and how long it waits at most.
_POLL = 0.002
_WATCH_LIMIT = 30.0

# Per-process counts of reached steps: a fault is a property of the process, as its environment is.
_reached: Counter[str] = Counter()


@dataclass(frozen=True)
class Fault:
    """One fault to inject.

    Attributes:
      step: the step at which the process dies (one of STEPS).
      occurrence: the 1-based time the step is reached at which it dies.
    """

    step: str
    occurrence: int = 1


def parse_faults(spec: str) -> tuple[Fault, ...]:
    """Returns the faults named by an `AUTOLOOP_FAULT` value; raises AutoloopError on an unknown step."""
    faults = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        step, _, count = item.partition("@")
        step = step.strip()
        if step not in STEPS or (count and not count.strip().isdigit()) or (count and int(count) < 1):
            raise AutoloopError(f"{ENV}={spec!r}: {item!r} is not a fault; use one of {', '.join(STEPS)}, "
                                "optionally followed by @N (N ≥ 1)")
        faults.append(Fault(step, int(count) if count else 1))
    return tuple(faults)


def checkpoint(step: str, environ: Mapping[str, str] | None = None) -> None:
    """Kills this process with SIGKILL when `AUTOLOOP_FAULT` names `step` for the time it is reached now."""
    spec = (os.environ if environ is None else environ).get(ENV, "")
    if not spec.strip():
        return
    if step not in STEPS:
        raise ValueError(f"unknown fault step {step!r}")
    _reached[step] += 1
    if not any(f.step == step and f.occurrence == _reached[step] for f in parse_faults(spec)):
        return
    if step == "during-evaluation":
        _kill_when_child_starts()
    else:
        _kill(step)


def _kill(step: str) -> None:
    """Logs the injected fault and sends SIGKILL to this process."""
    log.warning("%s: killing the runner at %s", ENV, step)
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_when_child_starts() -> None:
    """Starts a watcher that kills this process once a new child (the evaluation) is running."""
    before = _children()
    watcher = threading.Thread(target=_watch, args=(before,), name="autoloop-fault", daemon=True)
    watcher.start()


def _watch(before: frozenset[int]) -> None:
    """Waits for a child process that was not there before, then kills this process."""
    deadline = time.monotonic() + _WATCH_LIMIT
    while time.monotonic() < deadline:
        if _children() - before:
            _kill("during-evaluation")
        time.sleep(_POLL)
    log.warning("%s: no evaluation process started within %g s; not killing", ENV, _WATCH_LIMIT)


def _children() -> frozenset[int]:
    """Returns the pids of this process's children (from /proc; empty where there is none)."""
    me = os.getpid()
    found = set()
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = entry.read_text()
        except OSError:
            continue  # the process ended while we looked
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1] == str(me):
            found.add(int(entry.parent.name))
    return frozenset(found)
