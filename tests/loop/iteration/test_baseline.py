"""Tests for autoloop_py.loop.iteration.baseline: what the unchanged code's evaluation makes the best."""

from __future__ import annotations

from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.iteration.baseline import baseline_outcome
from autoloop_py.state import file as statefile


def _result(**fields: object) -> EvaluationResult:
    base = dict(ok=True, metric=None, metrics={}, error=None, runs=(), stdout_tail="", stderr_tail="", duration=0.1)
    return EvaluationResult(**{**base, **fields})  # type: ignore[arg-type]


def test_a_baseline_a_stage_rejects_is_a_failure_with_the_stages_reason() -> None:
    state = statefile.new_state("demo", "Grow x.", "score", "higher", None)
    stopped = _result(rejection="x is -1", stopped="stage 1 of 2 (validity): x is -1", stages=((1, 0.1, False),))
    assert baseline_outcome(state, stopped) == (None, None, "stage 1 of 2 (validity): x is -1")
    last = _result(rejection="the packing is empty", stages=((1, 0.1, True), (2, 0.1, False)))
    assert baseline_outcome(state, last) == (None, None, "the packing is empty")
    scored = _result(metric=0.4, runs=(0.4,))
    assert baseline_outcome(state, scored) == (0.4, 0.4, None)
