"""Fresh copies: each run of each stage of an evaluation runs in a standalone copy of the runner's tree of its own.

The evaluated code never runs in the runner's worktree (its `.git` file leads to the user's repository),
and each stage sees exactly the tree the runner wrote: nothing an agent left behind, and nothing an earlier
stage or repeat left (a rewritten evaluator, a planted module or `.pyc`, a cached result). After each run its copy
is checked for the protected files it changed, and against `max-disk`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Mapping

from autoloop_py.loop.evaluation import checks
from autoloop_py.loop.evaluation.evaluate import EvaluationResult, evaluate
from autoloop_py.program.model import Program
from autoloop_py.sandbox import candidate_dir
from autoloop_py.sandbox.memory_cgroup import REFUSED_ALLOCATION
from autoloop_py.sandbox.policy import SandboxPolicy

_OUT_OF_MEMORY = (*REFUSED_ALLOCATION, "Killed")


def evaluate_copy(
    program: Program, workdir: Path, guarded: Mapping[str, str] | None = None, sandbox: SandboxPolicy | None = None,
    repeats: int | None = None,
) -> EvaluationResult:
    """Evaluates the tree at `workdir`, each run of each stage in a fresh copy of it; returns the result.

    repeats: the runs (None: the program's `repeats`).

    guarded: the protected files' hashes (checks.protected_hashes); a stage that changed one makes the
    result an error whose `tampered` names the files and the stage, and no later stage runs.
    """

    def in_copy(run: Callable[[Path], EvaluationResult], stage: str) -> EvaluationResult:
        # Its removal is off the path from the reply to the next request.
        with candidate_dir.copy_of(workdir, prefix="autoloop-eval-", later=True) as tree:
            result = over_caps(run(tree), candidate_dir.disk_bytes(tree), program, sandbox)
            changed = checks.tampered(tree, guarded) if guarded is not None else ""
        if not changed:
            return result
        where = f"{changed} at {stage}" if stage else changed
        return replace(result, ok=False, metric=None, rejection="", tampered=where,
                       error=f"it changed protected files: {changed}")

    return evaluate(program, workdir, sandbox=sandbox, repeats=repeats, place=in_copy)


def over_caps(result: EvaluationResult, disk: int, program: Program, sandbox: SandboxPolicy | None) -> EvaluationResult:
    """Returns the result as an error naming the cap it crossed: its copy over `max-disk`, or memory refused.

    disk: the bytes the evaluation's copy held when it ended.
    """
    cap = program.config.max_disk
    if disk > cap:
        why = f"the evaluation's copy holds {disk} bytes, over the program's `max-disk` of {cap} bytes"
        return replace(result, ok=False, metric=None, rejection="", error=why)
    said = f"{result.error or ''}\n{result.stderr_tail}\n{result.stdout_tail}"
    memory = sandbox.limits.address_space if sandbox is not None else program.config.max_memory
    if not result.ok and memory is not None and any(sign in said for sign in _OUT_OF_MEMORY):
        note = f"the evaluation ran out of memory at the program's `max-memory` of {memory} bytes per process"
        return replace(result, error=f"{result.error}; {note}" if result.error else note)
    return result
