"""`autoloop publish DIR`: check the outcome a read-only job proposed, then commit, push, record and comment."""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import AbstractSet, Any

from rich.console import Console

from autoloop_py.commands.common import load_all, repo_root, shown, subparser
from autoloop_py.commands.run import github_settings, print_outcome, run_url
from autoloop_py.errors import AutoloopError
from autoloop_py.github import ci
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.record import publish_guard as guard
from autoloop_py.loop.record.outcome import Outcome, OutcomeError, read_outcome
from autoloop_py.loop.record.publishing import check_outcome
from autoloop_py.loop.record.recording import load_state
from autoloop_py.program.model import Program, find_program
from autoloop_py.state.memory import MemoryStore


def add_parser(commands: Any) -> None:
    """Registers `autoloop publish`."""
    parser = subparser(
        commands, "publish",
        "autoloop publish outcome/ --ci   (a tick of parallel slots: autoloop publish slot-0/ slot-1/ slot-2/ --ci)",
    )
    parser.add_argument(
        "outcome_dirs", type=Path, nargs="+", metavar="DIR",
        help="the outcome directory; several: the slots of one tick (`run --slot I/K`), recorded as one update "
        "with the best improving candidate on the program branch",
    )
    parser.add_argument("--base-branch", help="branch program branches start from (default: origin's HEAD branch, "
                        "else main, else master, else the current one)")
    parser.add_argument("--program", metavar="NAME",
                        help="the program this job publishes (the workflow's matrix): an outcome of another is refused")
    parser.add_argument(
        "--model", action="append", default=[], metavar="NAME",
        help="a model the proposing run was given (`run --model`) besides the program's `model:`/`models:` and "
        "AUTOLOOP_MODEL: an outcome's model use naming any other is refused",
    )
    parser.add_argument(
        "--not-before", type=_moment, metavar="TIME",
        help="when the run started (ISO time or Unix seconds; the workflow passes its plan job's start): a record "
        f"older than that is refused (default: {guard.DEFAULT_WINDOW.days} days before now)",
    )
    parser.add_argument(
        "--ci",
        action="store_true",
        help="as a GitHub Actions job: settle the CI gate, update the program issue, status comment and draft PR "
        "(needs GITHUB_REPOSITORY and GITHUB_TOKEN)",
    )
    parser.set_defaults(handler=cmd_publish)


def cmd_publish(args: argparse.Namespace, console: Console) -> int:
    """Reads and checks the outcomes, publishes those that pass, and prints what was recorded.

    A slot of a tick whose outcome is refused stops alone: the others are published, then the refusal is the error.
    """
    root = repo_root(args.repo)
    if args.ci and not args.program:
        raise AutoloopError("--ci needs --program (the workflow's matrix): the program an outcome names is the "
                            "proposing job's word, which publish does not take")
    read = {directory: _read(directory) for directory in args.outcome_dirs}
    programs, problems = load_all(root, with_issues=args.ci)
    for problem in problems:
        console.print(f"[yellow]skipping a broken program:[/] {problem}")
    first = next((o for o in read.values() if isinstance(o, Outcome)), None)
    if first is None and not args.program:
        raise next(iter(read.values()))  # type: ignore[misc]  # nothing names the program: the reader's own error
    program = find_program(programs, args.program or first.program)  # type: ignore[union-attr]
    window = guard.publish_window(datetime.now(timezone.utc), args.not_before)
    models = guard.program_models(program, os.environ) | set(args.model)
    options = RunOptions(run_url=run_url(), base_branch=args.base_branch)
    outcomes, refused = _admitted(root, program, read, window, models, options.budget)
    if not outcomes or (refused and len(read) == 1):
        raise OutcomeError(f"refusing the outcome of '{program.name}', nothing was written: " + " | ".join(refused))
    _publish(root, program, outcomes, options, len(read) > 1, args.ci, console)
    if refused:
        raise OutcomeError(f"refusing {len(refused)} of the {len(read)} outcomes of '{program.name}' (the others were "
                           "published): " + " | ".join(refused))
    return 0


def _read(directory: Path) -> Outcome | OutcomeError:
    try:
        return read_outcome(directory)
    except OutcomeError as err:
        return err


def _admitted(
    root: Path, program: Program, read: dict[Path, Outcome | OutcomeError], window: guard.PublishWindow,
    models: AbstractSet[str], budget: int,
) -> tuple[list[Outcome], list[str]]:
    """Returns the outcomes publish may write, and why each other one is refused (its directory, then the fields).

    Checked before anything is written, to git or to GitHub, against the state as fetched now (publishing checks
    again under the program's lock): forged fields, bullets, iteration numbers, paths, and records that would
    break the state file.
    """
    memory = MemoryStore(root)
    memory.sync()
    state = load_state(memory, program, budget)
    admitted, refused = [], []
    for directory, outcome in read.items():
        if isinstance(outcome, OutcomeError):
            refused.append(f"{directory}: {outcome}")
            continue
        found = guard.field_problems(outcome, program.name, window)
        found += guard.bullet_problems(outcome, program.config.objectives, models)
        found += guard.numbered_claims([outcome], state)
        if not found and outcome.record is not None:
            found = guard.state_problems(state, program, [outcome.record], budget)
        if not found:
            try:
                check_outcome(root, program, outcome)
            except OutcomeError as err:
                found = [str(err).partition("nothing was written: ")[2] or str(err)]
        if found:
            refused.append(f"{directory}: " + "; ".join(found))
        else:
            admitted.append(outcome)
    return admitted, refused


def _moment(text: str) -> datetime:
    """Returns the time of --not-before: Unix seconds or an ISO time (UTC when it names no zone)."""
    try:
        when = datetime.fromtimestamp(int(text), timezone.utc) if text.strip().isdigit() else \
            datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a time (ISO, e.g. 2026-11-21T16:40:00Z, or Unix seconds)")
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _publish(
    root: Path, program: Program, outcomes: list[Outcome], options: RunOptions, tick: bool, with_ci: bool,
    console: Console,
) -> None:
    """Publishes one outcome, or the slots of one tick as one update, and prints each record."""
    if with_ci:
        result = ci.publish_ci(root, program, outcomes, options, github_settings(), tick=tick)
        if result.message:
            console.print(f"CI: {shown(result.message)}")
        done = result.accounts
    else:
        done, _ = ci.record_outcomes(root, program, outcomes, budget=options.budget, run_url=options.run_url,
                                     base_branch=options.base_branch, tick=tick)
    if not done:
        console.print(f"{program.name}: no iteration to record ({shown(outcomes[0].waiting or 'nothing ran')})")
    for account in done:
        print_outcome(account, console)