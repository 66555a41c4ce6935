"""`autoloop status`: a table of every program's state, or one program's details."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autoloop_py.analysis.mermaid import program_charts
from autoloop_py.commands.common import format_metric, format_time, repo_root, shown, states_and_damage, subparser
from autoloop_py.errors import AutoloopError, ProgramError, StateError
from autoloop_py.github.render import holdout_text
from autoloop_py.loop.checkout import stale_parents
from autoloop_py.loop.record import integrity
from autoloop_py.loop.record.recording import state_path
from autoloop_py.loop.tick import schedule
from autoloop_py.program.model import Program, check_all, find_program
from autoloop_py.program.playbook import find_playbook
from autoloop_py.program.regions import primary_target
from autoloop_py.sandbox.run import isolation_report
from autoloop_py.state import budget
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.model_stats import summary_rows
from autoloop_py.state.population import population_of

_SPARK = {"accepted": "✅", "rejected": "❌", "error": "⚠️", "pending-ci": "⏳", "ci-fix-exhausted": "🛑"}


def add_parser(commands: Any) -> None:
    """Registers `autoloop status`."""
    parser = subparser(commands, "status", "Show what each program is doing.", "autoloop status function_minimization")
    parser.add_argument("program", nargs="?", help="show one program's recent history too")
    parser.add_argument(
        "--mermaid", action="store_true",
        help="print the program's charts as Mermaid blocks (what the status comment, PR and job summary show)",
    )
    parser.set_defaults(handler=cmd_status)


def cmd_status(args: argparse.Namespace, console: Console) -> int:
    """Prints the dashboard table (and one program's history when named)."""
    root = repo_root(args.repo)
    programs, problems = check_all(root)
    if args.mermaid:
        return _print_mermaid(root, programs, args.program, console)
    states, damaged = states_and_damage(root, programs)
    now = datetime.now(timezone.utc)
    shown = [find_program(programs, args.program)] if args.program else programs
    table = Table(title="autoloop programs")
    for column in ("program", "strategy", "status", "best", "initial", "iterations", "last run", "next due", "recent",
                   "spent / budget"):
        table.add_column(column)
    stopped = _blocked(root, shown, states)
    for program in shown:
        playbook = find_playbook(program, root)
        strategy_name = playbook.name if playbook else "default"
        if program.name in damaged:
            table.add_row(program.name, strategy_name, "❌ state file unreadable", *["—"] * 7)
        else:
            row = _row(program, states.get(program.name), now)
            if program.name in stopped:
                row[0] = f"🛑 blocked: {stopped[program.name][0]}"
            table.add_row(program.name, strategy_name, *row)
    console.print(table)
    lines, sandbox_problems = isolation_report(shown)
    for line in [*sandbox_problems, *lines]:
        console.print(escape(line), style=None if line.startswith("sandbox:") else "yellow", highlight=False)
    for problem in problems:
        console.print(f"[red]✗[/] {escape(str(problem))}")
    for err in [*damaged.values(), *(error for _, error in stopped.values())]:
        console.print(f"[red]✗[/] {escape(str(err))}")
    if args.program and args.program not in damaged:
        _details(states.get(args.program), console)
        _stale(root, find_program(programs, args.program), states.get(args.program), console)
    return 1 if args.program in damaged else 0


def _blocked(
    root: Path, programs: list[Program], states: dict[str, statefile.StateFile | None]
) -> dict[str, tuple[str, StateError]]:
    """Returns, per program whose state file lost the runner's records, what it lost and how to restore it."""
    memory = MemoryStore(root)
    found = {}
    for program in programs:
        state = states.get(program.name)
        stop = integrity.blocked(memory, state_path(program), program.name, state) if state is not None else None
        if stop is not None:
            found[program.name] = stop
    return found


def _print_mermaid(root: Path, programs: list[Program], name: str | None, console: Console) -> int:
    if not name:
        raise AutoloopError("--mermaid needs a program: autoloop status PROGRAM --mermaid")
    memory = MemoryStore(root)
    memory.sync()
    charts = program_charts(memory, find_program(programs, name))
    console.out(charts or f"{name} has no evaluated candidate yet; run `autoloop run --program {name}` first", highlight=False)
    return 0


def _row(program: Program, state: statefile.StateFile | None, now: datetime) -> list[str]:
    machine = state.machine if state else None
    due = schedule.next_due(program, machine)
    return [
        _status(program, machine, now),
        _best(machine),
        format_metric(machine.initial_metric if machine else None),
        str(machine.iteration_count if machine else 0),
        format_time(machine.last_run if machine else None),
        "now" if due is None or due <= now else format_time(due),
        "".join(_SPARK.get(s, "·") for s in (machine.recent_statuses if machine else ())) or "—",
        budget.describe(program.config, machine or statefile.MachineState(), now),
    ]


def _best(machine: statefile.MachineState | None) -> str:
    """Returns the best metric, and beside it its held-out value and the gap when the program measures one."""
    best = format_metric(machine.best_metric if machine else None)
    held = holdout_text(machine.best_metric, machine.holdout_metric) if machine else None
    best = best if held is None else f"{best} · held out {held}"
    return f"{best} · ⚠️ stale" if machine and machine.stale_reason else best


def _status(program: Program, machine: statefile.MachineState | None, now: datetime) -> str:
    if program.unconfigured:
        return "📝 unconfigured"
    if machine is None:
        return "🟢 new"
    if machine.completed:
        return "✅ completed"
    reason = schedule.skip_reason(machine, now, program.config.parallel or 1)
    if reason:
        return f"⏸️ {shown(reason)}"  # a pause reason quotes an error note
    if machine.consecutive_errors:
        return f"⚠️ {machine.consecutive_errors} error(s)"
    return "🟢 active"


def _details(state: statefile.StateFile | None, console: Console) -> None:
    if state is None:
        console.print("no iterations yet")
        return
    if state.machine.stale_reason:
        console.print(f"[yellow]⚠️ stale:[/] {escape(shown(state.machine.stale_reason))}")
    console.print("\n[bold]Recent iterations[/]")
    for entry in state.history[:10]:
        if entry.is_range:
            console.print("  " + shown(entry.text.strip().splitlines()[0].lstrip("# ")))
            continue
        mark = _SPARK.get(entry.status or "", "·")
        metric = format_metric(entry.metric)
        console.print(f"  {entry.iteration:>4} {mark} {entry.status or '?':<9} {metric:>10}  {shown(entry.change)}")
    if state.section_text(statefile.POPULATION) is not None:
        _population_summary(population_of(state), state.machine.metric_direction, console)
    _models_summary(state, console)


def _models_summary(state: statefile.StateFile, console: Console) -> None:
    """Prints each model's calls, accepted share, improvement and spend (nothing before the first model call)."""
    rows = summary_rows(statefile.models_of(state))
    if not rows:
        return
    table = Table(title="models")
    for column in ("model", "calls", "accepted", "improvement", "spend"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(escape(row[key]) for key in ("model", "calls", "accepted", "improvement", "spend")))
    console.print(table)


def _stale(root: Path, program: Program, state: statefile.StateFile | None, console: Console) -> None:
    """Prints the Population entries whose code conflicts with a later change of the Target on the default branch."""
    if state is None or state.section_text(statefile.POPULATION) is None:
        return
    try:
        primary = primary_target(program, root)
    except ProgramError:
        return
    memory = MemoryStore(root)
    rebased = stale_parents.rebase_at(
        root, program.name, primary, stale_parents.default_tip(root), memory.read, population_of(state, memory.read)
    )
    if rebased.stale:
        ids = ", ".join(f"#{i}" for i in rebased.stale)
        console.print(f"[yellow]stale[/] (their code conflicts with a later change of {primary} on the default "
                      f"branch; not chosen as parents until rebased by hand): {ids}")


def _population_summary(population: pop.Population, direction: str, console: Console) -> None:
    """Prints the population's size and, per island, its member count and best candidate."""
    candidates = population.candidates
    scored = [c for c in candidates if pop.oriented(c.fitness, direction) is not None]
    console.print(f"\n[bold]Population[/]: {len(candidates)} candidates, {len(scored)} scored, next id {population.next_id}")
    table = Table()
    for column in ("island", "members", "best", "best fitness", "cells"):
        table.add_column(column)
    for island in sorted({c.island for c in candidates}, key=lambda i: -1 if i is None else i):
        members = [c for c in candidates if c.island == island]
        best = max(members, key=lambda c: (pop.oriented(c.fitness, direction) or float("-inf"), c.id))
        cells = sorted({" · ".join(c.cell) for c in members if c.cell})
        table.add_row("—" if island is None else str(island), str(len(members)), f"#{best.id}",
                      format_metric(best.fitness), ", ".join(cells))
    console.print(table)
