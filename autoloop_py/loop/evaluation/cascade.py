"""The evaluation cascade: a program's `evaluation-stages` run cheap first, each stage gating the next.

A stage that rejects the candidate (it reports an `error`, misses its threshold, or fails a check whose
exit status is its verdict) or breaks (it crashes, times out, or reports nothing where it must) stops the
candidate: later stages never start. The first is a rejection, the second an error (evaluate.py tells
them apart). Metrics merge in stage order; `repeats` apply to the last stage unless a stage sets its own.
The result says which stage stopped the candidate and how long each stage ran.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

from autoloop_py.loop.evaluation.evaluation_report import EvaluationResult
from autoloop_py.program.model import Program
from autoloop_py.program.stages import Stage, label, passes


def run_cascade(
    program: Program, run: Callable[[str, int, int, bool], EvaluationResult], repeats: int, started: float
) -> EvaluationResult:
    """Runs the program's stages in order until one stops the candidate; returns the merged result.

    run(command, repeats, stage number, need_metric) evaluates one stage ('' command: the Evaluation's).
    """
    stages = program.config.evaluation_stages
    merged: dict[str, Any] = {}
    done: list[tuple[int, float, bool]] = []
    result: EvaluationResult | None = None
    for number, stage in enumerate(stages, start=1):
        last = number == len(stages)
        count = stage.repeats or (repeats if last else 1)
        result = run(stage.command, count, number, last or stage.threshold is not None)
        merged.update(result.metrics)
        why = "" if last else stop_reason(result, stage, program)
        done.append((number, result.duration, not why and result.ok and not result.rejection))
        if why:
            stopped = f"{label(stage, number, len(stages))}: {why}"
            return _merged(result, merged, done, started, stopped)
    assert result is not None
    return _merged(result, merged, done, started, "")


def stop_reason(result: EvaluationResult, stage: Stage, program: Program) -> str:
    """Returns why a stage that is not the last stops the candidate ('' when the next stage runs)."""
    if not result.ok:
        return result.error or "it failed"
    if result.rejection:
        return result.rejection
    if not passes(result.metric, stage, program.direction):
        metric = program.metric or "metric"
        shown = "no metric" if result.metric is None else f"{metric} {result.metric:g}"
        word = "at least" if program.direction != "lower" else "at most"
        return f"{shown}, the stage needs {word} {stage.threshold:g}"
    return ""


def _merged(
    result: EvaluationResult, merged: dict[str, Any], done: list[tuple[int, float, bool]], started: float, stopped: str
) -> EvaluationResult:
    """Returns the last stage's result with every stage's metrics, their runs and what stopped the candidate."""
    return dataclasses.replace(
        result, metrics=merged, stages=tuple(done), stopped=stopped, duration=time.monotonic() - started,
    )
