"""Pareto objectives: objective vectors, dominance, non-dominated fronts and crowding, as SkyDiscover ranks them.

The rules follow the reference's `UnifiedArchive` (search/adaevolve/archive/unified_archive.py):
- a vector holds each objective's value, higher always better (a lower-is-better metric is negated); a missing
  or non-numeric value counts as 0.0 (AL: so do NaN and ±inf, which the reference lets through);
- a dominates b when a ≥ b everywhere and a > b somewhere;
- fronts are peeled in layers: rank 0 is the non-dominated set, rank 1 the non-dominated rest, and so on;
- crowding within a layer: a layer of at most 2 members is all ∞; else per objective the layer is sorted by that
  value, both ends get ∞, and (when the range is ≥ 1e-10) each inner member adds (next − previous)/range;
- the Pareto percentile of the i-th entry ordered by (rank, −crowding) is 1 − i/max(N−1, 1);
- a newcomer's percentile is 1 − #{members dominating it}/max(N, 1), clamped to [0, 1].
Ties (equal crowding, equal values) keep stored order. The reference orders a layer by iterating a set of string
ids, which changes from run to run; stored (id) order is the deterministic choice with the same rules.

Each Population entry carries its values in a `- **Objectives**: accuracy 0.91 · latency_ms 12 · front 0*` bullet;
the front rank (marked *) is derived and re-rendered whenever the Population changes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from autoloop_py.errors import ProgramError
from autoloop_py.program.objectives import Objective, Scalarisation, metric_value
from autoloop_py.render import render
from autoloop_py.state import population as pop
from autoloop_py.state.population import Candidate, Population

Vector = tuple[float, ...]
BULLET = "Objectives"
RANGE_FLOOR = 1e-10
_FRONT_RE = re.compile(r"^front\s+(\d+)\*?$")


# ---------------------------------------------------------------- the objectives in force


def in_force(names: Sequence[str], flags: Mapping[str, bool], declared: Sequence[Objective],
             where: tuple[Path, int | None]) -> tuple[Objective, ...]:
    """Returns a playbook's `pareto_objectives` with directions, else the frontmatter's `objectives:`.

    Directions come from the frontmatter when it declares the metric, else from `higher_is_better` (higher when
    absent, as the reference). Naming objectives the frontmatter does not declare, when it declares some, is an
    error: the two lists would rank different things.
    """
    if not names:
        return tuple(declared)
    known = {o.name: o.direction for o in declared}
    stray = [name for name in names if known and name not in known]
    if stray:
        raise ProgramError(f"`pareto_objectives` names `{stray[0]}`, which the frontmatter's `objectives:` does not "
                           f"declare ({', '.join(known)}); name the same metrics in both, or leave the row empty",
                           *where)
    return tuple(Objective(name, known.get(name) or ("higher" if flags.get(name, True) else "lower")) for name in names)


# ---------------------------------------------------------------- vectors and dominance


def objective_vector(metrics: Mapping[str, Any], objectives: Sequence[Objective]) -> Vector:
    """Returns the metrics as a vector where higher is better in every place (missing or not a number: 0.0)."""
    values = []
    for objective in objectives:
        value = metric_value(metrics, objective.name)
        value = 0.0 if value is None else value
        values.append(-value if objective.direction == "lower" else value)
    return tuple(values)


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """Returns whether a is at least b in every objective and better in one."""
    better = False
    for x, y in zip(a, b):
        if x < y:
            return False
        better = better or x > y
    return better


def front_ranks(vectors: Sequence[Sequence[float]]) -> list[int]:
    """Returns each vector's front: 0 for the non-dominated, then the layers peeled one after another."""
    ranks = [-1] * len(vectors)
    remaining = list(range(len(vectors)))
    rank = 0
    while remaining:
        front = [i for i in remaining if not any(dominates(vectors[j], vectors[i]) for j in remaining if j != i)]
        for i in front:
            ranks[i] = rank
        remaining = [i for i in remaining if ranks[i] < 0]
        rank += 1
    return ranks


