"""The incumbent re-checked when the default branch moved: the branch's best, merged with today's base, measured once.

The best metric was measured on the default branch of its day. When that branch moves (a dependency bump, a
changed evaluator, a fix elsewhere in the tree), the kept code may no longer reach it, and every later
candidate would be judged against a number nothing on the branch still scores. So the first iteration on a
new base evaluates the branch's tip as prepared (merged with the base), once, in the sandbox; when it falls
short of the recorded best by more than `min-delta`, Best Metric is re-based to what it scores now and the
Machine State's Stale Reason says why, which the PR body and status comment repeat.
"""

from __future__ import annotations

import logging
from pathlib import Path

from autoloop_py.loop.evaluation.fresh_copies import evaluate_copy
from autoloop_py.loop.iteration.baseline import evaluation_policy
from autoloop_py.loop.iteration.options import Clock
from autoloop_py.loop.record.outcome import BestRecheck
from autoloop_py.program.model import Program
from autoloop_py.sandbox.run import Isolation
from autoloop_py.state.machine import MachineState, is_improvement
from autoloop_py.state.parts import format_number

log = logging.getLogger(__name__)


def due(machine: MachineState, base: str | None) -> bool:
    """Returns whether the best must be measured again: it was measured on another default-branch commit."""
    return base is not None and machine.best_metric is not None and machine.best_base not in (None, base)


def judge(machine: MachineState, base: str, value: float | None, error: str | None, program: Program) -> BestRecheck:
    """Returns what the new measurement means: the best holds, or it is stale (re-based to the new value)."""
    recorded = machine.best_metric
    assert recorded is not None
    moved = f"the default branch moved from {(machine.best_base or '?')[:12]} to {base[:12]}"
    if value is None:
        return BestRecheck(base, recorded, recorded, f"{moved}, and the best's code no longer evaluates there: {error}")
    if is_improvement(recorded, value, program.direction, program.config.min_delta):
        slack = f" by more than min-delta {format_number(program.config.min_delta)}" if program.config.min_delta else ""
        why = (f"{moved}; the best's code now scores {format_number(value)}, short of the recorded "
               f"{format_number(recorded)}{slack}: Best Metric re-based")
        return BestRecheck(base, recorded, value, why)
    return BestRecheck(base, recorded, recorded, None)


def recheck(program: Program, workdir: Path, machine: MachineState, base: str | None, clock: Clock,
            sandbox: Isolation | None) -> BestRecheck | None:
    """Returns the best measured on the new base (one evaluation of the prepared branch), None when not due."""
    if not due(machine, base):
        return None
    assert base is not None
    with clock("re-check best"):
        result = evaluate_copy(program, workdir, sandbox=evaluation_policy(sandbox))
    value = result.metric if result.ok else None
    found = judge(machine, base, value, result.error or "no metric", program)
    if found.stale:
        log.warning("%s: %s", program.name, found.stale)
    return found
