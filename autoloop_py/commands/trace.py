"""`autoloop trace export PROGRAM DIR` writes a program's recorded trace in the EvoTrace layout (or, with `--to`, as a
CSV file, an MLflow run or a W&B run); `trace show PROGRAM ID` prints one candidate: its metrics, evaluation stages and
what its evaluation said (feedback, error, output tails)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from rich.console import Console

from autoloop_py import tempdirs
from autoloop_py.analysis import tracking
from autoloop_py.commands.common import repo_root, subparser
from autoloop_py.errors import AutoloopError
from autoloop_py.program.model import Program, check_all, find_program
from autoloop_py.render import render
from autoloop_py.state import trace
from autoloop_py.state.memory import MEMORY_BRANCH, MemoryStore
from autoloop_py.state.untrusted_text import plain

_EXPORT = ("write a program's trace as an EvoTrace run directory (meta.json, programs.jsonl, blobs/), or with --to "
           "as a CSV file, an MLflow run or a W&B run")
_SHOW = "print one candidate (its id, e.g. it7 or 12): metrics, stages and what its evaluation said"


def add_parser(commands: Any) -> None:
    """Registers `autoloop trace export PROGRAM DIR`."""
    parser = subparser(
        commands, "trace",
        "autoloop trace export function_minimization out/\n"
        "  autoloop trace export function_minimization --to csv --out runs.csv\n"
        "  autoloop trace export function_minimization --to mlflow --out mlruns/   # a file store",
    )
    parser.add_argument("action", choices=("export", "show"), help=f"export: {_EXPORT}; show: {_SHOW}")
    parser.add_argument("program", help="the program's name")
    parser.add_argument("directory", metavar="DIRECTORY|ID", nargs="?",
                        help="export: where to write the run (a new or empty directory); show: the candidate's id")
    parser.add_argument("--to", choices=("evotrace", *tracking.DESTINATIONS), default="evotrace",
                        help="export as: evotrace (default), csv (a header and a row per candidate), mlflow "
                        "(one run, a step per candidate, diffs as artifacts; --out is a tracking URI or a folder "
                        "for a file store), "
                        "wandb (offline unless WANDB_MODE says otherwise; --out is its folder)")
    parser.add_argument("--out", type=Path, help="where to write (instead of DIRECTORY)")
    parser.set_defaults(handler=cmd_trace)


def cmd_trace(args: argparse.Namespace, console: Console) -> int:
    """Runs `trace export` or `trace show`."""
    if args.action == "show":
        if args.directory is None:
            raise AutoloopError("trace show needs the candidate's id: `autoloop trace show PROGRAM ID`")
        return cmd_trace_show(args, console)
    target = args.out or (Path(args.directory) if args.directory else None)
    if target is None:
        raise AutoloopError("trace export needs where to write: DIRECTORY, or --out PATH")
    args.directory = target
    if args.to != "evotrace":
        return cmd_trace_track(args, console)
    return cmd_trace_export(args, console)


def cmd_trace_show(args: argparse.Namespace, console: Console) -> int:
    """Prints one recorded candidate; exit 1 when the trace has no such id."""
    memory = MemoryStore(repo_root(args.repo))
    memory.sync()
    rows = memory.list(f"{trace.trace_dir(args.program)}/rows/")
    wanted = f"-{trace.safe_id(str(args.directory))}.json"
    path = next((row for row in reversed(rows) if row.endswith(wanted)), None)
    text = memory.read(path) if path is not None else None
    if text is None:
        raise AutoloopError(f"no candidate '{args.directory}' in the trace of '{args.program}' on {MEMORY_BRANCH}; "
                            "`autoloop report` lists the ids")
    shown = render("trace_show.txt.j2", row=trace.row_from_json(json.loads(text)))
    # What the evaluation printed is untrusted: no escape sequence of it reaches the terminal.
    console.out(plain(shown), end="", highlight=False)
    return 0


def cmd_trace_export(args: argparse.Namespace, console: Console) -> int:
    """Exports the trace; prints where it went and how many programs it holds."""
    out: Path = args.directory
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise AutoloopError("exists and is not an empty directory; choose a new directory", path=out)
    export_program(repo_root(args.repo), args.program, out)
    count = sum(1 for line in (out / "programs.jsonl").read_text(encoding="utf-8").splitlines() if line.strip())
    console.print(f"wrote {count} programs of {args.program} to {out}")
    return 0


def cmd_trace_track(args: argparse.Namespace, console: Console) -> int:
    """Sends the trace to a tracker (csv, mlflow, wandb); prints where it went."""
    with tempfile.TemporaryDirectory(prefix="autoloop-trace-") as folder:
        items = tracking.tracked(trace.load_trace(export_program(repo_root(args.repo), args.program, Path(folder))))
    out: Path = args.directory
    sent = tracking.send_all(items, args.to, str(out), args.program)
    where = {"csv": str(out), "mlflow": f"MLflow run {sent} at {out}", "wandb": f"W&B run {sent} in {out}"}[args.to]
    console.print(f"wrote {len(items)} candidates of {args.program} to {where}")
    return 0


@dataclass(frozen=True)
class Target:
    """A run to work on: its trace and, when the repository defines it, its program.

    Attributes:
        trace: the run's trace (its directory lives while the `opened` block runs).
        program: the program that made the run, None for a trace directory whose program is not in the repository.
        root: the repository root, None outside a repository.
        label: how the run is named in reports (`memory/autoloop:traces/<name>` or the directory).
        at: the memory commit the trace was read at, for reading the rest of the run there (None: a directory).
    """

    trace: trace.Trace
    program: Program | None
    root: Path | None
    label: str
    at: str | None = None


@contextlib.contextmanager
def opened(name: str, repo: Path | None, strict: bool = True) -> Iterator[Target]:
    """Yields the run a command names: a trace directory, or a program's trace exported from the memory branch.

    strict: a program's name must name a program of the repository (else its trace alone is the run).
    """
    directory = Path(name)
    if directory.is_dir():
        run = trace.load_trace(directory)
        root = None
        with contextlib.suppress(AutoloopError):  # outside a repository: the trace alone
            root = repo_root(repo)
        program_name = run.meta.get("program")
        program = _program(check_all(root)[0], program_name) if root and isinstance(program_name, str) else None
        yield Target(run, program, root, str(directory))
        return
    if "/" in name or name.startswith("."):
        raise AutoloopError("is not a directory; pass an EvoTrace run directory or a program's name", path=name)
    root = repo_root(repo)
    programs, _ = check_all(root)
    memory = MemoryStore(root)
    memory.sync()
    at = memory.tip()
    with tempdirs.temporary("autoloop-trace-") as tmp:
        run = trace.load_trace(export_program(root, name, Path(tmp) / name, at))
        program = find_program(programs, name) if strict else _program(programs, name)
        yield Target(run, program, root, f"{MEMORY_BRANCH}:{trace.trace_dir(name)}", at)


def _program(programs: list[Program], name: str) -> Program | None:
    return next((program for program in programs if program.name == name), None)


def export_program(root: Path, program: str, out: Path, at: str | None = None) -> Path:
    """Exports a program's trace read at one memory commit, `at` (default: the synced tip), to `out`; raises if none
    was recorded there. One commit: a run recording meanwhile moves the branch between two reads."""
    memory = MemoryStore(root)
    if at is None:
        memory.sync()
        at = memory.tip()
    paths = memory.list(trace.trace_dir(program) + "/", at)
    if not any(path.startswith(f"{trace.trace_dir(program)}/rows/") for path in paths):
        raise AutoloopError(
            f"no trace recorded for '{program}' on {MEMORY_BRANCH}; run `autoloop run --program {program}` first"
        )
    return trace.export(functools.partial(memory.read, at=at), paths, program, out)

