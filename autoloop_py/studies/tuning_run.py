"""The tuning-gap run: BO over one candidate's knobs with the program's own evaluation, in a private worktree.

Effects only (git worktree, evaluation subprocesses, the model call, scikit-optimize); the knob
rules, the rewrite and the report are pure, in autoloop_py/analysis/tuning*.py. Nothing here moves
a branch: trials are written into a detached worktree of the program branch that is removed after.
"""

from __future__ import annotations

import logging
import shutil
import warnings
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from autoloop_py import tempdirs
from autoloop_py.analysis.tuning import Knob, find_knobs, knob_prompt, parse_knob_reply
from autoloop_py.analysis.tuning_report import (
    Choice,
    Trial,
    choose,
    initial_points,
    objective,
    penalty,
)
from autoloop_py.errors import AutoloopError
from autoloop_py.git.command import call, open_repo, rev_parse, run
from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.evaluation.fresh_copies import evaluate_copy
from autoloop_py.program.model import Program
from autoloop_py.state.trace import Trace

logger = logging.getLogger(__name__)

TUNE_HINT = "autoloop tune needs scikit-optimize; install it with: pip install 'autoloop-py[tune]'"


@dataclass(frozen=True)
class TuneTarget:
    """The candidate to tune and what the run knows about it.

    Attributes:
        choice: the trace row chosen (id, iteration, recorded score).
        source: its full source, as the trace saved it.
        language: the source's language (only python is tuned).
        run_best: the run's best valid score, None when no program has one.
        choices: every program of the run, for messages.
    """

    choice: Choice
    source: str
    language: str
    run_best: float | None
    choices: tuple[Choice, ...]


def load_target(
    trace: Trace, direction: str, candidate: str | None = None, at_iteration: int | None = None
) -> TuneTarget:
    """Returns the candidate to tune: --candidate, the best at or before --at-iteration, or the run's best."""
    rows = {row.id: row for row in trace.rows}
    choices = tuple(Choice(r.id, r.iteration_found, trace.score(r), trace.source(r) is not None) for r in trace.rows)
    chosen = choose(choices, direction, candidate, at_iteration)
    row = rows[chosen.id]
    source = trace.source(row)
    if source is None:
        raise AutoloopError(f"the trace has no source for {chosen.id!r}; pick another with --candidate")
    if row.language != "python":
        raise AutoloopError(f"{chosen.id!r} is {row.language} code; autoloop tune rewrites Python sources only")
    scores = [c.score for c in choices if c.score is not None]
    run_best = (max(scores) if direction != "lower" else min(scores)) if scores else None
    return TuneTarget(chosen, source, row.language, run_best, choices)


def select_knobs(
    source: str, model: str | None, complete: Callable[[str, str], str] | None = None
) -> tuple[list[Knob], str, list[str]]:
    """Returns (knobs, who chose them, notes): the model's valid knobs when asked, else the literal finder's."""
    notes: list[str] = []
    if model:
        from autoloop_py.proposers import llm

        ask = complete or llm.complete  # looked up at call time, so tests can replace llm.complete
        try:
            reply = ask(model, knob_prompt(source))
        except Exception as err:  # noqa: BLE001 - litellm raises many error types; the literal finder still works
            notes.append(f"the model call failed ({type(err).__name__}: {err}); the literal finder chose the knobs")
        else:
            knobs, problems = parse_knob_reply(reply, source)
            notes.extend(problems)
            if knobs:
                return knobs, f"llm {model}", notes
            notes.append("the model's reply named no valid knob; the literal finder chose the knobs")
    return find_knobs(source), "literal finder", notes


@contextmanager
def trial_worktree(root: Path, program: str, with_origin: bool = True) -> Iterator[Path]:
    """Yields a private, detached worktree of the program branch (else origin's, if with_origin; else HEAD); removes
    it after."""
    repo = open_repo(root)
    origin = [f"refs/remotes/origin/autoloop/{program}"] if with_origin else []
    refs = [f"refs/heads/autoloop/{program}", *origin, "HEAD"]
    start = next((sha for sha in (rev_parse(repo, ref) for ref in refs) if sha), None)
    if start is None:
        raise AutoloopError(f"the repository has no commit to check out for {program}; commit the program first",
                            path=root)
    tmp = tempdirs.make(f"autoloop-trial-{program}-")
    worktree = tmp / "worktree"
    try:
        run(repo, "worktree", "add", "--detach", "--quiet", str(worktree), start)
        yield worktree
    finally:
        call(repo, "worktree", "remove", "--force", str(worktree))
        shutil.rmtree(tmp, ignore_errors=True)
        call(repo, "worktree", "prune")


