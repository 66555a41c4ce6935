"""Publishing a tick: the outcomes of a program's k parallel slots, consolidated into one update.

Every slot's iteration is recorded under its own number, in slot order. Of the improving candidates
(all judged against the same best), the best goes to `autoloop/<name>`; each one that lost to a
sibling is recorded as rejected, keeps its Population entry, and its commit is kept at
`refs/autoloop/slots/<name>/<iteration>` (pushed too), so nothing is dropped. The records of the tick
go to the memory branch as one commit.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

from autoloop_py.loop.checkout.lock import program_lock
from autoloop_py.loop.checkout.workspace import Workspace, push_aside
from autoloop_py.loop.evaluation import checks
from autoloop_py.loop.record import publish_guard as guard
from autoloop_py.loop.record import recovery
from autoloop_py.loop.record.outcome import Outcome, OutcomeError
from autoloop_py.loop.record.publishing import (
    branch_tree, check_outcome, iteration_data, keep_outcome, known_commit, rechecked_state, runner_of_commit,
)
from autoloop_py.loop.record.recording import load_state, record_iteration, recorded_before, state_path
from autoloop_py.program.model import Program
from autoloop_py.program.objectives import Objective, Scalarisation
from autoloop_py.state.file import StateFile
from autoloop_py.state.history import KEY_TRAILER, IterationRecord
from autoloop_py.state.machine import is_improvement
from autoloop_py.state.memory import MemoryStore
from autoloop_py.strategies import pareto

log = logging.getLogger(__name__)

SLOTS_REF = "refs/autoloop/slots"


@dataclass(frozen=True)
class Published:
    """One slot's outcome as the tick recorded it.

    Attributes:
      outcome: the slot's outcome.
      record: the record written (None when no iteration ran in the slot).
    """

    outcome: Outcome
    record: IterationRecord | None


def side_ref(program: str, iteration: int) -> str:
    """Returns the ref that keeps the commit of an improving candidate that lost to a sibling of its tick."""
    return f"{SLOTS_REF}/{program}/{iteration}"


def check_tick(outcomes: Sequence[Outcome], program: str) -> None:
    """Raises OutcomeError unless the outcomes are one program's slots with distinct iteration numbers."""
    others = sorted({o.program for o in outcomes} - {program})
    if others:
        raise OutcomeError(f"a tick publishes one program; outcomes of {program!r} and {', '.join(others)} were given")
    numbers = [o.iteration for o in outcomes if o.record is not None]
    repeated = sorted({n for n in numbers if numbers.count(n) > 1})
    if repeated:
        raise OutcomeError(f"two outcomes of {program!r} claim iteration {repeated[0]}; each slot records its own")


def winner(outcomes: Sequence[Outcome], direction: str, objectives: Sequence[Objective] = (),
           scalarisation: Scalarisation | None = None) -> Outcome | None:
    """Returns the accepted outcome with the best metric (ties: the lowest iteration), None when none improved.

    With objectives, as acceptance keeps a candidate: the best metric among those no sibling dominates (or, with a
    scalarisation, the best weighted sum).
    """
    accepted = [o for o in sorted(outcomes, key=lambda o: o.iteration)
                if o.record is not None and o.record.status == "accepted" and o.record.metric is not None]
    if objectives:
        values = {o.key: pareto.parse_values(dict(o.record.extra).get(pareto.BULLET, "")) for o in accepted if o.record}
        accepted = [o for o in accepted if all(objective.name in values[o.key] for objective in objectives)]
        if scalarisation is not None:
            sums = {o.key: pareto.scalarised(values[o.key], scalarisation) for o in accepted}
            return max(accepted, key=lambda o: s if (s := sums[o.key]) is not None else -math.inf, default=None)
        vectors = {o.key: pareto.objective_vector(values[o.key], objectives) for o in accepted}
        accepted = [o for o in accepted if not any(pareto.dominates(vectors[p.key], vectors[o.key]) for p in accepted)]
    best: tuple[Outcome, float] | None = None
    for outcome in accepted:
        assert outcome.record is not None and outcome.record.metric is not None
        if best is None or is_improvement(outcome.record.metric, best[1], direction):
            best = (outcome, outcome.record.metric)
    return best[0] if best is not None else None


