"""`autoloop run`: run iterations of the most overdue (or a named) program."""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from autoloop_py import ci, github, schedule
from autoloop_py.commands.common import format_metric, load_all, machines, readable_states, repo_root, subparser
from autoloop_py.errors import AutoloopError
from autoloop_py.iteration import IterationOutcome, RunOptions, run_iteration
from autoloop_py.program import Program, find_program, program_name
from autoloop_py.sandbox.runner import make_non_dumpable, sigterm_interrupts

_MARKS = {"accepted": "✅", "rejected": "❌", "error": "⚠️", "pending-ci": "⏳"}


def add_parser(commands: Any) -> None:
    """Registers `autoloop run`."""
    parser = subparser(
        commands,
        "run",
        "Run iterations: propose a change, evaluate it, keep it only if the metric improved.",
        "autoloop run --program function_minimization --iterations 10 --proposer tune",
    )
    parser.add_argument("--program", help="run this program (default: the most overdue; env AUTOLOOP_PROGRAM)")
    parser.add_argument("--iterations", type=int, default=1, metavar="N", help="how many iterations (default 1)")
    parser.add_argument(
        "--proposer",
        choices=("tune", "llm", "agent"),
        help="tune: offline numeric search (default); llm: litellm model; agent: external coding agent",
    )
    parser.add_argument("--model", help="litellm model for --proposer llm (else `model:` or AUTOLOOP_MODEL)")
    parser.add_argument("--agent-command", help="command for --proposer agent (else AUTOLOOP_AGENT_COMMAND)")
    parser.add_argument("--dry-run", action="store_true", help="propose and evaluate, but record nothing")
    parser.add_argument(
        "--isolation",
        choices=("auto", "bwrap", "none"),
        help="confine evaluations and agents: bwrap (bubblewrap sandbox), none (limits only), auto (bwrap when it "
        "works; default: AUTOLOOP_ISOLATION, else the program's `isolation:`)",
    )
    parser.add_argument("--base-branch", help="branch program branches start from (default: origin's HEAD or main)")
    parser.add_argument(
        "--ci",
        action="store_true",
        help="run as a GitHub Actions job: CI-gated acceptance, program issue, status comment, draft PR "
        "(needs GITHUB_REPOSITORY and GITHUB_TOKEN)",
    )
    parser.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    """Runs the requested iterations and prints a summary; exit 1 if nothing could run."""
    if args.iterations < 1:
        raise AutoloopError("--iterations must be at least 1")
    # Other processes of this user (an evaluation run without bwrap) must not read our environment.
    make_non_dumpable()
    root = repo_root(args.repo)
    programs, problems = load_all(root, with_issues=args.ci)
    forced = args.program or os.environ.get("AUTOLOOP_PROGRAM", "").strip() or None
    for problem in problems:
        if forced and problem.path is not None and program_name(problem.path) == forced:
            raise problem
        console.print(f"[yellow]skipping a broken program:[/] {problem}")
    options = RunOptions(
        proposer=args.proposer,
        model=args.model,
        agent_command=args.agent_command,
        dry_run=args.dry_run,
        run_url=_run_url(),
        base_branch=args.base_branch,
        isolation=args.isolation,
    )
    settings = github.from_environment(os.environ) if args.ci else None
    if args.ci and settings is None:
        raise AutoloopError("--ci needs GITHUB_REPOSITORY and GITHUB_TOKEN in the environment")
    with sigterm_interrupts():
        outcomes = _loop(root, programs, forced, args.iterations, options, console, settings)
    _summary(outcomes, console)
    # In CI, waiting for checks or a CI pause is a normal end of the job, not a failure.
    return 0 if outcomes or args.ci else 1


