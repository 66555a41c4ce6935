"""Tests for autoloop_py.github.checks: a commit's check runs and statuses reduced to one verdict."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.github.checks import Check, first_error_line, reduce_checks
from autoloop_py.loop.record.ci_gate import CheckResult


@given(
    st.lists(st.tuples(st.text(max_size=5), st.none() | st.text(max_size=12), st.none() | st.text(max_size=16))),
    st.lists(st.tuples(st.text(max_size=5), st.sampled_from(["success", "failure", "error", "pending", "odd"]))),
)
def test_reduce_checks_always_gives_one_of_four_states(
    runs: list[tuple[str, str | None, str | None]], statuses: list[tuple[str, str]]
) -> None:
    summary = reduce_checks(runs, statuses)
    assert summary.state in ("success", "failure", "pending", "none")
    assert (summary.state == "none") == (not runs and not statuses)
    assert bool(summary.failing) == (summary.state == "failure")


@pytest.mark.parametrize(
    ("runs", "statuses", "state"),
    [
        ([], [], "none"),
        ([("test", "completed", "success")], [], "success"),
        ([("a", "completed", "neutral"), ("b", "completed", "skipped")], [("ci/x", "success")], "success"),
        *[([("test", "completed", c)], [], "failure") for c in
          ("failure", "cancelled", "timed_out", "action_required", "startup_failure", "stale", "FAILURE")],
        *[([("test", s, None)], [], "pending") for s in ("queued", "in_progress", "waiting", "requested", "pending")],
        ([("test", "completed", None)], [], "pending"),
        ([("test", "completed", "some_new_conclusion")], [], "pending"),
        ([("a", "completed", "success"), ("b", "in_progress", None)], [], "pending"),
        ([("a", "completed", "failure"), ("b", "in_progress", None)], [], "failure"),
        ([("a", "completed", "success")], [("ci/x", "pending")], "pending"),
        ([("a", "completed", "success")], [("ci/x", "error")], "failure"),
        ([], [("ci/x", "failure")], "failure"),
    ],
)
def test_reduce_checks(runs: list[tuple[str, str, str | None]], statuses: list[tuple[str, str]], state: str) -> None:
    assert reduce_checks(runs, statuses).state == state


def test_reduce_checks_names_the_failures_and_the_first_error() -> None:
    runs = [
        Check("lint", "completed", "failure", "## Summary\nE501 line too long"),
        Check("build", "completed", "failure", ""),
        Check("docs", "completed", "success", "error: not counted"),
    ]
    summary = reduce_checks(runs, [("ci/lint", "failure")])
    assert summary == CheckResult("failure", ("build", "ci/lint", "lint"), "E501 line too long")


def test_first_error_line() -> None:
    assert first_error_line("Ran 10 tests\n\n**FAILED** tests/test_x.py::test_y - AssertionError") == (
        "FAILED** tests/test_x.py::test_y - AssertionError"
    )
    assert first_error_line("### Build summary\nall good") == "all good"
    assert first_error_line("## Lint\nsrc/app.ts(3,7): TS2322 bad type") == "src/app.ts(3,7): TS2322 bad type"
    assert first_error_line("Summary\nTS is fine") == "Summary"
    assert first_error_line(None) == ""
    assert len(first_error_line("error " * 100)) == 200
