"""Tests for github_render.py: the issue, status, iteration, PR and completion bodies."""

from __future__ import annotations

from datetime import datetime, timezone

from test_github import PROGRAM, status_view  # shared helpers, found via tests/ on sys.path

from autoloop_py.github.render import (
    DISCLOSURE,
    STATUS_MARKER,
    ProgramView,
    improvement_text,
    pr_title,
    render_completion,
    render_issue,
    render_iteration,
    render_pull_request,
    render_status,
    with_disclosure,
)
from autoloop_py.loop.iteration.iteration import IterationOutcome
from autoloop_py.state.machine import MachineState

# ---------------------------------------------------------------- bodies


def pr_view(best: float, initial: float, change: str, iteration: int, issue: int) -> ProgramView:
    machine = MachineState(best_metric=best, initial_metric=initial)
    return ProgramView(PROGRAM, "score", machine, issue=issue, latest_change=change, latest_iteration=iteration)


def test_every_body_carries_the_disclosure() -> None:
    bodies = [
        render_issue(PROGRAM, "Make it faster."),
        render_status(status_view(3, 0.8, 11)),
        render_iteration(IterationOutcome(PROGRAM, 3, "pending-ci", "cache", 0.8, 0.7, "abc1234")),
        render_pull_request(pr_view(0.8, 0.5, "cache", 3, 4)),
        render_completion(ProgramView(PROGRAM, "score", MachineState(best_metric=0.97), target_metric=0.95)),
    ]
    assert all(body.count(DISCLOSURE) == 1 and body.endswith("\n") for body in bodies)


def test_status_dashboard_table() -> None:
    machine = MachineState(datetime(2025, 1, 2, 3, 4, tzinfo=timezone.utc), 7, 80.0, 100.0, paused=True,
                           pause_reason="ci-fix-exhausted: tests | lint",
                           recent_statuses=("accepted", "rejected", "pending-ci"))
    view = ProgramView(PROGRAM, "latency_ms", machine, "lower", 50.0, 11,
                       run_url="https://github.com/octo/widgets/actions/runs/9")
    text = render_status(view)
    assert text.startswith(STATUS_MARKER + "\n")
    for row in ("| Status | paused: ci-fix-exhausted: tests \\| lint |", "| Iterations | 7 |",
                "| Best metric | 80 |", "| Initial metric | 100 |", "| Improvement | -20 (-20.0%), better |",
                "| Target metric | 50 |", "| Last run | 2025-01-02 03:04 UTC |", "| Recent statuses | ✅ ❌ ⏳ |",
                "| Pull request | #11 |", "| Run | [Run](https://github.com/octo/widgets/actions/runs/9) |"):
        assert row in text


def test_a_pause_reason_quoting_an_error_is_inert_in_the_dashboard() -> None:
    reason = "3 consecutive errors: @octocat <img src=x> Closes #9 [x](javascript:alert(1)) \x1b]0;t\x07"
    text = render_status(ProgramView(PROGRAM, "score", MachineState(paused=True, pause_reason=reason)))
    cell = "paused: 3 consecutive errors: `@octocat` &lt;img src=x&gt; Closes `#9` x (`javascript:alert(1`))"
    assert f"| Status | {cell} |" in text, text


def test_the_issue_body_carries_no_escape_of_the_goal() -> None:
    assert "\x1b" not in render_issue(PROGRAM, "Make it faster.\x1b]0;title\x07") and "Make it faster." in render_issue(
        PROGRAM, "Make it faster.\x1b]0;title\x07"
    )


def test_iteration_comment_shows_metric_delta_and_commit() -> None:
    accepted = IterationOutcome(PROGRAM, 4, "accepted", "use a\ncache", 0.52, 0.49, "abc1234")
    text = render_iteration(accepted, "https://run/4")
    assert "### ✅ Iteration 4: Accepted" in text
    assert "- **Change**: use a cache" in text
    assert "- **Metric**: 0.52 (previous best: 0.49, delta: +0.03)" in text
    assert "- **Commit**: abc1234" in text and "[Run](https://run/4)" in text
    failed = render_iteration(IterationOutcome(PROGRAM, 5, "error", "x", None, None, reason="Traceback: boom"))
    assert "- **Metric**: —" in failed and "Commit" not in failed and "Traceback: boom" in failed


def test_pr_body_and_completion_text() -> None:
    body = render_pull_request(pr_view(0.9, 0.6, "vectorize", 5, 4))
    assert "| Current metric | 0.9 |" in body and "| Initial metric | 0.6 |" in body
    assert "| Latest accepted change | Iteration 5: vectorize |" in body and "| Program issue | #4 |" in body
    reached = ProgramView(PROGRAM, "score", MachineState(best_metric=0.97), target_metric=0.95, pr=11)
    done = render_completion(reached, 8)
    assert done.startswith("🎉 **Target metric reached!**")
    assert "`score` is 0.97 (target 0.95) at iteration 8" in done and "#11" in done


def test_improvement_text() -> None:
    assert improvement_text(None, 1.0, "higher") == "—"
    assert improvement_text(0.5, 0.5, "higher") == "0 (unchanged)"
    assert improvement_text(0.5, 0.4, "higher") == "-0.1 (-20.0%), worse"
    assert improvement_text(0.0, 0.3, "higher") == "+0.3, better"


# ---------------------------------------------------------------- titles and disclosure


def test_pr_title_is_prefixed_once() -> None:
    assert pr_title("speed", "Improve") == "[Autoloop: speed] Improve"
    assert pr_title("speed", "[Autoloop: speed] Improve") == "[Autoloop: speed] Improve"


def test_with_disclosure_appends_the_line_once() -> None:
    assert with_disclosure("body\n\n") == f"body\n\n{DISCLOSURE}\n"
    assert with_disclosure(with_disclosure("body")) == with_disclosure("body")


def test_status_dashboard_shows_each_models_figures() -> None:
    models = ({"model": "openai/good", "calls": "9", "accepted": "9 (100%)", "improvement": "9",
               "spend": "1800 tokens, $0.0027"},
              {"model": "openai/b|d", "calls": "3", "accepted": "0 (0%)", "improvement": "0", "spend": "600 tokens"})
    text = render_status(ProgramView(PROGRAM, "score", MachineState(iteration_count=12), models=models))
    assert "| Model | Calls | Accepted | Improvement | Spend |\n|-------|" in text
    assert "| `openai/good` | 9 | 9 (100%) | 9 | 1800 tokens, $0.0027 |" in text
    assert "| `openai/b\\|d` | 3 | 0 (0%) | 0 | 600 tokens |" in text
    assert "| Model |" not in render_status(ProgramView(PROGRAM, "score", MachineState(iteration_count=12)))
