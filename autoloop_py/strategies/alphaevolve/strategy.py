"""AlphaEvolve: seed 003's playbook made deterministic — operator, parents and island per iteration (spec §1).

The prompt that carries a decision out is rendered by `alphaevolve_prompt`.
"""

from __future__ import annotations

import logging
import random
from fractions import Fraction
from typing import Callable, Iterable, Mapping, Sequence, Union

from autoloop_py.state.population import (
    OPERATORS,
    Candidate,
    cell_of,
    oriented,
)
from autoloop_py.strategies.alphaevolve.config import AlphaEvolveConfig, Island
from autoloop_py.strategies.alphaevolve.features import FeatureRange, bucket
from autoloop_py.strategies.alphaevolve.slots import Scored, best_of, home_island, home_parents, rank
from autoloop_py.strategies.base import Decision, DrawRecorder, StrategyContext, UniformSource, exact, seeds_from_target

logger = logging.getLogger(__name__)

REVISIT_NOTE = (
    "The last 5 candidates were all rejected: revisit the domain knowledge in the framing below "
    "that no population member has applied yet."
)
TWO_PARENT_OPERATORS = ("crossover", "migration")
SEED_OPERATOR = "seed"
SEED_REASON = ("the Population is empty: the Target as it is (its evaluation as the baseline or the branch's "
               "best) becomes the first member, so the first candidate starts from it")
Weights = Union[Sequence[tuple[str, Fraction]], Mapping[str, Fraction]]


class AlphaEvolve:
    """The AlphaEvolve strategy: a pure function of the population, recent statuses and a seeded RNG."""

    name = "alphaevolve"

    def __init__(self, config: AlphaEvolveConfig) -> None:
        self.config = config

    def decide(self, context: StrategyContext, rng: random.Random) -> Decision:
        """Returns this iteration's operator, parents and child island (§1.2 steps 1–3)."""
        draws = DrawRecorder(rng)
        if seeds_from_target(context):
            first = self.config.islands[0].index if self.config.islands else 0
            return Decision(SEED_OPERATOR, SEED_REASON, (), first, True, as_is=True)
        population = tuple(sorted(context.population, key=lambda c: c.id, reverse=True))
        chosen = override(population, context.recent_statuses, self.config.islands)
        if chosen is None:
            chosen = _sampled(self.config.operator_weights, draws.random())
        operator, reason, forced = chosen
        if context.slot is not None and context.slot.parallel:
            home = home_island(context.slot, population, self.config)
            effective, why, (parents, island, new_island) = home_parents(
                operator, population, context.direction, draws, home
            )
            reason = f"{reason}; slot {context.slot} works island {home}"
        else:
            effective, why = effective_operator(operator, population)
            parents, island, new_island = parents_for(
                effective, population, self.config, context.direction, draws, forced
            )
        notes = (REVISIT_NOTE,) if len(population) > 1 and _last_rejected(context.recent_statuses, 5) else ()
        reason = f"{reason}; {why}" if why else reason
        logger.debug("alphaevolve decided %s (%s)", effective, reason)
        return Decision(effective, reason, parents, island, new_island, notes, tuple(draws.draws))


# --- operator --------------------------------------------------------------------------------------


def operator_intervals(weights: Weights) -> tuple[tuple[str, Fraction, Fraction], ...]:
    """Returns each operator's [low, high) share of [0, 1), from exact cumulative weights in table order."""
    pairs = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
    intervals = []
    low = Fraction(0)
    for operator, weight in pairs:
        high = low + exact(weight)
        intervals.append((operator, low, high))
        low = high
    return tuple(intervals)


def pick_operator(weights: Weights, u: float | Fraction) -> str:
    """Returns the operator whose cumulative-weight interval holds u (T1: u = 0.95 → migration)."""
    drawn = exact(u)
    if not 0 <= drawn < 1:
        raise ValueError(f"a uniform must lie in [0, 1), got {u!r}")
    for operator, _, high in operator_intervals(weights):
        if drawn < high:
            return operator
    raise ValueError(f"operator weights sum to less than {u!r}; they must sum to 1")


