"""AdaEvolve in a tick of parallel slots: the bandit gives each slot an island no earlier slot of the tick took.

Slot 0 evolves the island the last iteration's end picked (`current_island`). Slot j picks among the
islands slots 0..j−1 left: uniform among those under 3 visits, else the UCB argmax, as `next_island`
does. Every slot recomputes the earlier slots' picks from their own seeds, so k processes that never
talk to each other still take k different islands (once every island is taken, a new round starts).

Without a barrier the slots in flight started from different states, so those picks can meet: a slot
whose pick is an island another slot in flight works (`Slot.busy`) picks again among the others.
"""

from __future__ import annotations

import random
from typing import Callable

from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.state import MIN_VISITS, AdaEvolveState, ucb_score
from autoloop_py.strategies.base import UniformSource
from autoloop_py.strategies.slots import Slot, slot_seed

# The random source of slot j's pick, so that slot i can replay the picks of the slots before it.
PickSource = Callable[[int], UniformSource]


def slot_islands(state: AdaEvolveState, slot: Slot, t: int, config: AdaEvolveConfig, source: PickSource) -> list[int]:
    """Returns the islands slots 0..slot.index evolve this tick, in slot order (t: the tick's first iteration)."""
    picks: list[int] = []
    count = len(state.islands)
    for j in range(slot.index + 1):
        taken = set(picks[len(picks) - len(picks) % count:]) if count else set()
        picks.append(state.current_island if j == 0 else pick_free(state, taken, t, config, source(j)))
    return picks


def pick_free(state: AdaEvolveState, taken: set[int], t: int, config: AdaEvolveConfig, rng: UniformSource) -> int:
    """Returns the bandit's island among those not taken: uniform among the under-visited, else the UCB argmax."""
    free = [k for k in range(len(state.islands)) if k not in taken] or list(range(len(state.islands)))
    if not config.use_ucb_selection:
        return free[0]
    low = [k for k in free if state.islands[k].visits < MIN_VISITS]
    if low:
        return low[min(int(rng.random() * len(low)), len(low) - 1)]
    scores = {k: ucb_score(state.islands[k], t, config) or 0.0 for k in free}
    return max(free, key=lambda k: (scores[k], -k))



def pick_sources(seed: object, program: str, first: int, count: int) -> PickSource:
    """Returns the random source of slot j's island pick, seeded from (seed, program, slot j's iteration, slot j)."""
    return lambda j: random.Random(slot_seed(seed, program, first + j, Slot(j, count)) + ":island")


def away_source(seed: object, program: str, iteration: int, slot: Slot) -> UniformSource:
    """Returns the random source of a slot's pick away from the busy islands (its launch number keeps it its own)."""
    return random.Random(slot_seed(seed, program, iteration, slot) + ":away")