def lost_note(record: IterationRecord, won: Outcome, ref: str, population: bool = True) -> str:
    """Returns the history note of an improving candidate that lost to a sibling of its tick.

    population: the program runs a strategy, whose Population keeps the candidate.
    """
    assert won.record is not None
    kept = "kept in the Population, its commit at" if population else "its commit is kept at"
    return (f"improved on the best with {record.metric:g}, but slot iteration {won.iteration} of the same tick did "
            f"better ({won.record.metric:g}) and took the branch; {kept} {ref}")


def publish_tick(
    root: Path, program: Program, outcomes: Sequence[Outcome], *, budget: int, run_url: str | None = None,
    base_branch: str | None = None, ci_gate: bool = False,
) -> list[Published]:
    """Checks every outcome, keeps the tick's best improver, keeps the others aside, and records all in one commit.

    Nothing is written when an outcome is refused. Returns the slots in iteration order.
    """
    for outcome in outcomes:
        check_outcome(root, program, outcome)
    check_tick(outcomes, program.name)
    ordered = sorted(outcomes, key=lambda o: o.iteration)
    ran = [o for o in ordered if o.record is not None]
    if not ran:
        return [Published(o, None) for o in ordered]
    with program_lock(root, program.name):
        memory = MemoryStore(root)
        memory.sync()
        recovery.reconcile(root, program, memory, budget, ci_gate=ci_gate)
        state = rechecked_state(memory, program, ran, load_state(memory, program, budget), budget)
        guard.refuse(program.name, guard.numbered_claims(ordered, state))
        ran = numbered([o for o in ran if not recorded_before(state, o.key, memory, state_path(program))],
                       state.machine.iteration_count + 1)
        guard.refuse(program.name, guard.state_problems(state, program, [o.record for o in ran if o.record], budget))
        if ran:
            aside: dict[str, str] = {}
            records, bases = _kept(root, program, ran, run_url, base_branch, ci_gate, aside, state)
            applied = _record_all(memory, program, ran, records, bases, budget)
            push_aside(root, aside)  # only now: a tick that failed before its record pushed nothing of its losers
        else:
            applied = {}  # a publish that ran before recorded this tick already
    final = {_token(o.key): o for o in ran}  # each slot as numbered when recorded
    slots = [final.get(_token(o.key), o) if o.record is not None else o for o in ordered]
    return [Published(o, applied.get(o.key)) for o in slots]


def numbered(ran: Sequence[Outcome], first: int) -> list[Outcome]:
    """Returns the outcomes numbered first, first+1, … in their order, their keys renamed to match.

    The slots numbered themselves next+i from the state they read; a slot whose job failed, or a run
    recorded meanwhile, would leave a gap or a repeat, and every iteration needs a number of its own.
    """
    return [guard.renumbered(outcome, first + offset) for offset, outcome in enumerate(ran)]


def _token(key: str) -> str:
    """Returns the random part of an idempotency key (what stays when a slot is renumbered)."""
    return key.rsplit(":", 1)[-1]


def _kept(
    root: Path, program: Program, ran: Sequence[Outcome], run_url: str | None, base_branch: str | None, ci_gate: bool,
    aside: dict[str, str], state: StateFile | None = None,
) -> tuple[dict[str, IterationRecord], dict[str, str | None]]:
    """Returns each slot's record (after keeping its candidate where it belongs) and its default-branch base.

    aside: filled with the side refs (ref → sha) of the losing improvers, committed here and pushed by the caller.
    state: the state as recorded now, which a winner made on a branch that moved since must beat (keep_outcome).
    """
    records: dict[str, IterationRecord] = {}
    bases: dict[str, str | None] = {}
    won = winner(ran, program.direction, program.config.objectives, program.config.objective_scalarisation)
    for outcome in ran:
        assert outcome.record is not None
        records[outcome.key] = replace(outcome.record, key=outcome.key, run_url=run_url, commit=None)
        bases[outcome.key] = known_commit(root, outcome.base_commit)
    _check_edits(root, program, [o for o in ran if o.record is not None and o.record.status == "accepted"], base_branch)
    # The losers first: they are committed on the branch as the tick found it, before the winner moves it.
    for outcome in ran:
        lost = outcome is not won and outcome.record is not None and outcome.record.status == "accepted"
        if won is not None and lost:
            records[outcome.key] = _aside(root, program, outcome, records[outcome.key], won, base_branch, aside)
    if won is not None:
        records[won.key], bases[won.key] = keep_outcome(root, program, won, records[won.key], base_branch, ci_gate,
                                                        state)
    return records, bases


