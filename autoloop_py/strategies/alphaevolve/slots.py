"""AlphaEvolve in a tick of parallel slots: slot i works island i mod n, whatever operator it drew.

The operator is drawn as in a plain iteration; the island is the slot's ("home"), so k slots evolve
k islands at once. Crossover and migration still reach across islands: the home island supplies the
first parent (A, or the recipient) and the others the second.
"""

from __future__ import annotations

from typing import Sequence

from autoloop_py.state.population import Candidate, cell_of, oriented
from autoloop_py.strategies.alphaevolve.config import AlphaEvolveConfig
from autoloop_py.strategies.base import UniformSource
from autoloop_py.strategies.slots import Slot, slot_island

Parents = tuple[tuple[Candidate, ...], int | None, bool]
Scored = tuple[float, Candidate]


def home_island(slot: Slot, population: Sequence[Candidate], config: AlphaEvolveConfig) -> int:
    """Returns the slot's island: i mod n over the configured islands (else the islands members carry)."""
    islands = [i.index for i in config.islands] or [c.island for c in population if c.island is not None]
    return slot_island(slot, islands)


def home_parents(
    operator: str, population: Sequence[Candidate], direction: str, rng: UniformSource, home: int
) -> tuple[str, str, Parents]:
    """Returns (operator, why it changed or '', (parents, child island, new island)) with the child on home."""
    scored = [(f, c) for c in population if (f := oriented(c.fitness, direction)) is not None]
    mine = [s for s in scored if s[1].island == home]
    others = [s for s in scored if s[1].island != home]
    new = not any(c.island == home for c in population)
    if operator == "exploration" or not mine:
        why = "" if operator == "exploration" else f"{operator} needs a scored member on island {home}"
        return "exploration", why, (((best_of(mine),) if mine else ()), home, new)
    if operator == "exploitation" or (operator == "crossover" and not others):
        why = "" if operator == "exploitation" else f"crossover needs a scored member off island {home}"
        return "exploitation", why, ((best_of(mine),), home, False)
    if operator == "crossover":
        ranked = sorted(mine, key=rank, reverse=True)
        top = ranked[: max(1, len(ranked) // 4)]
        a = top[min(int(rng.random() * len(top)), len(top) - 1)][1]
        other_cell = [s for s in others if cell_of(s[1]) != cell_of(a)]
        return "crossover", "", ((a, best_of(other_cell or others)), home, False)
    if not others:  # migration with no donor island
        return "exploration", f"migration needs a scored member off island {home}", ((best_of(mine),), home, False)
    return "migration", "", ((best_of(mine), best_of(others)), home, False)


def rank(item: Scored) -> tuple[float, int]:
    """Returns the sort key of a scored member: oriented fitness, then id (newer wins ties)."""
    return item[0], item[1].id


def best_of(scored: Sequence[Scored]) -> Candidate:
    """Returns the member with the highest oriented fitness, ties → higher id."""
    return max(scored, key=rank)[1]
