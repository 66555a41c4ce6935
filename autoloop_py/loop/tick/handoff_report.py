"""What the hand-off keeps of a candidate's evaluation: the report an outside agent hands in, made safe to keep.

`autoloop record --report FILE` takes the JSON object the program's evaluator wrote; `--evaluate` runs the
evaluation itself. Either way the candidate's trace row keeps the same artifacts as the loop's
(state/feedback.py), so that the next `autoloop prompt` shows them. The agent is untrusted: the file is
read up to REPORT_BYTES and must be one JSON object; its metrics keep only short values; every
text is redacted, stripped of terminal escape sequences and control characters, and cut to ARTIFACT_BYTES,
so that a row stays under gh-aw's repo-memory `max-file-size` (30 KB).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from autoloop_py.errors import AutoloopError
from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.evaluation.evaluation_report import Report, read_report
from autoloop_py.redact import Redactor
from autoloop_py.state.untrusted_text import plain

REPORT_BYTES = 256 * 1024
ARTIFACT_BYTES = 3 * 1024
# The report's other values a row keeps: at most this many, each a number, a boolean or a short JSON value.
VALUES_KEPT = 32
_NAME_CHARS = 100
_STRING_CHARS = 300


def read_report_file(path: Path, metric: str) -> Report:
    """Returns the report in the file an agent names (at most REPORT_BYTES, one JSON object), else raises."""
    if not path.is_file():
        raise AutoloopError("--report must name a regular file holding the evaluation's JSON object", path=path)
    with path.open("rb") as handle:
        data = handle.read(REPORT_BYTES + 1)
    if len(data) > REPORT_BYTES:
        raise AutoloopError(f"the report is over {REPORT_BYTES} bytes; write only the evaluation's JSON object",
                            path=path)
    report = read_report(data.decode("utf-8", errors="replace"), metric, whole=True)
    if report.error is not None and not report.metrics:
        raise AutoloopError(report.error.replace("$AUTOLOOP_RESULT", "--report"), path=path)
    return report


def kept_metrics(metrics: Mapping[str, Any], metric: str, value: float | None, redactor: Redactor) -> dict[str, Any]:
    """Returns the metrics a row keeps of a report: the metric, then up to VALUES_KEPT short values (any JSON)."""
    kept: dict[str, Any] = {}
    for name, item in metrics.items():
        if len(kept) >= VALUES_KEPT:
            break
        if name == metric or not isinstance(name, str) or len(name) > _NAME_CHARS:
            continue
        if isinstance(item, bool) or (isinstance(item, (int, float)) and math.isfinite(float(item))):
            kept[safe_text(name, redactor)] = item
        elif isinstance(item, (str, list, dict)) and len(json.dumps(item, ensure_ascii=False)) <= _STRING_CHARS:
            kept[safe_text(name, redactor)] = _cleaned(item, redactor)
    if value is not None:
        kept[metric] = value
    return kept


def _cleaned(value: Any, redactor: Redactor) -> Any:
    """Returns a JSON value with each of its strings (keys too) made safe (safe_text)."""
    if isinstance(value, str):
        return safe_text(value, redactor)
    if isinstance(value, list):
        return [_cleaned(item, redactor) for item in value]
    if isinstance(value, dict):
        return {safe_text(str(key), redactor): _cleaned(item, redactor) for key, item in value.items()}
    return value


def kept_artifacts(artifacts: Mapping[str, str], redactor: Redactor) -> dict[str, str]:
    """Returns the artifacts a row keeps: each redacted, without control characters, cut to ARTIFACT_BYTES."""
    kept = {}
    for key, text in artifacts.items():
        safe = safe_text(text, redactor)
        # A tail keeps its end, the others their beginning.
        data = safe.encode("utf-8")
        if len(data) > ARTIFACT_BYTES:
            cut = data[-ARTIFACT_BYTES:] if key.endswith("_tail") else data[:ARTIFACT_BYTES]
            safe = cut.decode("utf-8", errors="ignore")
        if safe.strip():
            kept[key] = safe
    return kept


def result_of_report(report: Report) -> EvaluationResult:
    """Returns the evaluation an agent's report describes (its metric, error, rejection and feedback)."""
    ok = report.metric is not None
    return EvaluationResult(ok, report.metric, dict(report.metrics), None if ok else report.error or "no metric",
                            (), "", "", 0.0, rejection=report.rejection, feedback=report.feedback)


def result_of_claim(metric: float | None, error: str | None) -> EvaluationResult:
    """Returns the evaluation an agent claims with `--metric` or `--error` (no report)."""
    ok = error is None and metric is not None
    return EvaluationResult(ok, metric if ok else None, {}, None if ok else error or "no metric reported",
                            (), "", "", 0.0)


def safe_text(text: str, redactor: Redactor) -> str:
    """Returns text without control characters, then redacted (a control character inside a secret hides it no more)."""
    return redactor.text(plain(text))
