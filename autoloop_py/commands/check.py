"""`autoloop check`: list every problem of every program; non-zero exit if any."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import repo_root, subparser
from autoloop_py.program import check_all, discover
from autoloop_py.schedule import parse_schedule


def add_parser(commands: Any) -> None:
    """Registers `autoloop check`."""
    parser = subparser(commands, "check", "Validate every program under .autoloop/programs/.", "autoloop check")
    parser.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace, console: Console) -> int:
    """Prints each problem as `file:line: message`; returns 1 if there is any."""
    root = repo_root(args.repo)
    programs, problems = check_all(root)
    messages = [str(p) for p in problems]
    for program in programs:
        try:
            parse_schedule(program.config.schedule)
        except ValueError as err:
            messages.append(f"{program.path}: frontmatter `schedule`: {err}")
    for message in messages:
        console.print(f"[red]✗[/] {message}")
    for program in programs:
        note = " (unconfigured template)" if program.unconfigured else ""
        console.print(f"[green]✓[/] {program.name}{note}")
    if not discover(root):
        console.print("no programs found under .autoloop/programs/")
    return 1 if messages else 0
