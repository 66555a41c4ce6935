"""AlphaEvolve's slots: slot i works island i mod n, whatever operator it drew."""

from __future__ import annotations

from autoloop_py.strategies.alphaevolve.slots import home_island, home_parents
from autoloop_py.strategies.alphaevolve.strategy import AlphaEvolve
from autoloop_py.strategies.base import StrategyContext
from autoloop_py.strategies.slots import Slot
from tests.strategies.alphaevolve.test_alphaevolve import CONFIG, ISLANDS, FakeRng, cand, newest_first

POPULATION = (cand(1, 0, 0.5), cand(2, 0, 0.9), cand(3, 1, 0.7), cand(4, 2, 0.2))


def test_slot_i_works_island_i_mod_n() -> None:
    assert [home_island(Slot(i, 6), POPULATION, CONFIG) for i in range(6)] == [0, 1, 2, 3, 0, 1]


def test_exploitation_takes_the_home_islands_best() -> None:
    operator, why, (parents, island, new) = home_parents("exploitation", POPULATION, "higher", FakeRng(), 1)
    assert (operator, why, [p.id for p in parents], island, new) == ("exploitation", "", [3], 1, False)


def test_an_empty_home_island_is_explored_from_scratch() -> None:
    operator, why, (parents, island, new) = home_parents("crossover", POPULATION, "higher", FakeRng(), 3)
    assert (operator, parents, island, new) == ("exploration", (), 3, True)
    assert "island 3" in why


def test_crossover_and_migration_reach_off_the_home_island() -> None:
    _, _, (parents, island, _) = home_parents("crossover", POPULATION, "higher", FakeRng(0.0), 0)
    assert parents[0].island == 0 and parents[1].island != 0 and island == 0
    _, _, (parents, island, _) = home_parents("migration", POPULATION, "higher", FakeRng(), 2)
    assert [p.id for p in parents] == [4, 2] and island == 2  # recipient: home's best; donor: the best elsewhere


def test_a_lone_island_falls_back_without_a_second_parent() -> None:
    alone = (cand(1, 0, 0.5),)
    assert home_parents("crossover", alone, "higher", FakeRng(), 0)[0] == "exploitation"
    assert home_parents("migration", alone, "higher", FakeRng(), 0)[0] == "exploration"


def test_the_slots_of_a_tick_decide_distinct_islands() -> None:
    islands = []
    for i in range(len(ISLANDS)):
        context = StrategyContext(population=newest_first(*POPULATION), recent_statuses=(), best_metric=0.9,
                                  iteration=5 + i, direction="higher", next_id=5, slot=Slot(i, len(ISLANDS)))
        decision = AlphaEvolve(CONFIG).decide(context, FakeRng(0.1, 0.1))  # type: ignore[arg-type]
        assert f"slot {i}/{len(ISLANDS)} works island {i}" in decision.reason
        islands.append(decision.island)
    assert islands == [0, 1, 2, 3]