def _loop(
    root: Path,
    programs: list[Program],
    forced: str | None,
    count: int,
    options: RunOptions,
    console: Console,
    settings: github.GitHubSettings | None = None,
) -> list[IterationOutcome]:
    outcomes: list[IterationOutcome] = []
    deadline = _deadline()
    with _progress(console, count) as progress:
        task = progress.add_task("iterating", total=count)
        for i in range(count):
            if deadline is not None and time.monotonic() > deadline:
                console.print("stopping: the job's time is nearly up")
                break
            program = _pick(root, programs, forced, first=(i == 0), console=console)
            if program is None:
                break
            progress.update(task, description=f"{program.name} · iteration")
            outcome = _one(root, program, options, settings, console)
            if outcome is None:
                break
            outcomes.append(outcome)
            console.print(_line(outcome))
            progress.advance(task)
    return outcomes


def _one(
    root: Path, program: Program, options: RunOptions, settings: github.GitHubSettings | None, console: Console
) -> IterationOutcome | None:
    """Runs one iteration, through the GitHub flow when settings are given."""
    if settings is None:
        return run_iteration(root, program, options, datetime.now(timezone.utc))
    result = ci.run_ci(root, program, options, settings)
    if result.message:
        console.print(f"CI: {result.message}")
    return result.outcome


def _deadline() -> float | None:
    """Returns when to stop starting iterations: 5 minutes before AUTOLOOP_JOB_TIMEOUT_MINUTES runs out."""
    minutes = os.environ.get("AUTOLOOP_JOB_TIMEOUT_MINUTES", "").strip()
    try:
        return time.monotonic() + max(0.0, float(minutes) - 5) * 60 if minutes else None
    except ValueError:
        raise AutoloopError(f"AUTOLOOP_JOB_TIMEOUT_MINUTES must be a number of minutes, got {minutes!r}") from None


def _pick(root: Path, programs: list[Program], forced: str | None, first: bool, console: Console) -> Program | None:
    """Returns the program to run next, or None when nothing is due (or a forced program stopped)."""
    readable = readable_states(root, programs, forced)
    states = machines(readable)
    now = datetime.now(timezone.utc)
    runnable = [p for p in programs if p.name in readable]
    plan = schedule.plan(runnable, states, now, forced)  # a forced unknown/unconfigured name raises here
    if plan.selected is None:
        console.print("nothing is due: " + (", ".join(f"{s.name} ({s.reason})" for s in plan.skipped) or "no programs"))
        return None
    reason = schedule.skip_reason(states.get(plan.selected))
    if forced and not first and reason and not reason.startswith("plateau"):
        console.print(f"stopping: {forced} is {reason}")
        return None
    return find_program(programs, plan.selected)


def _line(outcome: IterationOutcome) -> str:
    mark = _MARKS.get(outcome.status, "·")
    metric = format_metric(outcome.metric)
    best = format_metric(outcome.best_before)
    text = f"{mark} {outcome.program} · iteration {outcome.iteration} · {outcome.status} · metric {metric} (best was {best})"
    text += f" · {outcome.summary}"
    if outcome.commit:
        text += f" · commit {outcome.commit[:8]}"
    if outcome.status == "error" and outcome.reason:
        text += f"\n   {outcome.reason}"
    return text


def _summary(outcomes: list[IterationOutcome], console: Console) -> None:
    if not outcomes:
        return
    table = Table(title="autoloop run")
    for column in ("program", "iterations", "✅", "❌", "⚠️", "best before", "best now"):
        table.add_column(column)
    for name in dict.fromkeys(o.program for o in outcomes):
        mine = [o for o in outcomes if o.program == name]
        accepted = [o.metric for o in mine if o.status == "accepted"]
        table.add_row(
            name,
            str(len(mine)),
            str(len(accepted)),
            str(sum(o.status == "rejected" for o in mine)),
            str(sum(o.status == "error" for o in mine)),
            format_metric(mine[0].best_before),
            format_metric(accepted[-1] if accepted else mine[-1].best_before),
        )
    console.print(table)


def _progress(console: Console, total: int) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def _run_url() -> str | None:
    server, repo, run_id = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run_id:
        return f"{server}/{repo}/actions/runs/{run_id}"
    return None
