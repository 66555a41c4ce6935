"""Slots without a barrier: k iterations of a program in flight, each recorded as soon as it ends.

`autoloop run --parallel k` keeps k slots running in k lane processes (lanes.py). When one ends, its
outcome is published alone (publish_tick of one slot, under the program's lock), so it takes the next
iteration number at the moment it is recorded, not the one it saw at launch; then the next slot starts
on the freed lane at once, and it reads the state that includes every record made before it. A slot
that improved on a best that a later record beat finds the program branch moved: the publish records
it as rejected (judged against a stale base) and the branch keeps the newer best.

A slot is `Slot(lane, k, launch, busy)`: the lane keeps slots in flight on distinct locks (and on distinct
islands where a strategy assigns them by index), the launch number (counted from 0 in the run) keeps every slot's
random draws distinct, and busy holds the islands the slots in flight claimed (island_claims.py), which a
strategy that picks its island from the state (AdaEvolve) keeps the new slot off. A slot whose process
fails, or whose outcome is refused (it ran candidate code: what it left is checked as the workflow's
publish checks it), is recorded as an error and the run goes on; a setting every slot would trip on (AutoloopError)
stops launching, and is raised once the slots in flight are recorded. A budget pause, a completed or
paused program, or the first Ctrl-C stop launching too and the slots in flight are still recorded; a
second Ctrl-C (or a SIGTERM: the job is being stopped) abandons them: those whose outcome is written are
recorded, the others are terminated and named, nothing of theirs recorded.
"""

from __future__ import annotations

import functools
import logging
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from autoloop_py.errors import AutoloopError
from autoloop_py.loop.iteration.iteration import IterationOutcome
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.record import island_claims, recovery
from autoloop_py.loop.record.outcome import OUTCOME_FILE, Outcome, OutcomeError, read_outcome
from autoloop_py.loop.record.publish_guard import renumbered
from autoloop_py.loop.record.publishing import branch_tree
from autoloop_py.loop.record.recording import error_record, load_state
from autoloop_py.loop.slots.barrier import account_of, bring_up_to_date, start_method
from autoloop_py.loop.slots.barrier_publish import publish_tick
from autoloop_py.loop.slots.lanes import Finished, Lanes
from autoloop_py.loop.tick.schedule import skip_reason
from autoloop_py.program.model import Program
from autoloop_py.sandbox.runner import Terminated, first_interrupt_deferred
from autoloop_py.state.memory import MemoryStore, pack_if_due
from autoloop_py.strategies.slots import Slot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Launch:
    """One slot the run started.

    Attributes:
      number: the launch's place in the run (from 0).
      lane: the lane it runs in.
      directory: where its process writes its outcome.
    """

    number: int
    lane: int
    directory: Path


@dataclass
class Progress:
    """What the run did so far: the accounts recorded, and why it stopped launching (None: it goes on)."""

    accounts: list[IterationOutcome]
    stopping: str | None = None
    failure: AutoloopError | None = None
    recorded: int = 0  # the state's iteration count after the last record
    launched: int = 0  # the slots started so far


def run_slots(
    root: Path, program: Program, total: int, count: int, options: RunOptions,
    report: Callable[[IterationOutcome], None] = lambda account: None,
    say: Callable[[str], None] = log.warning, deadline: float | None = None,
) -> list[IterationOutcome]:
    """Runs `total` iterations of the program, `count` at a time, recording each as it ends; returns their accounts.

    report: called with each slot's account right after it is recorded; say: tells the user why the run stops early.
    deadline: the time.monotonic() after which no slot starts (the job's time is nearly up).
    """
    if not options.writes or options.slot is not None:
        raise AutoloopError("slots without a barrier record what they run: they cannot be a dry run or one slot")
    progress = Progress([], recorded=bring_up_to_date(root, program, options.base_branch, options.budget))
    running: dict[int, Launch] = {}
    with tempfile.TemporaryDirectory(prefix="autoloop-slots-") as folder, Lanes(count, start_method) as lanes:
        try:
            while True:
                try:
                    if not _turn(lanes, running, progress, Path(folder), total, root, program, options, report,
                                 deadline):
                        break
                except KeyboardInterrupt as stop:
                    if progress.stopping == "interrupted" or isinstance(stop, Terminated):  # SIGTERM: job ending
                        raise
                    progress.stopping = "interrupted"
                    say(f"stopping: {len(running)} slot(s) in flight are recorded when they end (Ctrl-C again "
                        "abandons them)")
        except KeyboardInterrupt:  # wherever the second Ctrl-C lands, even while the first one is being told
            _abandon(lanes, running, progress, root, program, options, report, say)
            raise
    if progress.stopping not in (None, "interrupted"):
        say(f"stopping: {progress.stopping}")
    if progress.failure is not None:
        raise progress.failure
    if progress.stopping == "interrupted":
        raise KeyboardInterrupt
    return progress.accounts