def _sampled(weights: Weights, u: float) -> tuple[str, str, None]:
    """Returns the sampled operator with a reason naming u and the interval it fell in."""
    operator = pick_operator(weights, u)
    _, low, high = next(i for i in operator_intervals(weights) if i[0] == operator)
    return operator, f"sampled: u = {u!r} fell in {operator}'s interval [{float(low):g}, {float(high):g})", None


def override(
    population: Sequence[Candidate], recent_statuses: Sequence[str], islands: Sequence[Island]
) -> tuple[str, str, int | None] | None:
    """Returns (operator, reason, forced island) when a deterministic override applies (§1.2 step 1 a–c)."""
    n = len(population)
    if n <= 1:
        return "exploration", f"the population has {n} member{'' if n == 1 else 's'}: seed diversity", None
    if _last_rejected(recent_statuses, 5):
        if len(_islands_of(_with_fitness(population))) >= 2:
            return "migration", "the last 5 candidates were all rejected: graft a technique across islands", None
        reason = "the last 5 candidates were all rejected and fewer than two islands hold scored members"
        island = _unused_island(population, islands, open_new=True)
        return "exploration", f"{reason}: try a radically new island", island
    if _last_rejected(recent_statuses, 3):
        island = _unused_island(population, islands, open_new=False)
        return "exploration", "the last 3 candidates were all rejected: explore an island not used yet", island
    return None


def _last_rejected(statuses: Sequence[str], count: int) -> bool:
    """Returns whether the last `count` statuses are all literally `rejected` (errors do not count)."""
    return len(statuses) >= count and all(s == "rejected" for s in statuses[-count:])


def effective_operator(operator: str, population: Sequence[Candidate]) -> tuple[str, str]:
    """Returns the operator the population supports, and why it changed ('' if unchanged) (§1.5)."""
    if operator not in OPERATORS:
        raise ValueError(f"unknown AlphaEvolve operator {operator!r}")
    scored = _with_fitness(population)
    if not scored and operator != "exploration":
        return "exploration", f"{operator} needs a scored parent and no member has a fitness yet"
    if operator in TWO_PARENT_OPERATORS and len(_islands_of(scored)) < 2:
        fallback = "exploitation" if operator == "crossover" else "exploration"
        return fallback, f"{operator} needs scored members on two islands; only one island has them"
    return operator, ""


# --- parents -----------------------------------------------------------------------------------------


def parents_for(
    operator: str,
    population: Sequence[Candidate],
    config: AlphaEvolveConfig,
    direction: str,
    rng: UniformSource,
    forced_island: int | None = None,
) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns (parents, child island, child opens a new island) for an operator (§1.2 steps 2–3, §1.5)."""
    operator, _ = effective_operator(operator, population)
    scored = [(f, c) for c in population if (f := oriented(c.fitness, direction)) is not None]
    if operator == "exploration":
        return _exploration(population, scored, config.islands, forced_island)
    return _PARENT_PICKERS[operator](scored, rng)


def _exploitation(scored: list[Scored], rng: UniformSource) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns the best member (ties → higher id, the most recent) and its island."""
    best = best_of(scored)
    return (best,), best.island, False


def _crossover(scored: list[Scored], rng: UniformSource) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns A uniform from the top quartile and B the best on another island and cell (else any cell)."""
    ranked = sorted(scored, key=rank, reverse=True)
    top = ranked[: max(1, len(ranked) // 4)]
    a = top[min(int(rng.random() * len(top)), len(top) - 1)][1]
    elsewhere = [s for s in scored if s[1].island != a.island]
    # effective_operator guarantees two scored islands, so `elsewhere` is never empty.
    other_cell = [s for s in elsewhere if cell_of(s[1]) != cell_of(a)]
    b = best_of(other_cell or elsewhere)
    return (a, b), a.island, False


def _migration(scored: list[Scored], rng: UniformSource) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns [recipient best, donor best]: donor has the highest island best, recipient the next highest.

    The recipient's best is the program edited, so the runner-up's keeps the child near the front (the weakest
    island's, edited again after each rejected child under the 5-rejections override, never reached it).
    """
    bests = [(best_of(members), island) for island, members in _by_island(scored).items()]
    scores = {c.id: f for f, c in scored}
    (donor, _), (recipient, recipient_island) = sorted(bests, key=lambda b: (scores[b[0].id], -_index(b[1])))[-1:-3:-1]
    return (recipient, donor), recipient_island, False


