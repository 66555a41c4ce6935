"""`autoloop report PROGRAM|DIR`: one static HTML file with the metric curve, evolution tree, diffs and Population."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from rich.console import Console

from autoloop_py.analysis.html_report import ReportSource, render_report, report_payload
from autoloop_py.commands.common import read_state, subparser
from autoloop_py.commands.trace import opened
from autoloop_py.program.model import Program
from autoloop_py.state.population import population_of
from autoloop_py.state.memory_folder import open_memory
from autoloop_py.state.population_model import Candidate


def add_parser(commands: Any) -> None:
    """Registers `autoloop report`."""
    parser = subparser(commands, "report", "autoloop report function_minimization --out report.html")
    parser.add_argument(
        "target", help="a program's name (its trace and state file on memory/autoloop) or an EvoTrace run directory"
    )
    parser.add_argument("--out", type=Path, default=None,
                        help="the HTML file to write (default: <program>-report.html)")
    parser.set_defaults(handler=cmd_report)


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    """Writes the report and prints where it went."""
    html, name, count = build_html(args.target, args.repo)
    out: Path = args.out or Path(f"{name}-report.html")
    out.write_text(html, encoding="utf-8")
    console.print(
        f"wrote the report of {count} candidates to {out} ({len(html.encode()) / 1024:.0f} KB); open it in a browser"
    )
    return 0


def build_html(target: str, repo: Path | None) -> tuple[str, str, int]:
    """Returns (the report page, the run's name, its candidate count) for a program or an EvoTrace directory."""
    from_memory = not Path(target).is_dir()
    with opened(target, repo, strict=False) as run:
        name = target if from_memory else str(run.trace.meta.get("program") or Path(target).name)
        population = _population(run.root, run.program, run.at) if from_memory else ()
        source = ReportSource(program=name, origin=run.label, metric=run.trace.metric or "score",
                              direction=run.trace.direction)
        return render_report(report_payload(run.trace, source, population)), name, len(run.trace.rows)


def _population(root: Path | None, program: Program | None, at: str | None) -> tuple[Candidate, ...]:
    """Returns the program's Population from its state file at the trace's memory commit `at` (empty for the default
    flow or an unknown program): a run recording meanwhile must not add entries the trace read lacks."""
    if root is None or program is None:
        return ()
    memory = open_memory(root)
    state = read_state(memory, program, at)
    return population_of(state, functools.partial(memory.read, at=at)).candidates if state is not None else ()
