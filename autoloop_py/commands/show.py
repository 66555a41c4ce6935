"""`autoloop state PROGRAM`: print a program's state file from the memory branch."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import add_memory_dir, load_named, repo_root, subparser
from autoloop_py.errors import AutoloopError
from autoloop_py.loop.record.recording import state_path
from autoloop_py.state.memory_folder import open_memory


def add_parser(commands: Any) -> None:
    """Registers `autoloop state`."""
    parser = subparser(commands, "state", "autoloop state function_minimization")
    parser.add_argument("program", help="the program's name")
    parser.add_argument("--pretty", action="store_true", help="render the markdown instead of printing it raw")
    add_memory_dir(parser)
    parser.set_defaults(handler=cmd_state)


def cmd_state(args: argparse.Namespace, console: Console) -> int:
    """Prints the state file; exit 1 when the program has none yet."""
    root = repo_root(args.repo)
    program = load_named(root, args.program, Console(stderr=True))
    memory = open_memory(root, args.memory_dir)
    memory.sync()
    text = memory.read(state_path(program))
    if text is None:
        raise AutoloopError(f"{program.name} has no state file yet; run `autoloop run --program {program.name}` first")
    if args.pretty:
        from rich.markdown import Markdown  # here: it costs every other command's start 0.1 s (pygments)

        console.print(Markdown(text, hyperlinks=False))  # a summary's link target is shown, never a live link
    else:
        console.out(text, end="", highlight=False)
    return 0
