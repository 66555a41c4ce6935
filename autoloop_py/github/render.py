"""Bodies autoloop writes on GitHub: the program issue, status dashboard, iteration, draft PR and completion texts.

Pure functions over frozen views; every body is rendered from `templates/github/*.md.j2` and carries the AI
disclosure line. github.py posts them; this module never touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Mapping

from autoloop_py.render import render
from autoloop_py.state.untrusted_text import github_safe, plain
from autoloop_py.state.parts import format_number, one_line, utc

DISCLOSURE = "🤖 *This was written by autoloop, an automated AI improvement loop; review it as you would any AI output.*"
STATUS_MARKER = "<!-- AUTOLOOP:STATUS -->"
_STATUS_ICONS = {"accepted": "✅", "rejected": "❌", "error": "⚠️", "pending-ci": "⏳", "ci-fix-exhausted": "🛑"}
_STATUS_WORDS = {
    "accepted": "Accepted",
    "rejected": "Rejected",
    "error": "Error",
    "pending-ci": "Pending CI",
    "ci-fix-exhausted": "CI fix exhausted",
}


# ---------------------------------------------------------------- views


@dataclass(frozen=True)
class StatusView:
    """What the status comment (the dashboard) shows.

    Attributes:
      program: the program name.
      status: one word or phrase, e.g. "active", "paused: consecutive errors", "completed".
      iterations: iterations recorded so far.
      metric_name: the metric's name.
      direction: "higher" or "lower" (is better).
      best_metric: the best metric so far.
      initial_metric: the metric of the unchanged code.
      target_metric: the halting target, None when open-ended.
      last_run: when the last iteration finished.
      recent_statuses: the last statuses, oldest first.
      pr: the draft PR number, None before the first accepted iteration.
      run_url: the link to the Actions run that wrote the comment.
      charts: Mermaid blocks of the run (metric per candidate, lineage of the best); '' for none.
      models: per model, its figures (model, calls, accepted, improvement, spend: state/model_stats.summary_rows).
      holdout_metric: the best's value on the held-out evaluation (`evaluation-holdout`), None when not measured.
      stale: why the best no longer holds on today's default branch ('' when it holds).
    """

    program: str
    status: str
    iterations: int
    metric_name: str
    direction: str = "higher"
    best_metric: float | None = None
    initial_metric: float | None = None
    target_metric: float | None = None
    last_run: datetime | None = None
    recent_statuses: tuple[str, ...] = ()
    pr: int | None = None
    run_url: str | None = None
    charts: str = ""
    models: tuple[Mapping[str, str], ...] = ()
    holdout_metric: float | None = None
    stale: str = ""


@dataclass(frozen=True)
class IterationView:
    """What one iteration's comment shows.

    Attributes:
      iteration: the iteration number.
      status: "accepted", "rejected", "error", "pending-ci" or "ci-fix-exhausted".
      change: the one-line description of the change.
      metric: the measured metric, None when the evaluation failed.
      previous_best: the best metric before this iteration.
      commit: the commit sha of an accepted (or pending-ci) change.
      run_url: the link to the Actions run.
      notes: free text, e.g. the error.
    """

    iteration: int
    status: str
    change: str
    metric: float | None = None
    previous_best: float | None = None
    commit: str | None = None
    run_url: str | None = None
    notes: str = ""


@dataclass(frozen=True)
class PullRequestView:
    """What the program's draft PR body shows.

    Attributes:
      program: the program name.
      metric_name: the metric's name.
      direction: "higher" or "lower" (is better).
      current_metric: the best accepted metric.
      initial_metric: the metric of the unchanged code.
      latest_change: the latest accepted change, one line.
      latest_iteration: the iteration that accepted it.
      issue: the program issue number.
      run_url: the link to the Actions run that last updated the PR.
      charts: Mermaid blocks of the run (metric per candidate, lineage of the best); '' for none.
      holdout_metric: the best's value on the held-out evaluation, None when not measured.
      stale: why the PR's code no longer reaches its recorded metric on today's default branch ('' when it does).
    """

    program: str
    metric_name: str
    direction: str
    current_metric: float | None
    initial_metric: float | None
    latest_change: str
    latest_iteration: int | None = None
    issue: int | None = None
    run_url: str | None = None
    charts: str = ""
    holdout_metric: float | None = None
    stale: str = ""


@dataclass(frozen=True)
class CompletionView:
    """What the target-reached comment shows.

    Attributes:
      program: the program name.
      metric_name: the metric's name.
      value: the best metric, which reached the target.
      target: the target metric.
      iteration: the iteration that reached it.
      pr: the draft PR number holding the changes.
      run_url: the link to the Actions run.
    """

    program: str
    metric_name: str
    value: float
    target: float
    iteration: int | None = None
    pr: int | None = None
    run_url: str | None = None


# ---------------------------------------------------------------- titles


def issue_title(program: str) -> str:
    """Returns the title of a program's issue."""
    return f"[Autoloop: {program}]"


