"""`autoloop edit PROGRAM`: edit a state file by hand, validated, committed without losing a concurrent iteration."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import repo_root, subparser
from autoloop_py.errors import AutoloopError, ProgramError, StateError
from autoloop_py.loop.checkout.lock import hand_edit_lock
from autoloop_py.loop.record import integrity
from autoloop_py.loop.record.recording import state_path
from autoloop_py.program.model import Program, find_program, load_programs
from autoloop_py.state.file import parse_state
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.merge import merge_edit
from autoloop_py.strategies.runner import StrategyRunner, load_runner
from autoloop_py.strategies.state_reading import parse_everything


def add_parser(commands: Any) -> None:
    """Registers `autoloop edit`."""
    parser = subparser(commands, "edit", "autoloop edit function_minimization")
    parser.add_argument("program", help="the program's name")
    parser.add_argument("--file", type=Path, metavar="F", help="take the edited state file from F instead of an editor")
    parser.add_argument("--message", "-m", default="", help="what the edit does (the commit message)")
    parser.set_defaults(handler=cmd_edit)


def cmd_edit(args: argparse.Namespace, console: Console) -> int:
    """Validates the edited file and commits it onto the newest memory branch, merging a concurrent iteration."""
    root = repo_root(args.repo)
    program = find_program(load_programs(root), args.program)
    memory = MemoryStore(root)
    memory.sync()
    path = state_path(program)
    read = memory.read(path)
    if read is None:
        raise AutoloopError(
            f"{program.name} has no state file on {memory.config.branch} yet; run it once "
            f"(`autoloop run --program {program.name}`), then edit it"
        )
    recorded = integrity.newest_record(memory, path, program.name)
    runner = _runner(program, root, console)
    edited = _read_file(args.file) if args.file else _in_editor(read, program.name)
    if edited == read:
        console.print(f"no change to {path}; nothing written")
        return 0

    def change(current: str | None) -> str:
        merged = merge_edit(read, edited, current or "", path)
        check_edit(merged, path, recorded, runner)
        return merged

    message = f"[Autoloop: {program.name}] edited by hand: {args.message or 'autoloop edit'}"
    try:  # the edit itself is checked before the lock is waited for
        check_edit(edited, path, recorded, runner)
        _check_program_rows(read, edited, path, program)
        with hand_edit_lock(root):
            memory.update(path, change, message)
    except StateError as error:
        raise _kept(error, edited, program.name, args.file) from None
    console.print(f"{path} updated on {memory.config.branch}; the next `autoloop run` reads it")
    return 0


def _check_program_rows(read: str, edited: str, path: str, program: Program) -> None:
    """Raises StateError when the edit changes a Machine State row that every run writes back from program.md."""
    before, after = parse_state(read, path).machine, parse_state(edited, path).machine
    rows = (("target_metric", "Target Metric", program.config.target_metric, "`target-metric:`"),
            ("metric_direction", "Metric Direction", program.direction, "`metric_direction:`"))
    for key, label, value, setting in rows:
        if getattr(after, key) in (getattr(before, key), value):
            continue
        row = re.compile(rf"^\s*\|\s*{label}\s*\|", re.IGNORECASE)
        line = next((i for i, text in enumerate(edited.splitlines(), 1) if row.match(text)), None)
        raise StateError(f"'{label}' is rewritten by every run from {setting} in {program.path}: set it there "
                         "and push it, and leave this row as it was", path, line)


def check_edit(
    text: str, path: str, recorded: integrity.Recorded | None, runner: StrategyRunner | None = None
) -> None:
    """Raises StateError (naming the line) unless a run can read all of the file and it keeps the runner's records.

    runner: the program's strategy, whose engine reads its state block (None: the default flow).
    """
    state = parse_everything(text, path, runner)
    problem = integrity.problem_of(state, recorded)
    if problem is not None:
        raise StateError(
            f"the edit removes records the runner wrote: {problem}; keep them (their text may change)", path
        )


def _runner(program: Program, root: Path, console: Console) -> StrategyRunner | None:
    """Returns the program's strategy as the working tree gives it, to read its state block (None: none, or broken)."""
    try:
        return load_runner(program, root)
    except ProgramError as error:
        console.print(f"the strategy state is not checked: {error} (`autoloop check` says more)", style="yellow",
                      highlight=False)
        return None


def _read_file(path: Path) -> str:
    """Returns the edited file's text, or raises AutoloopError saying why it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise AutoloopError(f"not UTF-8 text (byte {error.start}); save it as UTF-8", path) from None
    except OSError as error:
        raise AutoloopError(f"cannot read the edited file: {error.strerror}", path) from None


def _in_editor(text: str, name: str) -> str:
    """Returns the text after the person edited it in $VISUAL or $EDITOR (vi when neither is set)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="autoloop-edit-") as tmp:
        file = Path(tmp) / f"{name}.md"
        file.write_text(text, encoding="utf-8")
        try:
            done = subprocess.run([*shlex.split(editor), str(file)], check=False)
        except OSError as error:
            raise AutoloopError(f"cannot start the editor {editor!r} ({error}); set EDITOR or pass --file") from None
        if done.returncode != 0:
            raise AutoloopError(f"the editor {editor!r} exited with status {done.returncode}; nothing written")
        return file.read_text(encoding="utf-8")


def _kept(error: StateError, edited: str, name: str, given: Path | None) -> AutoloopError:
    """Returns the error telling that nothing was written, and where the edit is kept to fix and retry."""
    if given is None:
        handle, kept = tempfile.mkstemp(prefix=f"autoloop-edit-{name}-", suffix=".md")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(edited)
        given = Path(kept)
    return StateError(
        f"{error.message}. Nothing was written; your edit is in {given}: fix it and run "
        f"`autoloop edit {name} --file {given}`",
        error.path,
        error.line,
    )
