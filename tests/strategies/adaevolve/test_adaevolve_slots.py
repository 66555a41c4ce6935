"""AdaEvolve's slots: the bandit picks, for each slot of a tick, an island no earlier slot took."""

from __future__ import annotations

import random
from dataclasses import replace

from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.slots import pick_free, pick_sources, slot_islands
from autoloop_py.strategies.adaevolve.state import IslandState, initial_state, ucb_score
from autoloop_py.strategies.slots import Slot

CONFIG = AdaEvolveConfig()


def _state(*islands: IslandState, current: int = 0):  # type: ignore[no-untyped-def]
    return replace(initial_state(CONFIG), islands=islands, current_island=current)


def test_slot_zero_takes_the_current_island_and_the_others_take_the_rest() -> None:
    state = _state(*(IslandState() for _ in range(4)), current=2)
    sources = pick_sources(7, "prog", 10, 4)
    picks = slot_islands(state, Slot(3, 4), 10, CONFIG, sources)
    assert picks[0] == 2
    assert sorted(picks) == [0, 1, 2, 3]
    # Each slot computes the same picks before its own, so k processes agree without talking.
    assert [slot_islands(state, Slot(i, 4), 10, CONFIG, sources)[-1] for i in range(4)] == picks


def test_past_the_island_count_a_new_round_starts() -> None:
    state = _state(IslandState(), IslandState())
    picks = slot_islands(state, Slot(3, 4), 1, CONFIG, pick_sources(0, "p", 1, 4))
    assert sorted(picks[:2]) == sorted(picks[2:]) == [0, 1]


def test_well_visited_islands_go_by_ucb_among_the_free_ones() -> None:
    visited = [IslandState(visits=5, decayed_visits=5.0, decayed_reward=r) for r in (0.1, 3.0, 2.0)]
    state = _state(*visited)
    best_free = max((1, 2), key=lambda k: ucb_score(state.islands[k], 9, CONFIG) or 0.0)
    assert pick_free(state, {0}, 9, CONFIG, random.Random(0)) == best_free == 1
    assert pick_free(state, {0, 1}, 9, CONFIG, random.Random(0)) == 2


def test_without_ucb_the_lowest_free_island_is_taken() -> None:
    state = _state(*(IslandState() for _ in range(3)))
    assert pick_free(state, {0}, 3, replace(CONFIG, use_ucb_selection=False), random.Random(0)) == 1
