"""`autoloop trace export PROGRAM DIR`: write a program's recorded trace out in the EvoTrace layout."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from autoloop_py.commands.common import repo_root, subparser
from autoloop_py.errors import AutoloopError
from autoloop_py.state import trace
from autoloop_py.state.memory import MEMORY_BRANCH, MemoryStore

_SUMMARY = "Work with the run traces recorded on branch memory/autoloop."
_EXPORT = "write a program's trace as an EvoTrace run directory (meta.json, programs.jsonl, blobs/)"


def add_parser(commands: Any) -> None:
    """Registers `autoloop trace export PROGRAM DIR`."""
    parser = subparser(commands, "trace", _SUMMARY, "autoloop trace export function_minimization out/")
    parser.add_argument("action", choices=("export",), help=f"export: {_EXPORT}")
    parser.add_argument("program", help="the program's name")
    parser.add_argument("directory", type=Path, help="where to write the run (a new or empty directory)")
    parser.set_defaults(handler=cmd_trace_export)


def cmd_trace_export(args: argparse.Namespace, console: Console) -> int:
    """Exports the trace; prints where it went and how many programs it holds."""
    out: Path = args.directory
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise AutoloopError("exists and is not an empty directory; choose a new directory", path=out)
    export_program(repo_root(args.repo), args.program, out)
    count = sum(1 for line in (out / "programs.jsonl").read_text(encoding="utf-8").splitlines() if line.strip())
    console.print(f"wrote {count} programs of {args.program} to {out}")
    return 0


def export_program(root: Path, program: str, out: Path) -> Path:
    """Exports a program's trace from the memory branch to `out`; raises if nothing was recorded."""
    memory = MemoryStore(root)
    memory.sync()
    paths = memory.list(trace.trace_dir(program) + "/")
    if not any(path.startswith(f"{trace.trace_dir(program)}/rows/") for path in paths):
        raise AutoloopError(
            f"no trace recorded for '{program}' on {MEMORY_BRANCH}; run `autoloop run --program {program}` first"
        )
    return trace.export(memory.read, paths, program, out)