def measure(program: Program, workdir: Path, path: str, source: str) -> EvaluationResult:
    """Writes source to the Target file in the worktree and runs the program's evaluation in a standalone copy of it."""
    # Bytes, not write_text: the source's own newlines must reach the evaluation unchanged.
    (workdir / path).write_bytes(source.encode("utf-8"))
    # Never in the worktree itself (its `.git` file leads to the user's repository): in copies, one per stage.
    return evaluate_copy(program, workdir)


def gp_minimize() -> Callable[..., Any]:
    """Returns skopt.gp_minimize, or raises the install hint when scikit-optimize is missing."""
    try:
        from skopt import gp_minimize as minimize
    except ImportError:
        raise AutoloopError(TUNE_HINT) from None
    return minimize  # type: ignore[no-any-return]


def dimensions(knobs: Sequence[Knob]) -> list[Any]:
    """Returns the skopt search space: an Integer or Real per knob, log-uniform for log-scale knobs."""
    from skopt.space import Integer, Real

    space: list[Any] = []
    for knob in knobs:
        prior = "log-uniform" if knob.scale == "log" else "uniform"
        if knob.kind == "int":
            space.append(Integer(int(knob.low), int(knob.high), prior=prior, name=knob.name))
        else:
            space.append(Real(float(knob.low), float(knob.high), prior=prior, name=knob.name))
    return space


def run_search(
    program: Program,
    workdir: Path,
    path: str,
    source_for: Callable[[Mapping[str, int | float]], str],
    knobs: Sequence[Knob],
    *,
    calls: int,
    seed: int,
    on_trial: Callable[[Trial], None],
) -> tuple[list[Trial], bool]:
    """Runs gp_minimize for `calls` evaluations (the first at the original values); returns the trials, interrupted.

    `source_for` renders the parametrized source for a set of knob values; a failed evaluation costs
    the penalty (worse than every trial so far), and Ctrl-C ends the search keeping the trials made.
    """
    minimize = gp_minimize()
    trials: list[Trial] = []
    scored: list[float] = []

    def evaluate_point(point: Sequence[Any]) -> float:
        # skopt's numpy scalars as Python ints and floats
        values = {knob.name: int(value) if knob.kind == "int" else float(value) for knob, value in zip(knobs, point)}
        result = measure(program, workdir, path, source_for(values))
        score = result.metric if result.ok else None
        trial = Trial(len(trials) + 1, values, score, None if result.ok else result.error, result.duration)
        trials.append(trial)
        on_trial(trial)
        if score is None:
            return penalty(scored)
        scored.append(objective(score, program.direction))
        return scored[-1]

    try:
        with warnings.catch_warnings(), _one_blas_thread():
            # skopt warns when it proposes a point twice; that trial is evaluated and recorded all the same.
            warnings.simplefilter("ignore")
            minimize(evaluate_point, dimensions(knobs), n_calls=calls, n_initial_points=initial_points(calls),
                     x0=[knob.value for knob in knobs], random_state=seed)
    except KeyboardInterrupt:
        logger.info("tune: interrupted after %d trials", len(trials))
        return trials, True
    return trials, False


def _one_blas_thread() -> Any:
    """Returns a context limiting BLAS to one thread: the GP's matrices are tiny, and threads only contend."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn requires threadpoolctl, so this is only a safeguard
        return nullcontext()
    return threadpool_limits(limits=1)


def run_info(program: Program, path: str, target: TuneTarget, knob_source: str, notes: Sequence[str],
             calls: int, seed: int, interrupted: bool) -> Mapping[str, Any]:
    """Returns the `run` part of the report: program, file, metric, direction, run's best and search settings."""
    return {
        "program": program.name, "path": path, "metric": program.metric,
        "direction": program.direction, "run_best": target.run_best, "knob_source": knob_source,
        "notes": list(notes), "calls": calls, "seed": seed, "interrupted": interrupted,
    }  # fmt: skip