def crowding_distances(vectors: Sequence[Sequence[float]], ranks: Sequence[int]) -> list[float]:
    """Returns each vector's crowding distance within its front (∞ at the ends and in fronts of 1 or 2)."""
    crowding = [0.0] * len(vectors)
    for layer in ([i for i, r in enumerate(ranks) if r == rank] for rank in range(max(ranks, default=-1) + 1)):
        if len(layer) <= 2:
            for i in layer:
                crowding[i] = math.inf
            continue
        for m in range(len(vectors[layer[0]])):
            ordered = sorted(layer, key=lambda i: vectors[i][m])
            crowding[ordered[0]] = crowding[ordered[-1]] = math.inf
            span = vectors[ordered[-1]][m] - vectors[ordered[0]][m]
            if span < RANGE_FLOOR:
                continue
            for k in range(1, len(ordered) - 1):
                crowding[ordered[k]] += (vectors[ordered[k + 1]][m] - vectors[ordered[k - 1]][m]) / span
    return crowding


def pareto_percentiles(vectors: Sequence[Sequence[float]]) -> list[float]:
    """Returns each vector's Pareto percentile: by front, then by crowding (larger first), ties in stored order."""
    ranks = front_ranks(vectors)
    crowding = crowding_distances(vectors, ranks)
    order = sorted(range(len(vectors)), key=lambda i: (ranks[i], -crowding[i]))
    last = max(len(vectors) - 1, 1)
    percentiles = [0.0] * len(vectors)
    for position, i in enumerate(order):
        percentiles[i] = 1.0 - position / last
    return percentiles


def newcomer_percentile(vector: Sequence[float], members: Sequence[Sequence[float]]) -> float:
    """Returns a program's Pareto percentile against an archive it is not in: 1 − dominating/N, in [0, 1]."""
    dominated_by = sum(dominates(member, vector) for member in members)
    return max(0.0, min(1.0, 1.0 - dominated_by / max(len(members), 1)))


# ---------------------------------------------------------------- the Objectives bullet


def _number(value: float) -> str:
    return pop.format_fitness(value)


def objectives_text(metrics: Mapping[str, Any], objectives: Sequence[Objective], front: int | None = None) -> str:
    """Returns the bullet's value: each objective's raw value (— when missing), then the derived front."""
    parts = []
    for objective in objectives:
        value = metric_value(metrics, objective.name)
        parts.append(f"{objective.name} {'—' if value is None else _number(value)}")
    if front is not None:
        parts.append(f"front {front}*")
    return " · ".join(parts)


def parse_values(text: str) -> dict[str, float]:
    """Returns the raw values an Objectives bullet's text records (`—` and the front are left out)."""
    found: dict[str, float] = {}
    for part in text.split("·"):
        words = part.strip().rsplit(" ", 1)
        if len(words) != 2 or _FRONT_RE.match(part.strip()):
            continue
        try:
            value = float(words[1])
        except ValueError:
            continue
        if math.isfinite(value):
            found[words[0].strip()] = value
    return found


def raw_values(candidate: Candidate) -> dict[str, float] | None:
    """Returns the raw objective values the candidate's Objectives bullet records (None without the bullet)."""
    return next((parse_values(value) for label, value in candidate.extra if label == BULLET), None)


def vector_of(candidate: Candidate, objectives: Sequence[Objective]) -> Vector:
    """Returns the candidate's objective vector from its bullet (values it lacks count as 0.0)."""
    return objective_vector(raw_values(candidate) or {}, objectives)


def front_of(candidate: Candidate) -> int | None:
    """Returns the front rank the candidate's bullet shows (None without one)."""
    for label, value in candidate.extra:
        if label == BULLET:
            found = _FRONT_RE.match(value.rsplit("·", 1)[-1].strip())
            return int(found.group(1)) if found else None
    return None


def with_objectives(candidate: Candidate, metrics: Mapping[str, Any], objectives: Sequence[Objective]) -> Candidate:
    """Returns the candidate with its Objectives bullet set from the evaluation's metrics (unchanged without any)."""
    if not objectives:
        return candidate
    own = tuple((label, value) for label, value in candidate.extra if label != BULLET)
    return replace(candidate, extra=(*own, (BULLET, objectives_text(metrics, objectives))), raw=None)


def ensure_objectives(population: Population, entry_id: int, metrics: Mapping[str, Any],
                      objectives: Sequence[Objective]) -> Population:
    """Returns the Population with the entry's Objectives bullet put back when the strategy's record dropped it."""
    if not objectives:
        return population
    candidates = tuple(with_objectives(c, metrics, objectives) if c.id == entry_id and raw_values(c) is None else c
                       for c in population.candidates)
    return replace(population, candidates=candidates)


