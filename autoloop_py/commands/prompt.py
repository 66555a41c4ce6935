"""`autoloop prompt PROGRAM`: print the next iteration's prompt for an outside agent (no state is written)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import add_memory_dir, load_named, repo_root, subparser
from autoloop_py.loop.tick import handoff
from autoloop_py.state.memory_folder import open_memory


def add_parser(commands: Any) -> None:
    """Registers `autoloop prompt`."""
    parser = subparser(commands, "prompt", "autoloop prompt groupby_evolve --place-parent > prompt.md")
    parser.add_argument("program", help="the program's name")
    parser.add_argument(
        "--place-parent",
        action="store_true",
        help="write the chosen parent's code into the Target file of the working tree",
    )
    add_memory_dir(parser)
    parser.set_defaults(handler=cmd_prompt)


def cmd_prompt(args: argparse.Namespace, console: Console) -> int:
    """Prints the prompt; notes placed parent code and the Prompts variant drawn on stderr."""
    root = repo_root(args.repo)
    program = load_named(root, args.program, Console(stderr=True))
    result = handoff.prepare(root, program, place_parent=args.place_parent, memory=open_memory(root, args.memory_dir))
    console.out(result.prompt, end="" if result.prompt.endswith("\n") else "\n", highlight=False)
    if result.placed:
        Console(stderr=True).print(f"placed the parent's code in {', '.join(result.placed)}")
    if result.variant:
        Console(stderr=True).print(f"prompt variant: {result.variant}", highlight=False)
    return 0
