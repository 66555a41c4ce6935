"""The baseline: the unchanged code evaluated once, in a fresh copy, when no best is known yet."""

from __future__ import annotations

from pathlib import Path

from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.evaluation.fresh_copies import evaluate_copy
from autoloop_py.loop.iteration.options import Clock
from autoloop_py.program.model import Program
from autoloop_py.sandbox.policy import SandboxPolicy
from autoloop_py.sandbox.run import Isolation
from autoloop_py.state import file as statefile


def evaluate_baseline(
    program: Program, workdir: Path, state: statefile.StateFile, clock: Clock | None, sandbox: Isolation | None = None
) -> EvaluationResult | None:
    """Returns the evaluation of the unchanged code, made only when no best is known yet (else None)."""
    if state.machine.best_metric is not None:
        return None
    with (clock or Clock())("evaluate baseline"):
        return evaluate_copy(program, workdir, sandbox=evaluation_policy(sandbox))


def evaluation_policy(sandbox: Isolation | None) -> SandboxPolicy | None:
    """Returns the evaluation's policy (None: evaluate() derives it from the program)."""
    return sandbox.evaluation if sandbox else None


def baseline_outcome(
    state: statefile.StateFile, result: EvaluationResult | None
) -> tuple[float | None, float | None, str | None]:
    """Returns (best, baseline, failure) from the baseline's evaluation (None: the recorded best stands)."""
    if result is None:
        return state.machine.best_metric, None, None
    if not result.ok or result.metric is None:
        # Even a stage's rejection: the trusted evaluator or the unchanged code is broken, no candidate is.
        return None, None, result.stopped or result.error or result.rejection or "no metric"
    return result.metric, result.metric, None
