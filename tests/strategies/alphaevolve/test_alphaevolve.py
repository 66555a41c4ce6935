"""Tests for strategies/alphaevolve.py: operator thresholds, overrides, parents and cells (spec §1)."""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Sequence

import pytest

from autoloop_py.state.population import Candidate
from autoloop_py.strategies.alphaevolve.config import DEFAULT_WEIGHTS, AlphaEvolveConfig, Island
from autoloop_py.strategies.alphaevolve.strategy import (
    REVISIT_NOTE,
    AlphaEvolve,
    cell_for,
    effective_operator,
    operator_intervals,
    override,
    parents_for,
    pick_operator,
)
from autoloop_py.strategies.base import Decision, StrategyContext

ISLANDS = (
    Island(0, "sort-scan", "sort keys then scan runs"),
    Island(1, "hash-dict", "accumulate in a dict"),
    Island(2, "bincount", "factorize then np.bincount"),
    Island(3, "scatter", "np.add.at into a buffer"),
)
CONFIG = AlphaEvolveConfig(islands=ISLANDS, validity_checks=("result equals pandas exactly", "no pandas import"))


class FakeRng:
    """Returns the given uniforms in order (so tests choose u)."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def cand(
    id: int,
    island: int | None,
    fitness: float | None,
    cell: tuple[str, str] | None = None,
    code: str | None = None,
) -> Candidate:
    """Returns a candidate; its cell defaults to (island name, small)."""
    if cell is None and island is not None and island < len(ISLANDS):
        cell = (ISLANDS[island].name, "small")
    return Candidate(
        id=id, island=island, fitness=fitness, gen=id, operator="exploitation", cell=cell,
        approach=f"approach {id}", code=code if code is not None else f"def f():\n    return {id}  # code-{id}\n",
    )


def newest_first(*candidates: Candidate) -> tuple[Candidate, ...]:
    return tuple(sorted(candidates, key=lambda c: c.id, reverse=True))


def decide(
    population: Sequence[Candidate],
    statuses: Sequence[str] = (),
    uniforms: Sequence[float] = (),
    direction: str = "higher",
    config: AlphaEvolveConfig = CONFIG,
) -> Decision:
    context = StrategyContext(
        population=newest_first(*population), recent_statuses=tuple(statuses), best_metric=None,
        iteration=len(population) + 1, direction=direction, next_id=len(population) + 1,
    )
    return AlphaEvolve(config).decide(context, FakeRng(*uniforms))  # type: ignore[arg-type]


def ids(candidates: Sequence[Candidate]) -> list[int]:
    return [c.id for c in candidates]


# --- T1: operator thresholds ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("u", "operator"),
    [
        (0, "exploitation"), (0.4999, "exploitation"), (0.5, "exploration"), (0.7999, "exploration"),
        (0.8, "crossover"), (0.9499, "crossover"), (0.95, "migration"), (0.9999, "migration"),
    ],
)
def test_t1_operator_thresholds(u: float, operator: str) -> None:
    assert pick_operator(DEFAULT_WEIGHTS, u) == operator


def test_t1_regression_float_thresholds_would_say_crossover_at_095() -> None:
    # Summed in floats the crossover threshold is 0.9500000000000001, and Fraction(0.95) is just
    # below 19/20; both would wrongly pick crossover.
    assert 0.95 < 0.5 + 0.3 + 0.15
    assert Fraction(0.95) < Fraction(19, 20)
    assert pick_operator(DEFAULT_WEIGHTS, 0.95) == "migration"
    assert decide([cand(1, 0, 0.5), cand(2, 1, 0.6)], uniforms=[0.95, 0.0]).operator == "migration"


def test_intervals_are_exact_and_accept_a_mapping() -> None:
    weights = {"exploitation": Fraction(1, 3), "exploration": Fraction(2, 3)}
    assert operator_intervals(weights) == (
        ("exploitation", Fraction(0), Fraction(1, 3)),
        ("exploration", Fraction(1, 3), Fraction(1)),
    )
    assert pick_operator(weights, Fraction(1, 3)) == "exploration"
    assert operator_intervals(DEFAULT_WEIGHTS)[-1][2] == 1


@pytest.mark.parametrize("u", [-0.1, 1.0, 1.5])
def test_uniform_outside_unit_interval_is_refused(u: float) -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        pick_operator(DEFAULT_WEIGHTS, u)


def test_weights_short_of_one_are_refused() -> None:
    with pytest.raises(ValueError, match="must sum to 1"):
        pick_operator([("exploitation", Fraction(1, 2))], 0.7)


def test_sampled_reason_names_u_and_interval() -> None:
    decision = decide([cand(1, 0, 0.5), cand(2, 1, 0.6)], uniforms=[0.3])
    assert decision.operator == "exploitation"
    assert decision.reason == "sampled: u = 0.3 fell in exploitation's interval [0, 0.5)"
    assert decision.uniforms == (0.3,)


# --- T2: overrides --------------------------------------------------------------------------------

TWO_ISLANDS = (cand(1, 0, 0.5), cand(2, 1, 0.6), cand(3, 1, 0.4))


def test_t2_one_member_explores() -> None:
    result = override((cand(1, 0, 0.5),), ("accepted",), ISLANDS)
    assert result is not None and result[0] == "exploration"
    assert "1 member" in result[1]


def test_t2_three_rejections_force_exploration_into_an_unused_island() -> None:
    assert override(TWO_ISLANDS, ("accepted", "rejected", "rejected", "rejected"), ISLANDS) == (
        "exploration", "the last 3 candidates were all rejected: explore an island not used yet", 2,
    )


def test_t2_five_rejections_with_two_scored_islands_migrate() -> None:
    result = override(TWO_ISLANDS, ("rejected",) * 5, ISLANDS)
    assert result is not None and result[0] == "migration" and result[2] is None


@pytest.mark.parametrize("statuses", [("rejected", "rejected", "accepted", "rejected", "rejected"),
                                      ("error", "rejected", "rejected"), ("rejected", "rejected"), ()])
def test_t2_no_override_samples(statuses: tuple[str, ...]) -> None:
    assert override(TWO_ISLANDS, statuses, ISLANDS) is None
    assert decide(TWO_ISLANDS, statuses, uniforms=[0.1]).uniforms == (0.1,)


def test_five_rule_takes_precedence_over_three_rule() -> None:
    decision = decide(TWO_ISLANDS, ("rejected",) * 5, uniforms=[])
    assert decision.operator == "migration"
    assert decision.notes == (REVISIT_NOTE,)
    assert decide(TWO_ISLANDS, ("rejected",) * 4).notes == ()


def test_five_rejections_on_one_scored_island_open_an_unused_island() -> None:
    population = (cand(1, 0, 0.5), cand(2, 0, 0.6), cand(3, 1, None))
    operator, reason, island = override(population, ("rejected",) * 5, ISLANDS) or ("", "", None)
    assert (operator, island) == ("exploration", 2)
    assert "fewer than two islands" in reason


def test_five_rejections_with_every_island_used_open_a_brand_new_island() -> None:
    population = tuple(cand(i + 1, i, None) for i in range(4)) + (cand(5, 1, 0.7),)
    decision = decide(population, ("rejected",) * 5)
    assert (decision.operator, decision.island, decision.new_island, decision.parents) == ("exploration", 4, True, ())


def test_three_rejections_with_every_island_used_take_the_emptiest() -> None:
    population = (cand(1, 0, 0.5), cand(2, 0, 0.6), cand(3, 1, 0.4), cand(4, 2, 0.2), cand(5, 3, 0.1), cand(6, 3, 0.3))
    decision = decide(population, ("rejected",) * 3)
    assert (decision.operator, decision.island, ids(decision.parents)) == ("exploration", 1, [3])
    assert decision.new_island is False


def test_decide_rule_order_empty_population_explores_from_scratch() -> None:
    decision = decide((), ("rejected",) * 5)
    assert (decision.operator, decision.parents, decision.island, decision.new_island) == ("exploration", (), 0, True)
    assert decision.notes == () and decision.uniforms == ()


# --- T3: exploitation -----------------------------------------------------------------------------


def test_t3_exploitation_ties_go_to_the_higher_id() -> None:
    population = newest_first(cand(3, 0, 0.8), cand(7, 1, 0.8), cand(5, 2, 0.6))
    parents, island, new = parents_for("exploitation", population, CONFIG, "higher", FakeRng())
    assert (ids(parents), island, new) == ([7], 1, False)


def test_t3_exploitation_lower_is_better() -> None:
    population = newest_first(cand(1, 0, 12.0), cand(2, 1, 9.5))
    assert ids(parents_for("exploitation", population, CONFIG, "lower", FakeRng())[0]) == [2]
    assert ids(parents_for("exploitation", population, CONFIG, "higher", FakeRng())[0]) == [1]


def test_all_equal_fitness_exploits_the_newest() -> None:
    decision = decide([cand(1, 0, 0.5), cand(2, 1, 0.5), cand(3, 0, 0.5)], uniforms=[0.2])
    assert (decision.operator, ids(decision.parents), decision.island) == ("exploitation", [3], 0)


def test_exploitation_ignores_members_without_fitness() -> None:
    population = newest_first(cand(1, 0, 0.2), cand(2, 1, None), cand(3, 2, float("nan")))
    assert ids(parents_for("exploitation", population, CONFIG, "higher", FakeRng())[0]) == [1]


# --- crossover ------------------------------------------------------------------------------------

# Eight scored members: top quartile is {8 (0.95), 6 (0.9)}.
CROSS = newest_first(
    cand(1, 0, 0.10), cand(2, 1, 0.20), cand(3, 2, 0.30), cand(4, 1, 0.85, ("hash-dict", "large")),
    cand(5, 0, 0.50), cand(6, 1, 0.90), cand(7, 3, 0.40), cand(8, 0, 0.95),
)


def test_crossover_a_from_top_quartile_b_on_another_island_and_cell() -> None:
    parents, island, _ = parents_for("crossover", CROSS, CONFIG, "higher", FakeRng(0.0))
    assert (ids(parents), island) == ([8, 6], 0)
    parents, island, _ = parents_for("crossover", CROSS, CONFIG, "higher", FakeRng(0.99))
    assert (ids(parents), island) == ([6, 8], 1)


def test_crossover_b_skips_a_member_sharing_a_cell() -> None:
    shared = newest_first(cand(1, 0, 0.9, ("x", "small")), cand(2, 1, 0.8, ("X ", "small")), cand(3, 2, 0.1))
    parents, island, _ = parents_for("crossover", shared, CONFIG, "higher", FakeRng(0.0))
    assert (ids(parents), island) == ([1, 3], 0)


def test_crossover_b_falls_back_to_any_cell_on_another_island() -> None:
    shared = newest_first(cand(1, 0, 0.9, ("x", "small")), cand(2, 1, 0.8, ("x", "small")))
    assert ids(parents_for("crossover", shared, CONFIG, "higher", FakeRng(0.0))[0]) == [1, 2]


def test_crossover_lower_is_better_ranks_the_smallest_first() -> None:
    population = newest_first(cand(1, 0, 3.0), cand(2, 1, 1.0), cand(3, 2, 2.0), cand(4, 0, 5.0))
    assert ids(parents_for("crossover", population, CONFIG, "lower", FakeRng(0.0))[0]) == [2, 3]


def test_crossover_on_one_island_becomes_exploitation() -> None:
    population = [cand(1, 0, 0.5), cand(2, 0, 0.7), cand(3, 1, None)]
    decision = decide(population, uniforms=[0.85])
    assert (decision.operator, ids(decision.parents), decision.island) == ("exploitation", [2], 0)
    assert "crossover needs scored members on two islands" in decision.reason


# --- migration ------------------------------------------------------------------------------------


def test_migration_grafts_the_strongest_technique_into_the_runner_up_island() -> None:
    population = newest_first(
        cand(1, 0, 0.9), cand(2, 0, 0.3), cand(3, 1, 0.5), cand(4, 1, 0.4), cand(5, 2, 0.7), cand(6, 3, None),
    )
    parents, island, new = parents_for("migration", population, CONFIG, "higher", FakeRng())
    assert (ids(parents), island, new) == ([5, 1], 2, False)  # not the weakest island 1: its best is far behind


def test_migration_lower_is_better() -> None:
    population = newest_first(cand(1, 0, 9.0), cand(2, 1, 2.0), cand(3, 2, 5.0))
    parents, island, _ = parents_for("migration", population, CONFIG, "lower", FakeRng())
    assert (ids(parents), island) == ([3, 2], 2)


def test_migration_ties_go_to_the_lower_island() -> None:
    population = newest_first(cand(1, 2, 0.5), cand(2, 1, 0.5), cand(3, 0, 0.5))
    parents, island, _ = parents_for("migration", population, CONFIG, "higher", FakeRng())
    assert (ids(parents), island) == ([2, 3], 1)


def test_migration_on_one_island_becomes_exploration() -> None:
    decision = decide([cand(1, 0, 0.5), cand(2, 0, 0.7)], uniforms=[0.97])
    assert (decision.operator, decision.island, decision.parents) == ("exploration", 1, ())
    assert decision.reason.startswith("sampled: u = 0.97 fell in migration's interval")


# --- exploration ----------------------------------------------------------------------------------


def test_exploration_targets_the_emptiest_island_lower_index_first() -> None:
    population = newest_first(cand(1, 0, 0.5), cand(2, 1, 0.6), cand(3, 2, 0.4), cand(4, 2, 0.45), cand(5, 3, 0.1))
    parents, island, new = parents_for("exploration", population, CONFIG, "higher", FakeRng())
    assert (ids(parents), island, new) == ([1], 0, False)


def test_exploration_of_an_island_without_scored_members_starts_from_scratch() -> None:
    population = newest_first(cand(1, 0, 0.5), cand(2, 1, None), cand(3, 2, 0.4), cand(4, 3, 0.3))
    assert parents_for("exploration", population, CONFIG, "higher", FakeRng(), forced_island=1) == ((), 1, False)
    assert parents_for("exploration", population, CONFIG, "higher", FakeRng(), forced_island=5) == ((), 5, True)


def test_all_fitness_missing_explores_whatever_was_sampled() -> None:
    population = [cand(1, 0, None), cand(2, 1, None)]
    assert effective_operator("exploitation", population)[0] == "exploration"
    decision = decide(population, uniforms=[0.1])
    assert (decision.operator, decision.island, decision.parents, decision.new_island) == ("exploration", 2, (), True)
    assert "no member has a fitness yet" in decision.reason


def test_unknown_operator_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown AlphaEvolve operator 'mutate'"):
        parents_for("mutate", (), CONFIG, "higher", FakeRng())


def test_population_order_does_not_matter() -> None:
    population = [cand(3, 0, 0.8), cand(7, 1, 0.8), cand(5, 2, 0.6)]
    shuffled = StrategyContext(tuple(population), (), None, 8, "higher", 8)
    assert ids(AlphaEvolve(CONFIG).decide(shuffled, FakeRng(0.1)).parents) == [7]  # type: ignore[arg-type]


# --- determinism ----------------------------------------------------------------------------------


def test_same_seed_same_decision() -> None:
    context = StrategyContext(CROSS, ("accepted", "rejected"), 0.95, 9, "higher", 9)
    strategy = AlphaEvolve(CONFIG)
    runs = [[strategy.decide(context, random.Random(seed)) for seed in range(20)] for _ in range(2)]
    assert runs[0] == runs[1]
    assert {d.operator for d in runs[0]} >= {"exploitation", "exploration"}
    first = random.Random(0)
    assert runs[0][0].uniforms[0] == first.random()


# --- cells ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("lines", "bucket"), [(39, "small"), (40, "medium"), (100, "medium"), (101, "large")])
def test_t5_cell_buckets_by_evolved_lines(lines: int, bucket: str) -> None:
    code = "".join(f"x{i} = {i}\n" for i in range(lines))
    assert cell_for(ISLANDS[2], code, CONFIG) == ("bincount", bucket)


def test_cell_counts_only_the_evolve_block() -> None:
    code = "import numpy\n# EVOLVE-BLOCK-START\na = 1\nb = 2\n# EVOLVE-BLOCK-END\nprint(a)\n"
    assert cell_for(None, code, AlphaEvolveConfig(islands=ISLANDS, complexity_thresholds=(2, 5))) == (
        "unassigned", "medium",
    )

