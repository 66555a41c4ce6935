"""The tuning-gap report: which candidate to tune, the BO trials, the best-so-far curve and the ceiling.

Pure: the effects (worktree, evaluation, gp_minimize) live in autoloop_py/studies/tuning_run.py. Scores are
in the metric's own units; `gain` is always positive when tuning helped, whatever the direction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from autoloop_py.analysis import oriented
from autoloop_py.analysis.tuning import Knob
from autoloop_py.errors import AutoloopError

MAX_INITIAL_POINTS = 8
OUTCOMES = ("improves", "no change", "regresses", "no trials")


@dataclass(frozen=True)
class Trial:
    """One call of the search: the knob values tried and what the evaluation made of them.

    Attributes:
        call: 1-based call number (call 1 evaluates the original values).
        values: {knob name: value}.
        score: the metric, None when the evaluation failed.
        error: why the evaluation failed, else None.
        seconds: how long the evaluation took.
    """

    call: int
    values: Mapping[str, int | float]
    score: float | None
    error: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class Choice:
    """A program of the run that may be tuned.

    Attributes:
        id: its trace row id (`seed`, `it3`, or a strategy's candidate id).
        iteration: the iteration that produced it.
        score: its recorded primary score, None when invalid.
        has_source: whether the trace holds its full source.
    """

    id: str
    iteration: int
    score: float | None
    has_source: bool = True


def choose(
    choices: Sequence[Choice], direction: str, candidate: str | None = None, at_iteration: int | None = None
) -> Choice:
    """Returns the program to tune: an id (or unique id prefix), the best valid at or before an iteration, or
    the best."""
    if candidate is not None:
        return _by_id(choices, candidate)
    limit = math.inf if at_iteration is None else at_iteration
    valid = [c for c in choices if c.score is not None and c.has_source and c.iteration <= limit]
    if not valid:
        where = "" if at_iteration is None else f" at or before iteration {at_iteration}"
        raise AutoloopError(f"no program with a valid score and a saved source{where}; pass --candidate ID")
    best = max(oriented(c.score, direction) for c in valid if c.score is not None)
    tied = [c for c in valid if c.score is not None and oriented(c.score, direction) == best]
    # The paper's --at-iteration takes the latest of tied programs; the run's best is the first to reach it.
    return tied[-1] if at_iteration is not None else tied[0]


def _by_id(choices: Sequence[Choice], candidate: str) -> Choice:
    exact = [c for c in choices if c.id == candidate]
    found = exact or [c for c in choices if c.id.startswith(candidate)]
    if len(found) == 1:
        return found[0]
    known = ", ".join(c.id for c in choices[:12]) + (", ..." if len(choices) > 12 else "")
    if found:
        raise AutoloopError(f"--candidate {candidate!r} matches {len(found)} programs; give more of the id ({known})")
    raise AutoloopError(f"no program {candidate!r} in the trace; known ids: {known or 'none'}")


def initial_points(calls: int) -> int:
    """Returns how many random points precede the GP-guided calls (8 of 24, fewer for short searches)."""
    return max(1, min(MAX_INITIAL_POINTS, (calls - 1) // 2))


def trial_kind(call: int, n_initial: int) -> str:
    """Returns how a call chose its point: the original values, a random draw, or the GP acquisition."""
    return "original" if call == 1 else "random" if call <= 1 + n_initial else "gp"


def objective(score: float, direction: str) -> float:
    """Returns the value gp_minimize minimises: −score when higher is better."""
    return -oriented(score, direction)


def penalty(objectives: Sequence[float]) -> float:
    """Returns the objective of a failed trial: worse than every trial so far by a margin (never a fixed 0)."""
    if not objectives:
        return 1.0
    worst, best = max(objectives), min(objectives)
    return worst + max(worst - best, 0.1 * abs(worst), 1e-6)


def best_trial(trials: Sequence[Trial], direction: str) -> Trial | None:
    """Returns the first trial with the best score (None when every trial failed)."""
    scored = [t for t in trials if t.score is not None]
    return max(scored, key=lambda t: (oriented(t.score or 0.0, direction), -t.call), default=None)


def curve(trials: Sequence[Trial], direction: str, n_initial: int) -> list[dict[str, Any]]:
    """Returns per call: its kind, score, the best score so far, and the regret (distance to the final best)."""
    rows: list[dict[str, Any]] = []
    best: float | None = None
    for trial in trials:
        if trial.score is not None and (best is None or oriented(trial.score, direction) > oriented(best, direction)):
            best = trial.score
        rows.append({"call": trial.call, "kind": trial_kind(trial.call, n_initial), "score": trial.score,
                     "error": trial.error, "best_so_far": best, "seconds": round(trial.seconds, 3)})
    for row in rows:
        row["regret"] = None if row["best_so_far"] is None or best is None else abs(best - row["best_so_far"])
    return rows


def outcome(ceiling: float | None, original: float | None, direction: str) -> str:
    """Returns improves, no change or regresses (the tuning ceiling against the original score), or no trials."""
    if ceiling is None or original is None:
        return "no trials"
    difference = oriented(ceiling, direction) - oriented(original, direction)
    return "improves" if difference > 0 else "no change" if difference == 0 else "regresses"


def build_report(
    *,
    run: Mapping[str, Any],
    candidate: Choice,
    knobs: Sequence[Knob],
    trials: Sequence[Trial],
    baseline: float | None,
    n_initial: int,
) -> dict[str, Any]:
    """Returns the JSON-ready report: knobs (original and tuned), the curve, the ceiling against the run's best."""
    direction = str(run["direction"])
    best = best_trial(trials, direction)
    ceiling = best.score if best else None
    run_best = run.get("run_best")
    return {
        "run": dict(run),
        "candidate": {"id": candidate.id, "iteration": candidate.iteration, "recorded_score": candidate.score},
        "knobs": [_knob_row(knob, best) for knob in knobs],
        "trials": curve(trials, direction, n_initial),
        "n_initial_points": n_initial,
        "baseline": baseline,
        "ceiling": ceiling,
        "best_values": dict(best.values) if best else None,
        "best_call": best.call if best else None,
        "gain": _gain(ceiling, baseline, direction),
        "relative_gain": _relative(ceiling, baseline, direction),
        "outcome": outcome(ceiling, baseline, direction),
        "versus_run_best": _gain(ceiling, run_best, direction),
        "matches_run_best": None if ceiling is None or run_best is None
        else oriented(ceiling, direction) >= oriented(run_best, direction),
        "failed_trials": sum(1 for t in trials if t.score is None),
    }


def _knob_row(knob: Knob, best: Trial | None) -> dict[str, Any]:
    tuned = best.values.get(knob.name) if best else None
    return {"name": knob.name, "line": knob.line, "text": knob.text, "original": knob.value, "tuned": tuned,
            "low": knob.low, "high": knob.high, "scale": knob.scale, "kind": knob.kind, "family": knob.family,
            "rationale": knob.rationale}


def _gain(value: float | None, reference: float | None, direction: str) -> float | None:
    """Returns how much better value is than reference (negative when worse), in the metric's units."""
    if value is None or reference is None:
        return None
    return oriented(value, direction) - oriented(reference, direction)


def _relative(value: float | None, reference: float | None, direction: str) -> float | None:
    gain = _gain(value, reference, direction)
    return None if gain is None or reference is None else gain / max(abs(reference), 1e-9)
