"""Bodies autoloop writes on GitHub: the program issue, status dashboard, iteration, draft PR and completion texts.

Pure functions over frozen views; every body is rendered from `templates/github/*.md.j2` and carries the AI
disclosure line. github.py posts them; this module never touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from autoloop_py.loop.iteration.iteration import IterationOutcome
from autoloop_py.render import render
from autoloop_py.state.machine import MachineState
from autoloop_py.state.untrusted_text import github_safe, plain
from autoloop_py.state.parts import STATUS_ICONS, STATUS_WORDS, format_number, one_line, utc

DISCLOSURE = "🤖 *This was written by autoloop, an automated AI improvement loop; review it as you would any AI output.*"
STATUS_MARKER = "<!-- AUTOLOOP:STATUS -->"


# ---------------------------------------------------------------- views


@dataclass(frozen=True)
class ProgramView:
    """What the status comment (the dashboard) and the draft PR body show of a program.

    Attributes:
      program: the program name.
      metric_name: the metric's name.
      machine: its Machine State: the best (the PR's current metric), initial and held-out metrics, why the best is
        stale, the iterations, last run and recent statuses, and whether it is paused or completed.
      direction: "higher" or "lower" (is better).
      target_metric: the halting target, None when open-ended.
      pr: the draft PR number, None before the first accepted iteration.
      issue: the program issue number.
      latest_change: the latest accepted change, one line.
      latest_iteration: the iteration that accepted it.
      run_url: the link to the Actions run that wrote the body.
      charts: Mermaid blocks of the run (metric per candidate, lineage of the best); '' for none.
      models: per model, its figures (model, calls, accepted, improvement, spend: state/model_stats.summary_rows).
    """

    program: str
    metric_name: str
    machine: MachineState
    direction: str = "higher"
    target_metric: float | None = None
    pr: int | None = None
    issue: int | None = None
    latest_change: str = "—"
    latest_iteration: int | None = None
    run_url: str | None = None
    charts: str = ""
    models: tuple[Mapping[str, str], ...] = ()


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


def render_status(view: ProgramView) -> str:
    """Renders the status comment (the dashboard), marker first."""
    machine = view.machine
    if machine.completed:
        status = "completed"
    elif machine.paused:
        status = f"paused: {machine.pause_reason or 'unknown'}"
    else:
        status = "active"
    recent = " ".join(STATUS_ICONS.get(s, s) for s in machine.recent_statuses)
    return render(
        "github/status.md.j2",
        marker=STATUS_MARKER,
        **_figures(view),
        target=_metric(view.target_metric) if view.target_metric is not None else None,
        last_run=utc(machine.last_run).strftime("%Y-%m-%d %H:%M UTC") if machine.last_run else "—",
        recent=recent or "—",
        models=[{key: _cell(value) for key, value in row.items()} for row in view.models],
        status=_cell(github_safe(status)),  # a pause reason quotes an error note: evaluator output
    )


def render_iteration(outcome: IterationOutcome, run_url: str | None = None) -> str:
    """Renders the comment posted for one iteration."""
    delta = None if outcome.metric is None or outcome.best_before is None else outcome.metric - outcome.best_before
    return render(
        "github/iteration.md.j2",
        outcome=outcome,
        run_url=run_url,
        icon=STATUS_ICONS.get(outcome.status, "•"),
        label=STATUS_WORDS.get(outcome.status, outcome.status),
        change=one_line(github_safe(outcome.summary)) or "—",
        metric=_metric(outcome.metric),
        previous=_metric(outcome.best_before),
        delta="—" if delta is None else _signed(delta),
        notes=github_safe(outcome.reason or "").strip(),
        disclosure=DISCLOSURE,
    )


def render_pull_request(view: ProgramView) -> str:
    """Renders the body of the program's draft PR."""
    return render("github/pull_request.md.j2", **_figures(view), change=_cell(github_safe(view.latest_change)) or "—")


def render_completion(view: ProgramView, iteration: int | None = None) -> str:
    """Renders the target-reached comment: the best reached the target (itself when none is set) at iteration."""
    best = view.machine.best_metric
    target = view.target_metric if view.target_metric is not None else best
    return render(
        "github/completion.md.j2", view=view, iteration=iteration, value=_metric(best), target=_metric(target),
        disclosure=DISCLOSURE,
    )


def _figures(view: ProgramView) -> dict[str, object]:
    """The template values the status comment and the PR body share: the view and its metrics, escaped."""
    best, initial = view.machine.best_metric, view.machine.initial_metric
    return {
        "view": view,
        "best": _metric(best),
        "initial": _metric(initial),
        "improvement": improvement_text(initial, best, view.direction),
        "holdout": holdout_text(best, view.machine.holdout_metric),
        "stale": _cell(github_safe(view.machine.stale_reason or "")),
        "disclosure": DISCLOSURE,
    }


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
