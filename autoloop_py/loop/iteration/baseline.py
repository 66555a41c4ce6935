"""The baseline: the unchanged code evaluated once, in a fresh copy, when no best is known yet."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Mapping

from autoloop_py.loop.evaluation import checks
from autoloop_py.loop.evaluation.evaluate import EvaluationResult, evaluate
from autoloop_py.loop.iteration.options import Clock
from autoloop_py.program.model import Program
from autoloop_py.sandbox import candidate_dir
from autoloop_py.sandbox.memory_cgroup import REFUSED_ALLOCATION
from autoloop_py.sandbox.policy import SandboxPolicy
from autoloop_py.sandbox.run import Isolation
from autoloop_py.state import file as statefile


def measure_baseline(
    program: Program, workdir: Path, state: statefile.StateFile, clock: Clock | None = None
) -> tuple[float | None, float | None, str | None]:
    """Returns (best, baseline, failure): evaluates the unchanged code when no best is known yet."""
    return baseline_outcome(state, evaluate_baseline(program, workdir, state, clock))


def evaluate_baseline(
    program: Program, workdir: Path, state: statefile.StateFile, clock: Clock | None, sandbox: Isolation | None = None
) -> EvaluationResult | None:
    """Returns the evaluation of the unchanged code, made only when no best is known yet (else None)."""
    if state.machine.best_metric is not None:
        return None
    with (clock or Clock())("evaluate baseline"):
        return evaluate_copy(program, workdir, sandbox=evaluation_policy(sandbox))[0]


def evaluate_copy(
    program: Program, workdir: Path, guarded: Mapping[str, str] | None = None, sandbox: SandboxPolicy | None = None,
    repeats: int | None = None,
) -> tuple[EvaluationResult, str]:
    """Evaluates a fresh standalone copy of the tree at `workdir`; returns the result and the protected files it changed.

    repeats: the runs (None: the program's `repeats`).

    The evaluated code never runs in the runner's worktree (its `.git` file leads to the user's repository),
    and sees exactly the tree the runner wrote, nothing an agent left behind.
    """
    with candidate_dir.copy_of(workdir, prefix="autoloop-eval-") as tree:
        result = evaluate(program, tree, sandbox=sandbox, repeats=repeats)
        result = over_caps(result, candidate_dir.disk_bytes(tree), program, sandbox)
        return result, checks.tampered(tree, guarded) if guarded is not None else ""


_OUT_OF_MEMORY = (*REFUSED_ALLOCATION, "Killed")


def over_caps(result: EvaluationResult, disk: int, program: Program, sandbox: SandboxPolicy | None) -> EvaluationResult:
    """Returns the result as an error naming the cap it crossed: its copy over `max-disk`, or memory refused.

    disk: the bytes the evaluation's copy held when it ended.
    """
    cap = program.config.max_disk
    if disk > cap:
        why = f"the evaluation's copy holds {disk} bytes, over the program's `max-disk` of {cap} bytes"
        return replace(result, ok=False, metric=None, error=why)
    said = f"{result.error or ''}\n{result.stderr_tail}\n{result.stdout_tail}"
    memory = sandbox.limits.address_space if sandbox is not None else program.config.max_memory
    if not result.ok and memory is not None and any(sign in said for sign in _OUT_OF_MEMORY):
        note = f"the evaluation ran out of memory at the program's `max-memory` of {memory} bytes per process"
        return replace(result, error=f"{result.error}; {note}" if result.error else note)
    return result


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
        return None, None, result.error or "no metric"
    return result.metric, result.metric, None
