"""Acceptance under many objectives: the kept set read from the state file, and the verdict's history bullets.

A program whose frontmatter declares `objectives:` keeps a candidate when no candidate kept so far dominates it
(or, with `objective-scalarisation:`, when its weighted sum beats theirs); strategies/pareto.py decides. The kept
set is the Machine State's Kept Front row, which every kept candidate and measured baseline updates and folding
never drops, so acceptance reads the whole record, never a window of it. The detailed history entries that
carry an `- **Objectives**:` bullet count too (a file written before the row existed).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Mapping

from autoloop_py.program.model import Program
from autoloop_py.program.objectives import targets_met
from autoloop_py.state import file as statefile
from autoloop_py.strategies import pareto

RULE = "Acceptance"
BASELINE = "Baseline objectives"
_BULLET_RE = re.compile(r"^\s*[-*]\s+\*\*Objectives\*\*:\s*(.+?)\s*$", re.MULTILINE)
_BASELINE_RE = re.compile(r"^\s*[-*]\s+\*\*Baseline objectives\*\*:\s*(.+?)\s*$", re.MULTILINE)


def kept_metrics(state: statefile.StateFile) -> list[dict[str, float]]:
    """Returns the objective values of the Kept Front, of the baseline and of every accepted detailed history entry
    that records them."""
    kept = [dict(member) for member in state.machine.kept_front]
    for entry in state.history:
        if not entry.is_detailed:
            continue
        baseline = _BASELINE_RE.search(entry.text)
        if baseline:
            kept.append(pareto.parse_values(baseline.group(1)))
        found = _BULLET_RE.search(entry.text) if entry.status == "accepted" else None
        if found:
            kept.append(pareto.parse_values(found.group(1)))
    # The front row and the detailed entries name the same candidates: count each once.
    return [values for i, values in enumerate(kept) if values not in kept[:i]]


def judge(program: Program, metrics: Mapping[str, Any], state: statefile.StateFile,
          baseline: Mapping[str, Any] | None = None) -> pareto.Verdict | None:
    """Returns the many-objective verdict on a candidate's metrics (None when the program declares no objectives).

    `baseline`: the unchanged code's metrics, measured this iteration (the first run); it counts as kept.
    """
    config = program.config
    if not config.objectives:
        return None
    kept = kept_metrics(state) + ([dict(baseline)] if baseline is not None else [])
    return pareto.keep(metrics, kept, config.objectives, config.objective_scalarisation, config.min_delta)


def with_kept(state: statefile.StateFile, record: statefile.IterationRecord, program: Program) -> statefile.StateFile:
    """Returns the state whose Kept Front counts the record's kept objectives (and its measured baseline's).

    Under a scalarisation the front keeps only the newest kept candidate: it beat every earlier one.
    """
    if not program.config.objectives:
        return state
    added = [value for label, value in record.extra if label == BASELINE]
    kept = [value for label, value in record.extra if label == pareto.BULLET] if record.status == "accepted" else []
    return _joined(state, added + kept, program, scalar=bool(kept))


def with_entry_kept(state: statefile.StateFile, iteration: int, program: Program) -> statefile.StateFile:
    """Returns the state whose Kept Front counts the objectives of history entry `iteration`, kept only now (its CI
    passed); an entry already folded, or without them, changes nothing."""
    entry = next((e for e in state.history if e.is_detailed and e.iteration == iteration), None)
    found = _BULLET_RE.search(entry.text) if entry is not None and program.config.objectives else None
    return _joined(state, [found.group(1)], program, scalar=True) if found else state


def _joined(state: statefile.StateFile, added: list[str], program: Program, scalar: bool) -> statefile.StateFile:
    """Returns the state whose Kept Front counts each of the Objectives bullets' values `added`, in order.

    scalar: the last of them is a candidate kept (under a scalarisation it alone stays on the front).
    """
    objectives = program.config.objectives
    front = [dict(member) for member in state.machine.kept_front]
    for n, text in enumerate(added):
        values = pareto.parse_values(text)
        if any(name not in values for name in (o.name for o in objectives)):
            continue
        if program.config.objective_scalarisation is not None and scalar and n == len(added) - 1:
            front = [values]
            continue
        vector = pareto.objective_vector(values, objectives)
        vectors = [pareto.objective_vector(member, objectives) for member in front]
        if any(pareto.dominates(v, vector) or v == vector for v in vectors):
            continue
        front = [m for m, v in zip(front, vectors) if not pareto.dominates(vector, v)] + [values]
    kept_front = tuple(tuple((o.name, member[o.name]) for o in objectives if o.name in member) for member in front)
    if kept_front == state.machine.kept_front:
        return state
    return statefile.with_machine(state, replace(state.machine, kept_front=kept_front))


def bullets(program: Program, metrics: Mapping[str, Any], verdict: pareto.Verdict | None,
            baseline: Mapping[str, Any] | None = None) -> tuple[tuple[str, str], ...]:
    """Returns the history bullets that record the objectives (and the baseline's) and the rule that decided."""
    if verdict is None:
        return ()
    objectives = program.config.objectives
    first = baseline_bullets(program, baseline) if baseline is not None else ()
    return (*first, ("Objectives", pareto.objectives_text(metrics, objectives)), (RULE, verdict.rule))


def baseline_bullets(program: Program, metrics: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Returns the bullet that records the unchanged code's objectives (an as-is iteration), counted as kept."""
    if not program.config.objectives:
        return ()
    return ((BASELINE, pareto.objectives_text(metrics, program.config.objectives)),)


def with_targets(state: statefile.StateFile, record: statefile.IterationRecord, program: Program
                 ) -> statefile.StateFile:
    """Returns the state completed when a kept candidate reaches every per-objective `target-metric`."""
    targets = program.config.objective_targets
    if not targets or record.status != "accepted" or state.machine.completed:
        return state
    text = next((value for label, value in record.extra if label == "Objectives"), None)
    values = pareto.parse_values(text) if text is not None else {}
    if not targets_met(values, targets, program.config.objectives):
        return state
    reached = ", ".join(f"{name} {values[name]:g} (target {target:g})" for name, target in targets)
    machine = replace(state.machine, completed=True, completed_reason=f"objective targets reached: {reached}")
    return statefile.with_machine(state, machine)
