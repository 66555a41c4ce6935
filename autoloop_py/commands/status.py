"""`autoloop status`: a table of every program's state, or one program's details."""

from __future__ import annotations

import argparse
import functools
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from autoloop_py.analysis.mermaid import program_charts
from autoloop_py.commands.common import format_metric, repo_root, shown, states_and_damage, subparser
from autoloop_py.errors import AutoloopError, ProgramError
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
from autoloop_py.state.parts import STATUS_ICONS, trim
from autoloop_py.state.population import population_of
from autoloop_py.state.untrusted_text import plain

_NOT_EVALUATED = re.compile(r"not evaluated: [^\n]*")
_INSTRUCTION_SHOWN = 120  # characters of a variant's instruction (`autoloop state PROGRAM` prints it whole)


def add_parser(commands: Any) -> None:
    """Registers `autoloop status`."""
    parser = subparser(commands, "status", "autoloop status function_minimization")
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
    # Every figure comes from one commit of the memory branch, which a run recording meanwhile moves.
    states, damaged, at = states_and_damage(root, programs)
    memory = MemoryStore(root)
    now = datetime.now(timezone.utc)
    listed = [find_program(programs, args.program)] if args.program else programs
    # Per program whose state file (read at `at`) lost the runner's records: what it lost, how to fix it.
    stopped = {p.name: stop for p in listed if (state := states.get(p.name)) is not None
               and (stop := integrity.blocked(memory, state_path(p), p.name, state, at)) is not None}
    rows = []
    for program in listed:
        playbook = find_playbook(program, root)
        strategy_name = playbook.name if playbook else "default"
        if program.name in damaged:
            rows.append([_name(program.name, strategy_name), Text("❌ state file unreadable"), *["—"] * 5])
            continue
        row = _row(program, states.get(program.name), now)
        if program.name in stopped:
            row[0] = _status_cell(f"🛑 blocked: {stopped[program.name][0]}", ())
        rows.append([_name(program.name, strategy_name), *row])
    table = _table(rows)
    console.print(table)
    lines, sandbox_problems = isolation_report(listed)
    for line in [*sandbox_problems, *lines]:
        console.print(escape(line), style=None if line.startswith("sandbox:") else "yellow", highlight=False)
    for problem in problems:
        console.print(f"[red]✗[/] {escape(str(problem))}")
    for err in [*damaged.values(), *(error for _, error in stopped.values())]:
        console.print(f"[red]✗[/] {escape(str(err))}")
    if args.program and args.program not in damaged:
        program = find_program(programs, args.program)
        machine = states[args.program].machine if states.get(args.program) else None
        # Whole here: the overview cuts the status (a pause reason quotes an error) to one line.
        console.print(f"\n[bold]Status[/]: {shown(_status(program, machine, now))}")
        _details(states.get(args.program), console)
        _stale(memory, at, program, states.get(args.program), console)
    return 1 if args.program in damaged else 0


def _print_mermaid(root: Path, programs: list[Program], name: str | None, console: Console) -> int:
    if not name:
        raise AutoloopError("--mermaid needs a program: autoloop status PROGRAM --mermaid")
    memory = MemoryStore(root)
    memory.sync()
    charts = program_charts(memory, find_program(programs, name))
    console.out(
        charts or f"{name} has no evaluated candidate yet; run `autoloop run --program {name}` first", highlight=False
    )
    return 0


# The overview fits 100 columns without cutting a figure: the figure columns are as wide as their longest word
# (a timestamp wraps at its spaces), and only the program's name and its status give way, the status to one line.
_COLUMNS = ("program", "status", "best (initial)", "iter.", "last run (UTC)", "next due (UTC)", "spent")
_FIGURES = frozenset(_COLUMNS[2:])
_NUMBERS = frozenset(_COLUMNS[2:4])
_TIMES = frozenset(_COLUMNS[4:6])


