"""`autoloop record PROGRAM`: judge and record the candidate an outside agent left in the working tree."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import add_memory_dir, format_metric, load_named, repo_root, shown, subparser
from autoloop_py.errors import AutoloopError
from autoloop_py.loop.record.recording import load_state
from autoloop_py.loop.tick import handoff, handoff_report
from autoloop_py.state.memory_folder import open_memory


def add_parser(commands: Any) -> None:
    """Registers `autoloop record`."""
    parser = subparser(
        commands, "record",
        'autoloop record groupby_evolve --evaluate --summary "bincount for narrow key ranges" --lesson "..."',
    )
    parser.add_argument("program", help="the program's name")
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--evaluate", action="store_true", help="run the program's evaluation on the working tree")
    how.add_argument("--metric", type=float, help="the metric the agent measured")
    how.add_argument("--error", help="the candidate failed: why")
    how.add_argument("--report", type=Path, metavar="FILE",
                     help="the JSON object the evaluation wrote (its metric, and any error, feedback or log_tail): "
                     "what it says is kept and shown in the next prompt")
    parser.add_argument("--summary", required=True, help="what the change does, 10–20 words")
    parser.add_argument("--approach", help="the idea in one line (Population entry)")
    parser.add_argument("--lesson", help="a transferable heuristic for Lessons Learned")
    parser.add_argument("--commit", help="the commit holding the candidate, if already made")
    parser.add_argument("--pending-ci", action="store_true",
                        help="keep an improving candidate as pending-ci (when the program's CI gate is on); "
                        "`autoloop ci` settles it from its pull request's checks")
    add_memory_dir(parser)
    parser.set_defaults(handler=cmd_record)


def cmd_record(args: argparse.Namespace, console: Console) -> int:
    """Records the outcome and prints `status: …`; exit 0 whatever the status."""
    root = repo_root(args.repo)
    program = load_named(root, args.program, Console(stderr=True))
    if not args.summary.strip():
        raise AutoloopError("--summary must not be empty")
    metric = program.metric or "metric"
    report = handoff_report.read_report_file(args.report, metric) if args.report is not None else None
    outcome = handoff.Outcome(
        summary=args.summary,
        approach=args.approach,
        lesson=args.lesson,
        metric=args.metric,
        error=args.error,
        evaluate=args.evaluate,
        commit=args.commit,
        pending_ci=args.pending_ci,
        report=report,
    )
    memory = open_memory(root, args.memory_dir)
    entry = handoff.record(root, program, outcome, memory=memory)
    machine = load_state(memory, program).machine
    console.print(f"status: {entry.status}")
    console.print(f"metric: {format_metric(entry.metric)}")
    console.print(f"notes: {shown(entry.notes)}")
    console.print(f"completed: {'true' if machine.completed else 'false'}")
    if machine.paused:
        console.print(f"paused: {shown(machine.pause_reason or 'true')}")
    return 0
