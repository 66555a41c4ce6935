"""The held-out evaluation of a candidate about to become the best (`evaluation-holdout`), and its verdict.

It runs in the sandbox like the evaluation, on a fresh copy of the candidate's tree, and only once the
candidate has beaten the best on the search metric; what it reports goes to the history bullets and the
Machine State, never to the model. With `holdout-must-not-drop`, the incumbent's held-out value (recorded,
or measured once on a copy of the branch's tree when none is) bounds the candidate's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from autoloop_py.loop.evaluation.evaluate import evaluate
from autoloop_py.program.holdout import drops
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.sandbox import candidate_dir
from autoloop_py.sandbox.policy import SandboxPolicy
from autoloop_py.state.machine import HOLDOUT_BULLET, INCUMBENT_HOLDOUT_BULLET
from autoloop_py.state.parts import format_number

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeldOut:
    """What the held-out evaluation said of a candidate.

    Attributes:
      value: the candidate's held-out value (None when the evaluation failed).
      error: why it failed ('' when it did not).
      incumbent: the incumbent's held-out value (recorded or measured now; None when unknown).
      measured: the incumbent's value was measured now (the Machine State held none).
      refusal: why the candidate is not kept ('' when it may be).
    """

    value: float | None
    error: str = ""
    incumbent: float | None = None
    measured: bool = False
    refusal: str = ""

    def bullets(self, search: float, metric: str) -> tuple[tuple[str, str], ...]:
        """Returns the history bullets: the candidate's value beside the search metric, and a measured incumbent's."""
        if self.value is None:
            own = f"failed: {self.error}"
        else:
            gap = search - self.value
            own = (f"{format_number(self.value)} (`{metric}` held out; search {format_number(search)}, "
                   f"gap {gap:+.4g})")
            if self.refusal:
                own += f"; {self.refusal}"
        found = ((INCUMBENT_HOLDOUT_BULLET, f"{format_number(self.incumbent)} (the best's, measured for the "
                                            "comparison)"),) if self.measured and self.incumbent is not None else ()
        return ((HOLDOUT_BULLET, own), *found)


def holdout_program(program: Program) -> Program:
    """Returns the program whose one evaluation is its held-out command (no stages, one run)."""
    holdout = program.config.evaluation_holdout
    assert holdout is not None and program.evaluation is not None
    evaluation = Evaluation(holdout.command, holdout.metric or program.evaluation.metric, program.evaluation.line)
    config = replace(program.config, evaluation_stages=(), repeats=1)
    return replace(program, evaluation=evaluation, config=config)


def measure(program: Program, tree: Path, sandbox: SandboxPolicy | None,
            files: Mapping[str, str | None] | None = None) -> tuple[float | None, str]:
    """Returns (held-out value, error) of a fresh copy of tree, with `files` written over it first (None: deleted)."""
    with candidate_dir.copy_of(tree, prefix="autoloop-holdout-") as copy:
        for path, text in (files or {}).items():
            target = copy / path
            if text is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
        result = evaluate(holdout_program(program), copy, sandbox=sandbox)
    if not result.ok or result.metric is None:
        return None, result.error or "no metric"
    if result.rejection:
        return None, f"the held-out evaluation judged it invalid: {result.rejection}"
    return result.metric, ""


def check(
    program: Program, tree: Path, incumbent_files: Mapping[str, str | None], recorded: float | None,
    sandbox: SandboxPolicy | None,
) -> HeldOut:
    """Returns the held-out verdict on the candidate at tree (its files as `tree` holds them).

    incumbent_files: what to write over a copy of tree to get the branch's best back (the candidate's changes
    undone); used only when `holdout-must-not-drop` needs an incumbent value and `recorded` is None.
    """
    value, error = measure(program, tree, sandbox)
    tolerance = program.config.holdout_must_not_drop
    if tolerance is None:
        return HeldOut(value, error, recorded)
    if value is None:
        return HeldOut(None, error, recorded, refusal=f"not kept: its held-out evaluation failed ({error})")
    incumbent, measured = recorded, False
    if incumbent is None:
        incumbent, why = measure(program, tree, sandbox, incumbent_files)
        measured = incumbent is not None
        if incumbent is None:
            log.warning("%s: the best's held-out value could not be measured (%s); nothing to compare with",
                        program.name, why)
    if incumbent is not None and drops(value, incumbent, program.direction, tolerance):
        refusal = (f"not kept: held out, it drops from the best's {format_number(incumbent)} by more than "
                   f"`holdout-must-not-drop` allows ({format_number(tolerance)})")
        return HeldOut(value, "", incumbent, measured, refusal)
    return HeldOut(value, "", incumbent, measured)


NOTE = ("not kept: its held-out value drops below the best's by more than `holdout-must-not-drop` allows "
        "(the Holdout bullet has the values; no prompt shows them)")
FAILED_NOTE = "not kept: its held-out evaluation failed (see the Holdout bullet; no prompt shows it)"


def note(held: HeldOut) -> str:
    """Returns the history's Notes for a candidate the held-out check refused: the reason, without its values."""
    return FAILED_NOTE if held.value is None else NOTE
