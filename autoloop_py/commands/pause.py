"""`autoloop pause|resume PROGRAM`: stop or restart a program by editing its Machine State."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import add_memory_dir, load_named, repo_root, subparser
from autoloop_py.loop.checkout.lock import hand_edit_lock
from autoloop_py.loop.record.recording import parse_or_new, state_path
from autoloop_py.state import file as statefile
from autoloop_py.state.memory_folder import open_memory


def add_parser(commands: Any) -> None:
    """Registers `autoloop pause` and `autoloop resume`."""
    pause = subparser(commands, "pause", 'autoloop pause circle_packing --reason "evaluator flaky"')
    pause.add_argument("program", help="the program's name")
    pause.add_argument("--reason", default="paused by a maintainer", help="why (shown by status and the scheduler)")
    add_memory_dir(pause)
    pause.set_defaults(handler=cmd_pause, paused=True)
    resume = subparser(commands, "resume", "autoloop resume circle_packing")
    resume.add_argument("program", help="the program's name")
    add_memory_dir(resume)
    resume.set_defaults(handler=cmd_pause, paused=False, reason=None)


def cmd_pause(args: argparse.Namespace, console: Console) -> int:
    """Sets or clears Paused in the program's state file and commits it to the memory branch."""
    root = repo_root(args.repo)
    program = load_named(root, args.program, console)
    memory = open_memory(root, args.memory_dir)
    memory.sync()
    path = state_path(program)

    def change(text: str | None) -> str:
        state = parse_or_new(text, program, path)
        machine = state.machine
        if args.paused:
            machine = dataclasses.replace(machine, paused=True, pause_reason=args.reason)
        else:
            # The statuses stay as they happened; a plateau counts only statuses recorded after this resume.
            machine = dataclasses.replace(
                machine, paused=False, pause_reason=None, consecutive_errors=0, resumed_at=machine.iteration_count
            )
        return statefile.render_state(statefile.with_machine(state, machine))

    verb = "paused" if args.paused else "resumed"
    with hand_edit_lock(root):
        memory.update(path, change, f"[Autoloop: {program.name}] {verb}")
    console.print(f"{program.name} {verb}" + (f": {args.reason}" if args.paused else ""))
    return 0