_Picker = Callable[[list[Scored], UniformSource], tuple[tuple[Candidate, ...], int | None, bool]]
# Exploration is not here: it also needs the islands and the forced target (see parents_for).
_PARENT_PICKERS: dict[str, _Picker] = {"exploitation": _exploitation, "crossover": _crossover, "migration": _migration}


def _exploration(
    population: Sequence[Candidate], scored: list[Scored], islands: Sequence[Island], forced: int | None
) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns the target island's best (or no parent: from scratch) and the target island."""
    target = forced if forced is not None else _emptiest_island(population, islands)
    members = [s for s in scored if s[1].island == target]
    parents = (best_of(members),) if members else ()
    return parents, target, not any(c.island == target for c in population)


def _emptiest_island(population: Sequence[Candidate], islands: Sequence[Island]) -> int:
    """Returns the known island with the fewest members (ties → lower index); 0 when none is known."""
    known = _known_islands(population, islands)
    if not known:
        return 0
    counts = {i: 0 for i in known}
    for candidate in population:
        if candidate.island is not None:
            counts[candidate.island] += 1
    return min(known, key=lambda i: (counts[i], i))


def _unused_island(population: Sequence[Candidate], islands: Sequence[Island], *, open_new: bool) -> int:
    """Returns the lowest configured island nobody used; else a brand-new index or the emptiest island."""
    used = {c.island for c in population}
    unused = sorted(i.index for i in islands if i.index not in used)
    if unused:
        return unused[0]
    if open_new:
        return max(_known_islands(population, islands), default=-1) + 1
    return _emptiest_island(population, islands)


def _known_islands(population: Sequence[Candidate], islands: Sequence[Island]) -> list[int]:
    """Returns the configured island indices plus any index a member carries, sorted."""
    found = {i.index for i in islands} | {c.island for c in population if c.island is not None}
    return sorted(found)


def _with_fitness(population: Iterable[Candidate]) -> list[Scored]:
    """Returns the members with a usable fitness (direction does not matter for which ones)."""
    return [(f, c) for c in population if (f := oriented(c.fitness, "higher")) is not None]


def _islands_of(scored: Iterable[Scored]) -> set[int | None]:
    """Returns the distinct islands of scored members."""
    return {c.island for _, c in scored}


def _by_island(scored: Iterable[Scored]) -> dict[int | None, list[Scored]]:
    """Returns scored members grouped by island."""
    groups: dict[int | None, list[Scored]] = {}
    for item in scored:
        groups.setdefault(item[1].island, []).append(item)
    return groups


def _index(island: int | None) -> int:
    """Returns an island index for ordering (no island sorts first)."""
    return -1 if island is None else island


# --- feature cell ------------------------------------------------------------------------------------


def find_island(config: AlphaEvolveConfig, index: int | None) -> Island | None:
    """Returns the configured island with that index, or None (no island, or one the LLM opened)."""
    return next((i for i in config.islands if i.index == index), None)


def cell_for(
    island: Island | None,
    code: str,
    config: AlphaEvolveConfig,
    metrics: Mapping[str, object] | None = None,
    ranges: Mapping[str, FeatureRange] | None = None,
) -> tuple[str, str]:
    """Returns the MAP-Elites cell on the playbook's two dimensions (§1.2 step 4).

    Each is the island's name, the evolved code's line-count bucket, or the bin of an evaluator metric in
    its running range (ranges, this candidate's value included).
    """
    name = island.name if island is not None else "unassigned"
    first, second = (
        bucket(dimension, name, code, config.complexity_thresholds, metrics or {}, ranges or {})
        for dimension in config.dimensions
    )
    return first, second