def _turn(
    lanes: Lanes, running: dict[int, Launch], progress: Progress, folder: Path, total: int, root: Path,
    program: Program, options: RunOptions, report: Callable[[IterationOutcome], None], deadline: float | None,
) -> bool:
    """Starts slots on the free lanes, waits for some to end and records them; returns False once none runs."""
    while progress.stopping is None and progress.launched < total and (lane := lanes.free()) is not None:
        if deadline is not None and time.monotonic() > deadline:
            progress.stopping = "the job's time is nearly up"
            break
        launch = Launch(progress.launched, lane, folder / f"launch-{progress.launched}")
        busy = island_claims.claimed(other.directory for other in running.values())
        slot = replace(options, slot=Slot(lane, lanes.count, progress.launched, busy), outcome_dir=launch.directory)
        running[lane] = launch  # before the start: a Ctrl-C between the two still finds the slot to name
        lanes.start(lane, root, program, slot)
        progress.launched += 1
    for lane in [lane for lane in running if lane not in lanes.busy]:  # a Ctrl-C came before its start took
        del running[lane]
    if not running:
        return False
    finished = sorted(lanes.wait(), key=lambda f: running[f.lane].number)
    with first_interrupt_deferred():  # a Ctrl-C asks for these records: it is raised once they are made
        for done in finished:
            _record(running.pop(done.lane), done, progress, root, program, options, report)
    return True


def _record(
    launch: Launch, done: Finished, progress: Progress, root: Path, program: Program, options: RunOptions,
    report: Callable[[IterationOutcome], None],
) -> None:
    """Publishes one ended slot alone, reports its account and decides whether the run stops launching."""
    if done.setting and not (launch.directory / OUTCOME_FILE).exists():
        progress.failure = progress.failure or AutoloopError(done.failure or "a slot failed")
        progress.stopping = progress.stopping or "a slot failed on a setting; the slots in flight are recorded"
        return
    outcome = _outcome(launch, done, progress.recorded + 1, root, program, options.run_url)
    if outcome is None:  # the slot ran no iteration (a budget pause): nothing to record, and nothing more to run
        why = f"{done.account.status}: {done.account.reason}" if done.account is not None else "not running"
        progress.stopping = progress.stopping or f"{program.name} is {why}"
        return
    # The slot numbered itself from the state it read at launch; the records made since move it on. (A run
    # recorded meanwhile by another process still moves it again, with a warning, under the program's lock.)
    outcome = renumbered(outcome, progress.recorded + 1, expected=True)
    publish = functools.partial(publish_tick, root, program, budget=options.budget, run_url=options.run_url,
                                base_branch=options.base_branch)
    try:
        published = publish([outcome])[0]
    except OutcomeError as err:  # the slot ran candidate code: what it left is untrusted, and refused alone
        refused = _error_outcome(launch, f"left an outcome that was refused: {err}", outcome.iteration, root,
                                 program, options.run_url)
        published = publish([refused])[0]
    account = account_of(published, done.account)
    if published.record is not None:
        progress.recorded = max(progress.recorded, published.outcome.iteration)
        pack_if_due(root, published.outcome.iteration)
    progress.accounts.append(account)
    report(account)
    # No further slot starts once the last record is in (completed, paused); a plateau holds nothing back.
    held = skip_reason(load_state(MemoryStore(root), program, options.budget).machine)
    if held is not None and not held.startswith("plateau"):
        progress.stopping = progress.stopping or f"{program.name} is {held}"


def _outcome(
    launch: Launch, done: Finished, number: int, root: Path, program: Program, run_url: str | None
) -> Outcome | None:
    """Returns what to record of an ended slot: its outcome, an error when its process failed, None when it ran none."""
    if (launch.directory / OUTCOME_FILE).exists():
        try:
            outcome = read_outcome(launch.directory)
        except OutcomeError as err:
            return _error_outcome(launch, f"left an outcome that was refused: {err}", number, root, program, run_url)
        return outcome if outcome.record is not None else None
    if done.account is not None and done.failure is None:
        return None
    return _error_outcome(launch, f"failed before its outcome: {done.failure}", number, root, program, run_url)


def _error_outcome(
    launch: Launch, what: str, number: int, root: Path, program: Program, run_url: str | None
) -> Outcome:
    """Returns the outcome that records a slot as an error (its process failed, or its outcome was refused)."""
    why = f"slot {launch.number} (lane {launch.lane}) {what}"
    log.error("%s: %s", program.name, why)
    record = error_record(datetime.now(timezone.utc), "slot failed", why, run_url)
    tree = branch_tree(root, f"autoloop/{program.name}")
    return Outcome(program.name, number, recovery.new_key(program.name, number), tree, None, record)


def _abandon(
    lanes: Lanes, running: dict[int, Launch], progress: Progress, root: Path, program: Program, options: RunOptions,
    report: Callable[[IterationOutcome], None], say: Callable[[str], None],
) -> None:
    """On a second Ctrl-C: records the slots whose outcome is already written, terminates the others and names them."""
    lanes.abandon()
    for lane, launch in sorted(running.items(), key=lambda item: item[1].number):
        if (launch.directory / OUTCOME_FILE).exists():
            _record(launch, Finished(lane, None), progress, root, program, options, report)
        else:
            say(f"abandoned slot {launch.number} (lane {lane}): it was interrupted, nothing of it was recorded")
    running.clear()
