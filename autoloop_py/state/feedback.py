"""Evaluator feedback: what an evaluation said about a candidate beside its metric, kept with it and shown to the model.

The artifacts (EvoTrace's name) are kept in the candidate's trace row, never in the state file: the
report's `feedback` text, the reason it was rejected or failed, and the ends of its stdout and stderr.
A prompt shows them as data, each candidate's part cut to the program's `feedback-bytes`, terminal escape sequences
and control characters stripped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from autoloop_py.render import render
from autoloop_py.state.untrusted_text import plain

# Each artifact is kept up to this many characters in the trace (a prompt shows less: `feedback-bytes`).
STORED_CHARS = 8 * 1024
FIELDS = ("feedback", "error", "stdout_tail", "stderr_tail")
# The report's keys that are shown apart from its other values (loop/evaluation/evaluation_report.py reads them).
_NOT_VALUES = frozenset({"error", "feedback", "log_tail"})
_VALUE_CHARS = 300
_TAIL_LINES = 20
CUT_NOTE = "\n[… cut at feedback-bytes]\n"


def artifacts_of(feedback: str = "", error: str = "", stdout_tail: str = "", stderr_tail: str = "") -> dict[str, str]:
    """Returns the artifacts kept for a candidate: the non-empty fields, each its last STORED_CHARS (error: first)."""
    found = {"feedback": feedback[:STORED_CHARS], "error": error[:STORED_CHARS],
             "stdout_tail": stdout_tail[-STORED_CHARS:], "stderr_tail": stderr_tail[-STORED_CHARS:]}
    return {key: text for key, text in found.items() if text.strip()}


@dataclass(frozen=True)
class FeedbackView:
    """One candidate's feedback as a prompt shows it.

    Attributes:
      who: which candidate, in words (`the parent, #4`, `an earlier attempt on this parent, it12`).
      status: accepted, rejected or failed.
      metric: the metric's name and value as text ('' when it has none).
      error: why it was rejected or failed ('' when neither).
      feedback: the evaluator's feedback text.
      values: the report's other named values, as (name, JSON text).
      stderr: the end of stderr, shown for a candidate that was not accepted ('' otherwise).
    """

    who: str
    status: str
    metric: str = ""
    error: str = ""
    feedback: str = ""
    values: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    stderr: str = ""


def view_of(
    who: str, status: str, metrics: Mapping[str, Any], artifacts: Mapping[str, Any], metric: str | None
) -> FeedbackView | None:
    """Returns what a prompt shows of one candidate's evaluation (None when it said nothing beside its metric)."""
    texts = {key: plain(str(artifacts.get(key) or "")) for key in FIELDS}
    values = tuple(
        (plain(str(name)), _value_text(value))
        for name, value in sorted(metrics.items(), key=lambda item: str(item[0]))
        if name != metric and name not in _NOT_VALUES
    )
    stderr = "" if status == "accepted" else "\n".join(texts["stderr_tail"].strip().splitlines()[-_TAIL_LINES:])
    if not (texts["feedback"].strip() or texts["error"].strip() or values or stderr):
        return None
    shown = "" if metric is None or metric not in metrics else f"{metric} {_value_text(metrics[metric])}"
    return FeedbackView(who, status, shown, texts["error"].strip(), texts["feedback"].strip(), values, stderr)


def render_feedback(view: FeedbackView, cap_bytes: int) -> str:
    """Returns one candidate's feedback text, cut to cap_bytes of UTF-8 (a note says where it was cut)."""
    text = render("evaluator_feedback.md.j2", view=view)
    return cap_text(text, cap_bytes)


def cap_text(text: str, cap_bytes: int) -> str:
    """Returns text cut to at most cap_bytes of UTF-8 (whole characters), with a note when it was cut."""
    data = text.encode("utf-8")
    if len(data) <= cap_bytes:
        return text
    room = max(0, cap_bytes - len(CUT_NOTE.encode("utf-8")))
    return data[:room].decode("utf-8", errors="ignore").rstrip() + CUT_NOTE


def _value_text(value: Any) -> str:
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(value)
    text = plain(text)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"
