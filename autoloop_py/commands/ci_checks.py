"""`autoloop ci PROGRAM --checks STATE`: settle the candidate waiting for CI from checks an outside agent read."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import add_memory_dir, load_named, repo_root, subparser
from autoloop_py.github import ci
from autoloop_py.loop.record import ci_gate
from autoloop_py.render import render
from autoloop_py.state.memory_folder import open_memory


def add_parser(commands: Any) -> None:
    """Registers `autoloop ci`."""
    parser = subparser(
        commands, "ci",
        'autoloop ci groupby_evolve --checks failure --failing "tests (3.12)" --first-error "E   assert 2 == 3"',
    )
    parser.add_argument("program", help="the program's name")
    parser.add_argument("--checks", required=True, choices=ci_gate.CHECK_STATES,
                        help="the PR head's checks: success, failure, pending (still running) or none (no checks)")
    parser.add_argument("--failing", action="append", default=[], metavar="NAME", help="a failing check (repeat)")
    parser.add_argument("--first-error", default="", metavar="LINE", help="the first error line of the failure")
    add_memory_dir(parser)
    parser.set_defaults(handler=cmd_ci)


def cmd_ci(args: argparse.Namespace, console: Console) -> int:
    """Prints `action: none|wait|accepted|fix|paused`, a message, and the fix to make for `fix`."""
    root = repo_root(args.repo)
    program = load_named(root, args.program, Console(stderr=True))
    result = ci_gate.CheckResult(args.checks, tuple(args.failing), args.first_error)
    verdict = ci.settle(open_memory(root, args.memory_dir), program, result)
    console.print(f"action: {verdict.action}", markup=False, highlight=False)
    if verdict.message:
        console.print(f"message: {verdict.message}", markup=False, highlight=False)
    if verdict.fix is not None:
        console.out(render("ci_fix_directive.md.j2", fix=verdict.fix).strip(), highlight=False)
    if verdict.state.machine.completed:
        console.print("completed: true")
    return 0
