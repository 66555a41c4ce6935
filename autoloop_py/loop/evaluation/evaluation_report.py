"""An evaluation's report: the JSON object one run printed or wrote, read into its metric, rejection and feedback;
and the result of evaluating a candidate (all its runs and stages).

Pure: the runner hands in the text (the report file's, or stdout's); nothing here reads a file or a process.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

# The report's keys that are never metrics: `error` says the candidate is invalid, `feedback` is text for the
# model. A program naming either as its metric is refused at check time (program/model.py).
ERROR_KEY = "error"
FEEDBACK_KEY = "feedback"
RESERVED_KEYS = (ERROR_KEY, FEEDBACK_KEY)
# Upstream evaluators (autoresearch) put the end of their log here: shown like feedback.
LOG_TAIL_KEY = "log_tail"
_JSON_WINDOW = 64 * 1024
_DECODE_BUDGET = 2000
_NO_OBJECT = 'the evaluation printed no JSON object; print one such as {"score": 0.5} as its last line'


@dataclass(frozen=True)
class Report:
    """What one evaluation run reported.

    Attributes:
      metric: the primary metric (None when the report has no usable one).
      metrics: the whole JSON object ({} when none was read).
      error: why no metric could be read (None when metric is set).
      rejection: the report's own `error` text beside a usable metric: the evaluator judged the
        candidate invalid (upstream's `{"combined_score": 0.0, "error": "negative radii"}`), so it is
        rejected, never kept, and not counted as an error that pauses the program ('' when none). A stage
        of a cascade is a gate: there its `error` rejects the candidate with or without a metric.
      feedback: the report's `feedback` text, then its `log_tail` ('' when neither).
      values: the report's other named values (neither the metric, `error`, `feedback` nor `log_tail`).
      missing: there is no report at all, or one with no metric key and no `error` (a pass/fail stage of a
        cascade needs none).
    """

    metric: float | None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    rejection: str = ""
    feedback: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)
    missing: bool = False


def read_report(
    text: str, metric: str, *, whole: bool = False, stage: bool = False, printed: tuple[str, str] | None = None
) -> Report:
    """Returns the report in text: the whole text is one JSON object (whole), else the last object stdout printed.

    stage: the text is a report of a stage of a cascade, whose `error` rejects the candidate even without a metric.
    printed: the run's (stdout, stderr): when no value was read at all, the error says how they ended.
    """
    found = _loads_object(text.strip()) if whole else last_json_object(text)
    if found is None and whole:
        report = Report(None, error=_not_an_object(text), missing=not text.strip())
    elif found is None:
        report = Report(None, error=_NO_OBJECT, missing=True)
    else:
        report = report_of(found, metric, stage=stage)
    if printed is not None and report.error and not report.metrics:  # the output's end is the only clue left
        return replace(report, error=f"{report.error}; {printed_end(*printed)}")
    return report


def printed_end(stdout: str, stderr: str, limit: int = 200) -> str:
    """Returns what the evaluation printed last, on one line: its stdout's end, else its stderr's, else nothing."""
    for name, text in (("stdout", stdout), ("stderr", stderr)):
        line = " ".join(text.split())
        if line:
            return f"its {name} ended: {line if len(line) <= limit else '...' + line[-limit:]!r}"
    return "it printed nothing"


def report_of(found: Mapping[str, Any], metric: str, *, stage: bool = False) -> Report:
    """Returns the report of one JSON object: its metric or why there is none, its rejection and feedback."""
    text = _text(found.get(FEEDBACK_KEY)), _text(found.get(LOG_TAIL_KEY))
    feedback = "\n".join(part for part in text if part)
    values = {k: v for k, v in found.items() if k not in (metric, ERROR_KEY, FEEDBACK_KEY, LOG_TAIL_KEY)}
    reported = one_line(_text(found.get(ERROR_KEY))) if found.get(ERROR_KEY) else ""
    value, why = _metric_value(found, metric)
    if value is None and reported and stage:
        # The evaluator ran and judged the candidate: a rejection, not a broken evaluator (issue 37).
        return Report(None, found, None, rejection=reported, feedback=feedback, values=values)
    if value is None:
        error = f"evaluation reported an error: {reported}" if reported else why
        missing = not reported and metric not in found
        return Report(None, found, error, feedback=feedback, values=values, missing=missing)
    return Report(value, found, None, rejection=reported, feedback=feedback, values=values)


def _metric_value(found: Mapping[str, Any], metric: str) -> tuple[float | None, str | None]:
    """Returns (the metric as a finite float, None) or (None, why it is not one)."""
    if metric not in found:
        keys = ", ".join(sorted(found)) or "none"
        return None, f"metric '{metric}' is missing from the JSON object (keys: {keys}); check the metric name"
    value = found[metric]
    if isinstance(value, bool):
        return None, f"metric '{metric}' is a boolean ({json.dumps(value)}); booleans are never metrics"
    if not isinstance(value, (int, float)):
        return None, f"metric '{metric}' is not a number: {one_line(json.dumps(value))}"
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = math.inf
    if not math.isfinite(number):
        return None, f"metric '{metric}' is not finite ({number})"
    return number, None


def _text(value: Any) -> str:
    """Returns a report value as text (JSON for anything but a string)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def _not_an_object(text: str) -> str:
    if not text.strip():
        return ('the evaluation wrote no report to $AUTOLOOP_RESULT; write one JSON object such as {"score": 0.5} '
                "to the file it names before exiting")
    return "the report in $AUTOLOOP_RESULT is not one JSON object; write exactly one, such as {\"score\": 0.5}"


def one_line(text: str, limit: int = 300) -> str:
    """Returns text on one line, cut to limit characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def last_json_object(text: str) -> dict[str, Any] | None:
    """Returns the JSON object whose closing brace comes last in text (scanning lines from the end)."""
    budget = [_DECODE_BUDGET]
    end = len(text)
    while end > 0 and budget[0] > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end].rstrip()
        end = start - 1
        if not line.endswith("}"):
            continue
        found = _loads_object(line.strip())
        if found is None:
            found = _object_ending_at(text, start + len(line) - 1, budget)
        if found is not None:
            return found
    return None


def _loads_object(text: str) -> dict[str, Any] | None:
    """Returns the JSON object that is the whole text, else None."""
    if not text.startswith("{"):
        return None
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _object_ending_at(text: str, close: int, budget: list[int]) -> dict[str, Any] | None:
    """Returns the object that closes at index `close`, decoding from each `{` going backwards."""
    decoder = json.JSONDecoder()
    floor = max(0, close - _JSON_WINDOW)
    pos = close + 1
    while budget[0] > 0:
        pos = text.rfind("{", floor, pos)
        if pos < 0:
            return None
        budget[0] -= 1
        try:
            found, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            continue
        if end == close + 1 and isinstance(found, dict):
            return found
    return None


# ---------------------------------------------------------------- the channel

RESULT_ENV = "AUTOLOOP_RESULT"
AUTO, FILE, STDOUT = "auto", "file", "stdout"
CHANNELS = (AUTO, FILE, STDOUT)


def channel_of(setting: str, evaluator_texts: Iterable[str]) -> str:
    """Returns where a run's report is read: `file` or `stdout` (`auto`: file when the evaluator names the file).

    evaluator_texts: the evaluation command and the files it names (never the candidate's Target files), so
    candidate code can neither choose stdout for an evaluator that writes the file nor the reverse.
    """
    if setting in (FILE, STDOUT):
        return setting
    return FILE if any(RESULT_ENV in text for text in evaluator_texts) else STDOUT


# ---------------------------------------------------------------- the result of all runs


@dataclass(frozen=True)
class EvaluationResult:
    """The outcome of evaluating one candidate (all repeats).

    Attributes:
      ok: every run exited 0 and reported a finite metric.
      metric: the median of the runs' metrics when ok, else None.
      metrics: the last run's JSON object, every number all runs reported replaced by its median, so the
        primary metric here is `metric`, the number the runner compares ({} when none).
      error: a one-line reason when not ok, else None.
      runs: the metric of each successful run, in order.
      stdout_tail: the last ~4 KB of the last run's stdout.
      stderr_tail: the last ~4 KB of the last run's stderr.
      duration: seconds spent in all runs.
      rejection: the evaluator's own `error` beside a metric: the candidate is invalid, so it is rejected
        (never kept) rather than counted as an error ('' when none). With `evaluation-stages`, also why a
        stage rejected the candidate without a metric (its `error`, or a failing exit it declares a rejection).
      feedback: the report's `feedback` (and `log_tail`) text of the last run ('' when none).
      channel: where the report was read: `file` ($AUTOLOOP_RESULT) or `stdout`.
      stopped: why a stage of `evaluation-stages` stopped the candidate before the last (`stage 1 of 2: …`), else ''.
      stages: each stage run, in order: (number, seconds, passed); () without stages.
      tampered: the protected files the evaluation changed, and the stage that did ('' when none): an error.
    """

    ok: bool
    metric: float | None
    metrics: Mapping[str, Any]
    error: str | None
    runs: tuple[float, ...]
    stdout_tail: str
    stderr_tail: str
    duration: float
    rejection: str = ""
    feedback: str = ""
    channel: str = STDOUT
    stopped: str = ""
    stages: tuple[tuple[int, float, bool], ...] = ()
    tampered: str = ""