def _check_edits(root: Path, program: Program, accepted: Sequence[Outcome], base_branch: str | None) -> None:
    """Raises OutcomeError, before anything is written, when an accepted slot edits outside its markers."""
    if not accepted:
        return
    with Workspace(root, program.name, base_branch=base_branch) as workspace:
        workspace.prepare()
        for outcome in accepted:
            found = checks.violations(program, workspace.files(outcome.changes), outcome.changes)
            if found:
                raise OutcomeError(f"refusing the outcomes of '{program.name}', nothing was written: iteration "
                                   f"{outcome.iteration}: " + "; ".join(found))


def _aside(
    root: Path, program: Program, outcome: Outcome, record: IterationRecord, won: Outcome, base_branch: str | None,
    aside: dict[str, str],
) -> IterationRecord:
    """Commits a losing improver on the tick's base, keeps it at its side ref; returns its record (rejected)."""
    ref = side_ref(program.name, outcome.iteration)
    with Workspace(root, program.name, base_branch=base_branch) as workspace:
        workspace.prepare()
        if branch_tree(root, workspace.branch) != outcome.base_tree:
            notes = (f"autoloop/{program.name} changed after this candidate was evaluated, so it was judged against "
                     "a stale base; not kept")
            return replace(record, status="rejected", notes=notes)
        guard.refuse(program.name, checks.violations(program, workspace.files(outcome.changes), outcome.changes))
        workspace.write(outcome.changes)
        assert record.metric is not None
        marks = recovery.trailers(outcome.key, record.metric, record.baseline, record.extra)
        message = f"[Autoloop: {program.name}] Iteration {outcome.iteration} (lost to a sibling): {record.change}"
        aside[ref] = workspace.keep_aside(recovery.with_trailers(message, marks), ref)
    population = outcome.candidate_source is not None  # what the publish records as the slot's Population entry
    return replace(record, status="rejected", notes=lost_note(record, won, ref, population))


def _record_all(
    memory: MemoryStore, program: Program, ran: Sequence[Outcome], records: Mapping[str, IterationRecord],
    bases: Mapping[str, str | None], budget: int,
) -> dict[str, IterationRecord]:
    """Records every slot in iteration order as one memory commit (redone on fresh text when raced)."""
    path = state_path(program)
    written: dict[str, str | bytes] = {}
    applied: dict[str, IterationRecord] = {}
    # The strategy the slots proposed with: that of the commit they ran on (the tick's slots share one).
    commit = known_commit(memory.repo_root, next((o.base_commit for o in ran if o.base_commit), None))
    with runner_of_commit(memory.repo_root, program, commit) as runner:

        def change(text: str | None) -> str:
            batch = BatchMemory(lambda p: text if p == path else memory.read(p))
            applied.clear()
            for outcome in ran:
                data = iteration_data(runner, outcome, records[outcome.key], bases[outcome.key])
                applied[outcome.key] = record_iteration(batch, program, records[outcome.key], budget, data)
            written.clear()
            written.update(batch.files)
            result = written.pop(path, text)
            return result if isinstance(result, str) else (result or b"").decode("utf-8")

        memory.update(path, change, tick_message(program.name, ran, records), extra=lambda: dict(written))
    return applied


def tick_message(program: str, ran: Sequence[Outcome], records: Mapping[str, IterationRecord]) -> str:
    """Returns the memory commit message of a tick, one key trailer per slot (the newest last)."""
    first, last = ran[0].iteration, ran[-1].iteration
    statuses = ", ".join(f"{o.iteration} {records[o.key].status}" for o in ran)
    subject = f"[Autoloop: {program}] tick of {len(ran)} (iterations {first}–{last}): {statuses}"[:200]
    trailers = "\n".join(f"{KEY_TRAILER}: {o.key}" for o in ran)
    return f"{subject}\n\n{trailers}"


class BatchMemory:
    """The memory branch as a tick's records see it: reads go through, updates stay here until one commit."""

    def __init__(self, read: Callable[[str], str | None]) -> None:
        self._read = read
        self.files: dict[str, str | bytes] = {}

    def read(self, path: str) -> str | None:
        """Returns the text the batch wrote at path, else the branch's."""
        if path in self.files:
            value = self.files[path]
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
        return self._read(path)

    def update(self, path: str, change: Callable[[str | None], str], message: str,
               extra: Callable[[], Mapping[str, str | bytes]] | None = None) -> str:
        """Applies change to the batch's text at path and keeps the extra files; returns '' (nothing is committed)."""
        text = change(self.read(path))
        self.files.update(extra() if extra else {})
        self.files[path] = text
        return ""
