"""`autoloop schedule`: which programs are due, as text, JSON or a GitHub Actions matrix."""

from __future__ import annotations

import argparse
import json
import logging
import os
from datetime import datetime, timezone
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import load_all, machines, readable_states, repo_root, schedule_rank, subparser
from autoloop_py.errors import AutoloopError
from autoloop_py.loop.tick import schedule
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.runner import DEFAULT_RUNS_ON
from autoloop_py.strategies.slots import MAX_SLOTS

logger = logging.getLogger(__name__)


def add_parser(commands: Any) -> None:
    """Registers `autoloop schedule`."""
    parser = subparser(commands, "schedule", "autoloop schedule --matrix --max 4")
    # The order of due programs and a cap per tick come from `.autoloop/config.yaml` (schedule-policy,
    # max-programs-per-tick) or AUTOLOOP_SCHEDULE_POLICY.
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument("--matrix", action="store_true", help="print a GitHub Actions matrix of the due programs")
    parser.add_argument("--max", type=int, default=None, metavar="N", help="at most N programs in the matrix")
    parser.add_argument("--program", help="force this program (env AUTOLOOP_PROGRAM)")
    parser.add_argument(
        "--slots", type=int, default=None, metavar="K",
        help="with --matrix: also list (program, slot) pairs under `include`, K slots per program (or its own "
        "`parallel:`), for the workflow `autoloop init --parallel K` writes",
    )
    parser.add_argument(
        "--runs-on", metavar="LABELS", default=",".join(DEFAULT_RUNS_ON),
        help="with --matrix: the runner labels (comma-separated) of a program without its own `runs-on:` "
        "(default ubuntu-latest); each matrix entry carries its program's `runs-on` and `container`",
    )
    parser.set_defaults(handler=cmd_schedule)


def cmd_schedule(args: argparse.Namespace, console: Console) -> int:
    """Prints the plan; exit 0 when something is due, 1 when nothing is."""
    root = repo_root(args.repo)
    programs, problems = load_all(root, with_issues=True)
    for problem in problems:
        logger.warning("skipping a broken program: %s", problem)
    forced = args.program or os.environ.get("AUTOLOOP_PROGRAM", "").strip() or None
    readable = readable_states(root, programs, forced)
    runnable = [p for p in programs if p.name in readable]
    now = datetime.now(timezone.utc)
    settings, rank = schedule_rank(root, os.environ)
    plan = schedule.plan(runnable, machines(readable), now, forced, default_slots=args.slots or 1, rank=rank)
    cap = min((n for n in (args.max, settings.max_programs_per_tick) if n), default=None)
    due = list(plan.due[:cap] if cap else plan.due)
    if args.slots is not None and not 1 <= args.slots <= MAX_SLOTS:
        raise AutoloopError(f"--slots must be 1–{MAX_SLOTS}, got {args.slots}")
    if args.matrix:
        default_runs_on = tuple(label.strip() for label in args.runs_on.split(",") if label.strip())
        placements = {p.name: placement(p.config, default_runs_on or DEFAULT_RUNS_ON) for p in programs}
        counts = {p.name: p.config.parallel or args.slots for p in programs} if args.slots is not None else None
        console.out(json.dumps(job_matrix(due, placements, counts)), highlight=False)
    elif args.json:
        skipped = [{"name": s.name, "reason": s.reason, **({"next_due": s.next_due.isoformat()} if s.next_due else {})}
                   for s in plan.skipped]
        shown = {"selected": plan.selected, "due": due, "deferred": list(plan.deferred), "skipped": skipped,
                 "unconfigured": list(plan.unconfigured)}
        console.out(json.dumps(shown, indent=2), highlight=False)
    else:
        for name in due:
            console.print(f"due      {name}")
        for skip in plan.skipped:
            when = f" (next due {skip.next_due:%Y-%m-%d %H:%M UTC})" if skip.next_due else ""
            console.print(f"skipped  {skip.name}: {skip.reason}{when}")
        for name in plan.unconfigured:
            console.print(f"template {name}: unconfigured")
    return 0 if due else 1


def placement(config: ProgramConfig, default_runs_on: tuple[str, ...]) -> dict[str, Any]:
    """Returns where a program's propose job runs: its `runs-on` labels and `container` ('' for none: on the runner)."""
    return {"runs-on": list(config.runs_on or default_runs_on), "container": config.container or ""}


def job_matrix(
    due: list[str], placements: dict[str, dict[str, Any]], counts: dict[str, int] | None = None
) -> dict[str, Any]:
    """Returns the Actions matrix of a tick: the due programs (publish's matrix) and the propose jobs under `include`.

    Each propose entry carries its program's `runs-on` and `container`; with counts (slots per program) there is
    one (program, slot, slots) entry per slot.
    """
    if counts is None:
        include = [{"program": name, **placements[name]} for name in due]
    else:
        include = [{"program": name, "slot": i, "slots": counts[name], **placements[name]}
                   for name in due for i in range(counts[name])]
    return {"program": due, "include": include}

