"""`autoloop report PROGRAM|DIR`: one static HTML file with the metric curve, the evolution tree, diffs and Population."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from autoloop_py import tempdirs
from autoloop_py.analysis.html_report import ReportSource, render_report, report_payload
from autoloop_py.commands.common import read_states, repo_root, subparser
from autoloop_py.commands.trace import export_program
from autoloop_py.errors import AutoloopError
from autoloop_py.program.model import check_all
from autoloop_py.state.memory import MEMORY_BRANCH, MemoryStore
from autoloop_py.state.population import population_of
from autoloop_py.state.population_model import Candidate
from autoloop_py.state.trace import Trace, load_trace, trace_dir


def add_parser(commands: Any) -> None:
    """Registers `autoloop report`."""
    parser = subparser(commands, "report", "autoloop report function_minimization --out report.html")
    parser.add_argument("target", help="a program's name (its trace and state file on memory/autoloop) or an EvoTrace run directory")
    parser.add_argument("--out", type=Path, default=None, help="the HTML file to write (default: <program>-report.html)")
    parser.set_defaults(handler=cmd_report)


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    """Writes the report and prints where it went."""
    html, name, count = build_html(args.target, args.repo)
    out: Path = args.out or Path(f"{name}-report.html")
    out.write_text(html, encoding="utf-8")
    console.print(f"wrote the report of {count} candidates to {out} ({len(html.encode()) / 1024:.0f} KB); open it in a browser")
    return 0


def build_html(target: str, repo: Path | None) -> tuple[str, str, int]:
    """Returns (the report page, the run's name, its candidate count) for a program or an EvoTrace directory."""
    directory = Path(target)
    if directory.is_dir():
        trace = load_trace(directory)
        name = str(trace.meta.get("program") or directory.name)
        return _page(trace, name, str(directory), ()), name, len(trace.rows)
    if "/" in target or target.startswith("."):
        raise AutoloopError("is not a directory; pass an EvoTrace run directory or a program's name", path=target)
    root = repo_root(repo)
    population = _population(root, target)
    with tempdirs.temporary("autoloop-report-") as tmp:
        trace = load_trace(export_program(root, target, Path(tmp) / target))
        page = _page(trace, target, f"{MEMORY_BRANCH}:{trace_dir(target)}", population)
    return page, target, len(trace.rows)


def _page(trace: Trace, name: str, origin: str, population: Sequence[Candidate]) -> str:
    source = ReportSource(program=name, origin=origin, metric=trace.metric or "score", direction=trace.direction)
    return render_report(report_payload(trace, source, population))


def _population(root: Path, name: str) -> tuple[Candidate, ...]:
    """Returns the program's Population from its state file (empty for the default flow or an unknown program)."""
    programs, _ = check_all(root)
    program = next((p for p in programs if p.name == name), None)
    if program is None:
        return ()
    state = read_states(root, [program]).get(name)
    return population_of(state, MemoryStore(root).read).candidates if state is not None else ()
