"""`autoloop deps PROGRAM [--install]`: show or install the program's own dependencies."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import load_named, repo_root, subparser
from autoloop_py.errors import AutoloopError, ProgramError
from autoloop_py.program.requirements import program_requirements, requirement_names
from autoloop_py.sandbox import evaluation_python
from autoloop_py.sandbox.run import own_uid_evaluations


def add_parser(commands: Any) -> None:
    """Registers `autoloop deps`."""
    parser = subparser(commands, "deps", "autoloop deps function_minimization --install")
    parser.add_argument("program", help="the program's name")
    parser.add_argument("--install", action="store_true", help="run `python -m pip install` with them")
    parser.add_argument("--if-found", action="store_true",
                        help="a program that cannot be found (an issue program without API access) has none")
    parser.set_defaults(handler=cmd_deps)


def cmd_deps(args: argparse.Namespace, console: Console) -> int:
    """Prints the pip arguments; with --install runs pip from the repository root (exit 1 if pip fails)."""
    root = repo_root(args.repo)
    try:
        program = load_named(root, args.program, Console(stderr=True))
    except ProgramError as err:
        if not args.if_found or err.path is not None:
            raise
        console.print(f"{args.program}: not found here, so no requirements installed ({err.message})", markup=False)
        return 0
    found = program_requirements(root, program)
    if not found.args:
        console.print(f"{program.name}: no requirements (add `requirements: [...]` or requirements.txt)")
        return 0
    command = [sys.executable, "-m", "pip", "install", "--quiet", *found.args]
    listed = requirement_names(root, found)
    named = f"{', '.join(listed)}; " if listed and "-r" in found.args else ""
    console.print(f"{program.name}: {shlex.join(found.args)}  ({named}from {found.source})", markup=False,
                  highlight=False)
    if not args.install:
        return 0
    if own_uid_evaluations(program) and evaluation_python.needs_venv(os.environ):
        python = evaluation_python.prepare(os.environ)
        command = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *found.args]
        console.print(f"{program.name}: evaluations run as a uid of their own that cannot reach the runner's python3: "
                      f"installing into {python.parent.parent}, whose python3 they run", markup=False, highlight=False)
    done = subprocess.run(command, cwd=root, check=False)
    if done.returncode != 0:
        raise AutoloopError(f"`{shlex.join(command)}` failed with status {done.returncode}")
    if found.from_evaluation:
        console.print(f"{program.name}: installed before the evaluation, whose own `pip install` has no network "
                      "in the sandbox and now finds them there", markup=False, highlight=False)
    return 0