def pr_title(program: str, title: str) -> str:
    """Returns a PR title starting with `[Autoloop: <name>]` exactly once."""
    prefix, title = issue_title(program), plain(title)
    return title if title.startswith(prefix) else f"{prefix} {title}".strip()


def with_disclosure(markdown: str) -> str:
    """Returns the text with the AI disclosure line at its end, unless it already carries it."""
    if DISCLOSURE in markdown:
        return markdown
    return f"{markdown.rstrip()}\n\n{DISCLOSURE}\n"


# ---------------------------------------------------------------- rendering


def render_issue(program: str, goal: str) -> str:
    """Renders the body of a program issue."""
    return render("github/issue.md.j2", program=program, goal=plain(goal).strip(), disclosure=DISCLOSURE)


def render_status(view: StatusView) -> str:
    """Renders the status comment (the dashboard), marker first."""
    recent = " ".join(_STATUS_ICONS.get(s, s) for s in view.recent_statuses)
    return render(
        "github/status.md.j2",
        marker=STATUS_MARKER,
        view=view,
        best=_metric(view.best_metric),
        initial=_metric(view.initial_metric),
        target=_metric(view.target_metric) if view.target_metric is not None else None,
        improvement=improvement_text(view.initial_metric, view.best_metric, view.direction),
        holdout=holdout_text(view.best_metric, view.holdout_metric),
        stale=_cell(github_safe(view.stale)),
        last_run=utc(view.last_run).strftime("%Y-%m-%d %H:%M UTC") if view.last_run else "—",
        recent=recent or "—",
        models=[{key: _cell(value) for key, value in row.items()} for row in view.models],
        status=_cell(github_safe(view.status)),  # a pause reason quotes an error note: evaluator output
        disclosure=DISCLOSURE,
    )


def render_iteration(view: IterationView) -> str:
    """Renders the comment posted for one iteration."""
    return render(
        "github/iteration.md.j2",
        view=view,
        icon=_STATUS_ICONS.get(view.status, "•"),
        label=_STATUS_WORDS.get(view.status, view.status),
        change=one_line(github_safe(view.change)) or "—",
        metric=_metric(view.metric),
        previous=_metric(view.previous_best),
        delta="—" if view.metric is None or view.previous_best is None else _signed(view.metric - view.previous_best),
        notes=github_safe(view.notes).strip(),
        disclosure=DISCLOSURE,
    )


def render_pull_request(view: PullRequestView) -> str:
    """Renders the body of the program's draft PR."""
    return render(
        "github/pull_request.md.j2",
        view=view,
        current=_metric(view.current_metric),
        initial=_metric(view.initial_metric),
        improvement=improvement_text(view.initial_metric, view.current_metric, view.direction),
        holdout=holdout_text(view.current_metric, view.holdout_metric),
        stale=_cell(github_safe(view.stale)),
        change=_cell(github_safe(view.latest_change)) or "—",
        disclosure=DISCLOSURE,
    )


def render_completion(view: CompletionView) -> str:
    """Renders the target-reached comment."""
    return render(
        "github/completion.md.j2",
        view=view,
        value=_metric(view.value),
        target=_metric(view.target),
        disclosure=DISCLOSURE,
    )


def holdout_text(search: float | None, held: float | None) -> str | None:
    """Returns the best's held-out value and its gap to the search metric (None when it has none)."""
    if held is None:
        return None
    if search is None:
        return _metric(held)
    return f"{_metric(held)} (search {_metric(search)}, gap {_signed(search - held)})"


def improvement_text(initial: float | None, best: float | None, direction: str) -> str:
    """Returns `best - initial` signed, with its percentage of |initial| and whether that is better."""
    if initial is None or best is None:
        return "—"
    delta = _rounded(best - initial)
    if delta == 0:
        return "0 (unchanged)"
    better = (delta > 0) == (direction == "higher")
    percent = f" ({delta / abs(initial) * 100:+.1f}%)" if initial else ""
    return f"{_signed(delta)}{percent}, {'better' if better else 'worse'}"


def _rounded(value: float) -> float:
    # Rounding to 12 digits hides float noise such as 0.52 - 0.49 = 0.030000000000000027.
    return float(f"{value:.12g}")


def _signed(value: float) -> str:
    value = _rounded(value)
    return ("-" if value < 0 else "+") + format_number(abs(value))


def _metric(value: float | None) -> str:
    return "—" if value is None else format_number(_rounded(value))


def _cell(text: str) -> str:
    return one_line(text).replace("|", "\\|")
