"""Scheduling rules: which programs are due, which are skipped and why, and which one runs next."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Mapping, Protocol, Sequence

from autoloop_py.errors import ProgramError, StateError
from autoloop_py.github.agentic_scheduler import PLATEAU_LENGTH, overdue_key
from autoloop_py.program.interval import parse_schedule
from autoloop_py.program.model import Program
from autoloop_py.state import budget
from autoloop_py.state.machine import RECENT_LIMIT
from autoloop_py.state.parts import utc


class MachineView(Protocol):
    """The Machine State fields the scheduler reads (state.MachineState satisfies it)."""

    @property
    def last_run(self) -> datetime | None: ...

    @property
    def paused(self) -> bool: ...

    @property
    def pause_reason(self) -> str | None: ...

    @property
    def completed(self) -> bool: ...

    @property
    def recent_statuses(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Skip:
    """A program that will not run now, with the reason and (for 'not due yet') when it will."""

    name: str
    reason: str
    next_due: datetime | None = None


@dataclass(frozen=True)
class Plan:
    """The scheduler's answer.

    Attributes:
      selected: the program to run now (None when nothing is due).
      due: every due program, most overdue first (selected first).
      deferred: due programs that wait for a later run.
      skipped: programs not run, each with its reason.
      unconfigured: names of template programs.
      forced: whether `selected` was named by the user.
    """

    selected: str | None
    due: tuple[str, ...]
    deferred: tuple[str, ...]
    skipped: tuple[Skip, ...]
    unconfigured: tuple[str, ...]
    forced: bool = False


def next_due(program: Program, machine: MachineView | None) -> datetime | None:
    """Returns when the program is next due (None: due now, never run or no schedule).

    Raises StateError when its Last Run is too late for that (past the year 9999 with the schedule).
    """
    interval = parse_schedule(program.config.schedule)
    if machine is None or machine.last_run is None or not interval:
        return None
    try:
        return utc(machine.last_run) + interval
    except OverflowError:
        # A hand edit or a forged record; datetime stops at the year 9999.
        raise StateError(f"'Last Run' is {machine.last_run.isoformat()}, too late to add the schedule "
                         f"({program.config.schedule}) to; correct the value", f"{program.name}.md") from None


def is_due(program: Program, machine: MachineView | None, now: datetime) -> bool:
    """Returns whether the schedule has elapsed; exactly on schedule counts as due."""
    due_at = next_due(program, machine)
    return due_at is None or utc(now) >= due_at


def skip_reason(machine: MachineView | None, now: datetime | None = None, slots: int = 1) -> str | None:
    """Returns why a program must not run (completed, paused, plateau), or None.

    With `now`, a pause for a daily budget of an earlier day no longer counts (the iteration lifts it).
    `slots`: the slots of the program's ticks, which record that many statuses at once (see plateau_reason).
    """
    if machine is None:
        return None
    if machine.completed:
        return "completed: target metric reached"
    if machine.paused and not (now is not None and budget.daily_pause_over(True, machine.pause_reason, now)):
        return f"paused: {machine.pause_reason or 'unknown'}"
    return plateau_reason(statuses_since_resume(machine), slots)


def statuses_since_resume(machine: MachineView) -> tuple[str, ...]:
    """Returns the recent statuses recorded after the last `autoloop resume` (all of them when never resumed).

    A machine with `resumed_at` and `iteration_count` (state.MachineState) counts only the statuses
    after the resume; one without them (upstream's snapshot) counts all.
    """
    statuses = tuple(machine.recent_statuses)
    # Optional fields: upstream's scheduler snapshot (agentic_scheduler.py) has no resume marker.
    resumed_at: int | None = getattr(machine, "resumed_at", None)
    if resumed_at is None:
        return statuses
    fresh = max(0, int(getattr(machine, "iteration_count", 0)) - resumed_at)
    return statuses[len(statuses) - fresh:] if fresh else ()


def plateau_reason(recent_statuses: Sequence[str], slots: int = 1) -> str | None:
    """Returns the plateau reason when the last five statuses are all rejections.

    A tick of k slots records k statuses, so a program with ticks needs 5·k rejections in a row (at most
    the RECENT_LIMIT statuses the Machine State keeps): one tick that found nothing is no plateau.
    """
    length = min(PLATEAU_LENGTH * max(1, slots), RECENT_LIMIT) if slots > 1 else PLATEAU_LENGTH
    recent = list(recent_statuses)[-length:]
    if len(recent) == length and all(s == "rejected" for s in recent):
        return f"plateau: {length} consecutive rejections"
    return None


def plan(
    programs: Sequence[Program],
    machines: Mapping[str, MachineView | None],
    now: datetime,
    forced: str | None = None,
    force: bool = False,
    default_slots: int = 1,
    rank: Callable[[Sequence[str]], list[str]] | None = None,
) -> Plan:
    """Decides which program runs now; a forced name bypasses due and skip, a pause only with force.

    default_slots: the slots of a tick for a program without `parallel:` (the workflow's `--slots`).
    rank: reorders the due programs, given most overdue first (`schedule-policy: gain`); None keeps that order.

    An unknown or unconfigured forced name raises ProgramError, and so does a paused one without force.
    """
    unconfigured = tuple(p.name for p in programs if p.unconfigured)
    due: list[Program] = []
    skipped: list[Skip] = []
    for program in programs:
        if program.unconfigured:
            continue
        machine = machines.get(program.name)
        reason = skip_reason(machine, now, program.config.parallel or default_slots)
        if reason:
            skipped.append(Skip(program.name, reason))
        elif not is_due(program, machine, now):
            skipped.append(Skip(program.name, "not due yet", next_due(program, machine)))
        else:
            due.append(program)
    due.sort(key=lambda p: overdue_key(getattr(machines.get(p.name), "last_run", None)))
    names = tuple(p.name for p in due)
    if rank is not None:
        names = tuple(rank(names))
    if forced:
        refusal = paused_refusal(forced, machines.get(forced), force)
        if refusal:
            raise ProgramError(refusal)
        return _forced_plan(forced, programs, names, tuple(skipped), unconfigured)
    selected = names[0] if names else None
    return Plan(selected, names, names[1:], tuple(skipped), unconfigured)


def paused_refusal(name: str, machine: MachineView | None, force: bool) -> str | None:
    """Returns why the named program may not run (it is paused and the run is not forced), else None."""
    if machine is None or not machine.paused or force:
        return None
    return (f"{name} is paused ({machine.pause_reason or 'no reason given'}): `autoloop resume {name}` clears the "
            "pause, or add --force to run it while it stays paused")


def _forced_plan(
    forced: str,
    programs: Sequence[Program],
    due: tuple[str, ...],
    skipped: tuple[Skip, ...],
    unconfigured: tuple[str, ...],
) -> Plan:
    available = [p.name for p in programs]
    if forced not in available:
        raise ProgramError(
            f"requested program '{forced}' not found. Available programs: {', '.join(available) or 'none'}"
        )
    if forced in unconfigured:
        path = next(p.path for p in programs if p.name == forced)
        raise ProgramError(f"{forced} still has <CUSTOMIZE…> markers to answer: `autoloop check` lists each with its "
                           f"line; answer them by hand, with --answers or `autoloop customize {forced}`, then commit "
                           "and push", path)
    deferred = tuple(n for n in due if n != forced)
    kept = tuple(s for s in skipped if s.name != forced)
    return Plan(forced, (forced, *deferred), deferred, kept, unconfigured, True)