def _table(rows: list[list[Any]]) -> Table:
    """Returns the overview: one row per program, each figure whole (see _COLUMNS)."""
    table = Table(title="autoloop programs", box=box.MINIMAL_HEAVY_HEAD, pad_edge=False)
    for index, column in enumerate(_COLUMNS):
        if column in _FIGURES:
            cells = [str(row[index]) for row in rows]
            # A timestamp stays on one line; other figures may wrap between their words.
            words = cells if column in _TIMES else [word for cell in cells for word in cell.split()]
            words += column.split()
            justify = "right" if column in _NUMBERS else "left"
            table.add_column(column, width=max(cell_len(word) for word in words), justify=justify)
        else:
            table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _name(program: str, strategy: str) -> Text:
    """Returns the program's cell: its name, and its strategy below it."""
    return Text.assemble(plain(program), "\n", (plain(strategy), "dim"))


def _status_cell(status: str, recent: tuple[str, ...]) -> Group:
    """Returns the status on one line (cut with … here; `autoloop status PROGRAM` shows it whole), then the
    recent statuses."""
    line = Text(plain(status), no_wrap=True, overflow="ellipsis")
    return Group(line, Text("".join(STATUS_ICONS.get(s, "·") for s in recent), overflow="fold"))


def _row(program: Program, state: statefile.StateFile | None, now: datetime) -> list[Any]:
    machine = state.machine if state else None
    due = schedule.next_due(program, machine)
    best = format_metric(machine.best_metric if machine else None)
    initial = format_metric(machine.initial_metric if machine else None)
    return [
        _status_cell(_status(program, machine, now), machine.recent_statuses if machine else ()),
        _best(machine, best if initial == "—" else f"{best} ({initial})"),
        str(machine.iteration_count if machine else 0),
        _when(machine.last_run, now) if machine and machine.last_run else "never",
        # A paused, completed or plateaued program is due only once resumed.
        "—" if schedule.skip_reason(machine, now, program.config.parallel or 1) else
        "now" if due is None or due <= now else _when(due, now),
        budget.describe(program.config, machine or statefile.MachineState(), now),
    ]


def _when(moment: datetime, now: datetime) -> str:
    """Returns a UTC time for the overview: month, day and time this year, else the date with its year."""
    return moment.strftime("%m-%d %H:%M" if moment.year == now.year else "%Y-%m-%d")


def _best(machine: statefile.MachineState | None, shown: str) -> str:
    """Returns the best metric's cell: below it its held-out value and a stale mark, when there are."""
    held = machine.holdout_metric if machine else None  # `status PROGRAM` adds the search metric and the gap
    lines = [shown, *([f"held-out {format_metric(held)}"] if held is not None else [])]
    return "\n".join([*lines, "⚠️ stale"] if machine and machine.stale_reason else lines)


def _status(program: Program, machine: statefile.MachineState | None, now: datetime) -> str:
    if program.unconfigured:
        return "📝 unconfigured"
    if machine is None:
        return "🟢 new"
    if machine.completed:
        return "✅ completed"
    reason = schedule.skip_reason(machine, now, program.config.parallel or 1)
    if reason:
        return f"⏸️ {reason}"  # a pause reason quotes an error note: the caller makes it plain text
    if machine.consecutive_errors:
        return f"⚠️ {machine.consecutive_errors} error(s)"
    return "🟢 active"


def _details(state: statefile.StateFile | None, console: Console) -> None:
    if state is None:
        console.print("no iterations yet")
        return
    if state.machine.stale_reason:
        console.print(f"[yellow]⚠️ stale:[/] {escape(shown(state.machine.stale_reason))}")
    held = holdout_text(state.machine.best_metric, state.machine.holdout_metric)
    if held is not None:
        console.print(f"Held out: {escape(held)}")
    console.print("\n[bold]Recent iterations[/]")
    for entry in state.history[:10]:
        if entry.is_range:
            console.print("  " + shown(entry.text.strip().splitlines()[0].lstrip("# ")))
            continue
        mark = STATUS_ICONS.get(entry.status or "", "·")
        metric = format_metric(entry.metric)
        console.print(f"  {entry.iteration:>4} {mark} {entry.status or '?':<9} {metric:>10}  {shown(entry.change)}")
    _skipped_summary(state, console)
    if state.section_text(statefile.POPULATION) is not None:
        _population_summary(population_of(state), state.machine.metric_direction, console)
    _models_summary(state, console)
    _prompts_summary(state, console)


