"""CI checks of a commit reduced to one verdict: success, failure, pending or none, and the first error line."""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Sequence

from autoloop_py.loop.record.ci_gate import CheckResult
from autoloop_py.state.parts import one_line, trim

FAILED_CONCLUSIONS = ("failure", "cancelled", "timed_out", "action_required", "startup_failure", "stale")
PASSED_CONCLUSIONS = ("success", "neutral", "skipped")
PENDING_STATES = ("queued", "in_progress", "waiting", "requested", "pending")
ERROR_LINE_LIMIT = 200
# Words of failure, or an error code such as E501 or TS2322 (upstream's "top error code").
_ERROR_RE = re.compile(r"error|fail|exception|traceback|assert|fatal|panic|\b(?-i:[A-Z]{1,4}\d{3,5})\b", re.IGNORECASE)
_DECORATION = " \t#>*`-_|"


class Check(NamedTuple):
    """A check run of a commit; a plain `(name, status, conclusion)` tuple is one too.

    A NamedTuple rather than a dataclass so that callers may pass bare tuples to `reduce_checks`.
    """

    name: str
    status: str | None
    conclusion: str | None
    summary: str = ""


def reduce_checks(
    check_runs: Sequence[tuple[str, str | None, str | None] | Check],
    statuses: Sequence[tuple[str, str] | tuple[str, str, str]] = (),
) -> CheckResult:
    """Reduces check runs `(name, status, conclusion, ...)` and commit statuses `(context, state[, description])` (the
    older statuses API) to one verdict.

    Failure wins over pending, pending over success; an unknown conclusion counts as pending,
    so that nothing is accepted on a result this version cannot read.
    """
    checks = [Check(*run) for run in check_runs] + [_status_as_check(*status) for status in statuses]
    verdicts = [(check, _run_verdict(check)) for check in checks]
    if not verdicts:
        return CheckResult("none")
    failed = sorted((check for check, verdict in verdicts if verdict == "failure"), key=lambda c: c.name)
    if failed:
        first = next((first_error_line(c.summary) for c in failed if first_error_line(c.summary)), "")
        return CheckResult("failure", tuple(sorted({c.name for c in failed})), first)
    if any(verdict == "pending" for _, verdict in verdicts):
        return CheckResult("pending")
    return CheckResult("success")


def _run_verdict(run: Check) -> str:
    status = (run.status or "").lower()
    conclusion = (run.conclusion or "").lower()
    if status in PENDING_STATES or not conclusion:
        return "pending"
    if conclusion in FAILED_CONCLUSIONS:
        return "failure"
    return "success" if conclusion in PASSED_CONCLUSIONS else "pending"


def _status_as_check(context: str, state: str, description: str = "") -> Check:
    """Returns a commit status as the check run of its verdict: error and failure fail, success passes, else pending."""
    state = state.lower()
    conclusion = "failure" if state in ("failure", "error") else "success" if state == "success" else None
    return Check(context, "completed", conclusion, description)


def first_error_line(text: str | None) -> str:
    """Returns the first line of a check's output that reads like an error, else its first line of text."""
    # Markdown headings (`## Summary`) and decoration say nothing about the failure.
    lines = [line.strip(_DECORATION) for line in (text or "").splitlines() if not line.lstrip().startswith("#")]
    lines = [line for line in lines if line]
    chosen = next((line for line in lines if _ERROR_RE.search(line)), lines[0] if lines else "")
    return trim(one_line(chosen), ERROR_LINE_LIMIT)


def run_as_check(run: Any) -> Check:
    """Returns a PyGithub check run as a Check."""
    output = run.output
    parts = (output.summary, output.text, output.title) if output is not None else ()
    return Check(run.name, run.status, run.conclusion, "\n".join(part for part in parts if part))
