"""A tick on one machine: k slots of a program propose at once in k processes, then one publish records them all.

`autoloop run --parallel k --barrier` runs ticks; without `--barrier` the slots run without one (async_slots.py).

The same split as the Actions workflow: each slot is `autoloop run --slot I/K --outcome-dir D_I`
(read-only, its own outcome), and tick_publish consolidates the outcomes as `autoloop publish D_0 …`
does. Each slot opens its own git session; a forked slot never uses the parent's.
"""

from __future__ import annotations

import logging
import multiprocessing
import tempfile
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from autoloop_py.errors import AutoloopError
from autoloop_py.loop.checkout.lock import program_lock
from autoloop_py.loop.checkout.workspace import Workspace
from autoloop_py.loop.iteration.iteration import IterationOutcome, run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.record.outcome import OUTCOME_FILE, Outcome, idle_outcome, read_outcome, write_outcome
from autoloop_py.loop.record.recording import load_state
from autoloop_py.loop.slots.barrier_publish import Published, publish_tick
from autoloop_py.program.model import Program
from autoloop_py.state.memory import MemoryStore, pack_if_due
from autoloop_py.strategies.slots import Slot

log = logging.getLogger(__name__)


def run_tick(root: Path, program: Program, count: int, options: RunOptions) -> list[IterationOutcome]:
    """Runs `count` slots of the program in parallel processes and publishes the tick; returns each slot's account."""
    if not options.writes or options.slot is not None:
        raise AutoloopError("a tick of parallel slots records what it runs: it cannot be a dry run or one slot")
    bring_up_to_date(root, program, options.base_branch, options.budget)
    with tempfile.TemporaryDirectory(prefix="autoloop-tick-") as folder:
        dirs = [Path(folder) / f"slot-{i}" for i in range(count)]
        slots = [replace(options, slot=Slot(i, count), outcome_dir=dirs[i]) for i in range(count)]
        context = multiprocessing.get_context(start_method())
        with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
            # Each child runs its slot's iteration into the slot's outcome directory.
            futures = [pool.submit(run_iteration, root, program, slot) for slot in slots]
            accounts = [_account(future, slot) for future, slot in zip(futures, slots)]
        if all(a is None for a in accounts):
            futures[0].result()  # every slot failed: say why, as a single iteration would
        outcomes = [_outcome_of(d, program.name) for d in dirs]
    published = publish_tick(root, program, outcomes, budget=options.budget, run_url=options.run_url,
                             base_branch=options.base_branch)
    # Packing counts recorded iterations: a tick may step over the multiple of PACK_EVERY, so each number is tried.
    if any(pack_if_due(root, p.outcome.iteration) for p in published if p.record is not None):
        log.debug("packed the repository after the tick")
    paired = sorted(zip(outcomes, accounts), key=lambda pair: pair[0].iteration)  # publish_tick's order
    return [account_of(p, a) for p, (_, a) in zip(published, paired)]


def _account(future: Future[IterationOutcome], slot: RunOptions) -> IterationOutcome | None:
    """Returns a slot's account, None when its process failed (the tick is published without it)."""
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001 - one slot's failure must not discard its siblings' outcomes
        log.error("slot %s of the tick failed, it is left out: %s", slot.slot, error)
        return None


def start_method() -> str:
    """Returns fork when this process runs no other thread (a fresh interpreter costs a second), else spawn.

    A thread (litellm's background import, a progress display) may hold a lock at the fork, and the child
    would wait for it forever.
    """
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def bring_up_to_date(root: Path, program: Program, base_branch: str | None, budget: int) -> int:
    """Syncs the memory branch and the program branch once, so the slots that start together find nothing to move.

    Returns the program's recorded iteration count.
    """
    with program_lock(root, program.name):
        memory = MemoryStore(root)
        memory.sync()
        with Workspace(root, program.name, base_branch=base_branch) as workspace:
            workspace.prepare()
        return load_state(memory, program, budget).machine.iteration_count


def _outcome_of(directory: Path, program: str) -> Outcome:
    """Returns the slot's outcome; a slot that stopped before one (a budget pause, a failure) leaves an idle one."""
    if not (directory / OUTCOME_FILE).exists():
        write_outcome(directory, idle_outcome(program, "no iteration ran in this slot"))
    return read_outcome(directory)


def account_of(published: Published, account: IterationOutcome | None = None) -> IterationOutcome:
    """Returns the account of one slot as the tick recorded it."""
    outcome, record = published.outcome, published.record
    if record is None:
        status = account.status if account is not None else "error"  # no account: the slot's process failed
        return IterationOutcome(outcome.program, outcome.iteration, status, outcome.waiting or "no iteration", None,
                                outcome.best_before, reason=outcome.waiting or None)
    return IterationOutcome(
        program=outcome.program, iteration=outcome.iteration, status=record.status, summary=record.change,
        metric=record.metric, best_before=outcome.best_before, commit=record.commit,
        reason=record.notes if record.status != "accepted" else None,
        timings=account.timings if account is not None else {},
    )