def _skipped_summary(state: statefile.StateFile, console: Console) -> None:
    """Prints the iterations of the history whose candidate the novelty filter did not evaluate, and why."""
    detailed = [entry for entry in state.history if not entry.is_range]
    skipped = [(entry.iteration, found.group(0)) for entry in detailed if (found := _NOT_EVALUATED.search(entry.text))]
    if not skipped:
        return
    console.print(f"\n[bold]Not evaluated[/] (novelty filter): {len(skipped)} of the last {len(detailed)} iterations")
    for iteration, note in skipped[:5]:
        console.print(f"  {iteration:>4} {shown(note)}", highlight=False)


def _models_summary(state: statefile.StateFile, console: Console) -> None:
    """Prints each model's calls, accepted share, improvement and spend (nothing before the first model call)."""
    rows = summary_rows(statefile.models_of(state))
    if not rows:
        return
    table = Table("model", "calls", "accepted", "improvement", "spend", title="models")
    for row in rows:
        table.add_row(*(escape(row[key]) for key in ("model", "calls", "accepted", "improvement", "spend")))
    console.print(table)


def _prompts_summary(state: statefile.StateFile, console: Console) -> None:
    """Prints each prompt variant's uses, accepted share, mean gain per use, tokens and (cut) instruction."""
    rows = statefile.prompts_of(state).rows
    if not rows:
        return
    table = Table("variant", "uses", "accepted", "mean gain", "tokens", "instruction", title="prompts")
    for column in table.columns[:5]:  # the instruction gives way; the figures stay whole
        column.no_wrap = True
    for row in rows:
        accepted = f"{row.accepted} ({row.accepted / row.calls:.0%})" if row.calls else "0"
        mean = format_metric(row.improvement / row.calls if row.calls else None)
        table.add_row(escape(row.name), str(row.calls), accepted, mean, str(row.tokens),
                      escape(trim(row.instruction, _INSTRUCTION_SHOWN) or "—"))
    console.print(table)


def _stale(
    memory: MemoryStore, at: str | None, program: Program, state: statefile.StateFile | None, console: Console
) -> None:
    """Prints the Population entries whose code conflicts with a later change of the Target on the default branch."""
    if state is None or state.section_text(statefile.POPULATION) is None:
        return
    root = memory.repo_root
    try:
        primary = primary_target(program, root)
    except ProgramError:
        return
    read = functools.partial(memory.read, at=at)
    rebased = stale_parents.rebase_at(
        root, program.name, primary, stale_parents.default_tip(root), read, population_of(state, read)
    )
    if rebased.stale:
        ids = ", ".join(f"#{i}" for i in rebased.stale)
        console.print(f"[yellow]stale[/] (their code conflicts with a later change of {primary} on the default "
                      f"branch; not chosen as parents until rebased by hand): {ids}")


def _population_summary(population: pop.Population, direction: str, console: Console) -> None:
    """Prints the population's size and, per island, its member count and best candidate."""
    candidates = population.candidates
    scored = [c for c in candidates if pop.oriented(c.fitness, direction) is not None]
    console.print(
        f"\n[bold]Population[/]: {len(candidates)} candidates, {len(scored)} scored, next id {population.next_id}"
    )
    table = Table("island", "members", "best", "best fitness", "cells")
    for island in sorted({c.island for c in candidates}, key=lambda i: -1 if i is None else i):
        members = [c for c in candidates if c.island == island]
        best = max(members, key=lambda c: (pop.oriented(c.fitness, direction) or float("-inf"), c.id))
        cells = sorted({" · ".join(c.cell) for c in members if c.cell})
        table.add_row("—" if island is None else str(island), str(len(members)), f"#{best.id}",
                      format_metric(best.fitness), ", ".join(cells))
    console.print(table)