def scored(candidate: Candidate) -> bool:
    """Returns whether the entry takes part in the fronts: evaluated, with a fitness and an Objectives bullet."""
    return candidate.fitness is not None and candidate.status != "error" and raw_values(candidate) is not None


def with_fronts(population: Population, objectives: Sequence[Objective]) -> Population:
    """Returns the Population with every scored entry's front rank re-rendered (the others' bullets unchanged)."""
    if not objectives:
        return population
    ranked = [c for c in sorted(population.candidates, key=lambda c: c.id) if scored(c)]
    ranks = dict(zip((c.id for c in ranked), front_ranks([vector_of(c, objectives) for c in ranked])))
    candidates = tuple(_with_front(c, ranks.get(c.id), objectives) for c in population.candidates)
    return replace(population, candidates=candidates)


def _with_front(candidate: Candidate, front: int | None, objectives: Sequence[Objective]) -> Candidate:
    values = raw_values(candidate)
    if values is None or front_of(candidate) == front:
        return candidate
    text = objectives_text(values, objectives, front)
    extra = tuple((label, text if label == BULLET else value) for label, value in candidate.extra)
    return replace(candidate, extra=extra, raw=None)


def prompt_section(objectives: Sequence[Objective], parent: Candidate | None) -> str:
    """Returns the prompt's Pareto paragraph: the objectives with directions and the parent's values and front."""
    if not objectives:
        return ""
    values = (raw_values(parent) or {}) if parent is not None else {}
    shown = {name: _number(value) for name, value in values.items()}
    front = front_of(parent) if parent is not None else None
    return render("objectives_section.md.j2", objectives=objectives, parent=shown, front=front)


# ---------------------------------------------------------------- acceptance


@dataclass(frozen=True)
class Verdict:
    """Whether a candidate is kept under many objectives, and by which rule.

    Attributes:
      kept: the candidate is kept.
      rule: the rule that decided, as the state file says it (`pareto: …` or `weighted {…}: …`).
    """

    kept: bool
    rule: str


def scalarised(metrics: Mapping[str, Any], scalarisation: Scalarisation) -> float | None:
    """Returns Σ weight·value over the scalarisation's metrics (None when one of them is missing)."""
    total = 0.0
    for name, weight in scalarisation.weights:
        value = metric_value(metrics, name)
        if value is None:
            return None
        total += weight * value
    return total


def keep(metrics: Mapping[str, Any], best: Sequence[Mapping[str, Any]], objectives: Sequence[Objective],
         scalarisation: Scalarisation | None = None, min_delta: float = 0.0) -> Verdict:
    """Returns whether a candidate is kept against the kept ones: non-dominated by each, or above their best scalar."""
    if scalarisation is not None:
        return _keep_scalar(metrics, best, scalarisation, min_delta)
    missing = [o.name for o in objectives if metric_value(metrics, o.name) is None]
    if missing:
        return Verdict(False, f"pareto: the evaluation printed no `{missing[0]}`")
    vector = objective_vector(metrics, objectives)
    kept = [objective_vector(m, objectives) for m in best]
    front = [v for v, r in zip(kept, front_ranks(kept)) if r == 0]
    if any(dominates(v, vector) or v == vector for v in front):
        return Verdict(False, f"pareto: dominated by (or equal to) one of the {len(front)} on the front")
    if not front:
        return Verdict(True, "pareto: the first candidate kept with these objectives")
    beaten = sum(dominates(vector, v) for v in front)
    return Verdict(True, f"pareto: non-dominated by the {len(front)} on the front (dominates {beaten})")


def _keep_scalar(metrics: Mapping[str, Any], best: Sequence[Mapping[str, Any]], scalarisation: Scalarisation,
                 min_delta: float) -> Verdict:
    name = scalarisation.describe()
    value = scalarised(metrics, scalarisation)
    if value is None:
        return Verdict(False, f"{name}: a weighted metric is missing")
    previous = [v for v in (scalarised(m, scalarisation) for m in best) if v is not None]
    top = max(previous, default=None)
    if top is not None and value <= top + min_delta:
        return Verdict(False, f"{name}: {value:g} does not beat {top:g}")
    return Verdict(True, f"{name}: {value:g}" + ("" if top is None else f" beats {top:g}"))
