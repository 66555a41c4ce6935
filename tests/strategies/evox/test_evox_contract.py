"""Tests for the EvoX strategy contract: read-only genomes, StrategyBase, sample checks, the initial strategy."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from autoloop_py.strategies.evox.contract import (
    DIVERGE,
    REFINE,
    Genome,
    StrategyBase,
    choice_problem,
    score_of,
    validation_genomes,
)
from autoloop_py.strategies.evox.sandbox import initial_strategy


def genome(genome_id: int, score: Any = None, **fields: Any) -> Genome:
    metrics = {} if score is None else {"score": score}
    parent_id, iteration = fields.pop("parent_id", None), fields.pop("iteration", genome_id)
    return Genome(genome_id, f"code {genome_id}", metrics, parent_id, iteration, **fields)


def load_initial() -> type[StrategyBase]:
    namespace: dict[str, Any] = {}
    exec(compile(initial_strategy(), "<initial>", "exec"), namespace)
    cls = namespace["EvolvedStrategy"]
    assert issubclass(cls, StrategyBase)
    return cls


def test_genome_metrics_are_a_private_read_only_copy() -> None:
    metrics = {"score": 0.5}
    record = Genome(1, "x", metrics, None, 0)
    metrics["score"] = 9.0
    assert record.metrics["score"] == 0.5
    with pytest.raises(TypeError):
        record.metrics["score"] = 1.0  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.code = "y"  # type: ignore[misc]


def test_genomes_are_unhashable_so_strategies_key_them_by_id() -> None:
    with pytest.raises(TypeError):
        hash(genome(1, 0.5))


def test_genome_equality_and_context_ids_as_tuple() -> None:
    assert genome(1, 0.5, context_ids=[2, 3]) == genome(1, 0.5, context_ids=(2, 3))
    assert genome(1, 0.5, context_ids=[2, 3]).context_ids == (2, 3)


@pytest.mark.parametrize(
    ("score", "expected"),
    [(0.5, 0.5), (3, 3.0), (None, None), ("N/A", None), (True, None), (math.nan, None), (math.inf, None)],
)
def test_score_of_only_finite_numbers(score: Any, expected: float | None) -> None:
    assert score_of(genome(1, score)) == expected


def test_base_add_stores_and_tracks_the_first_best() -> None:
    strategy = StrategyBase(seed=1)
    for record in [genome(1, 0.2), genome(2, 0.7), genome(3, None), genome(4, 0.7)]:
        assert strategy.add(record) == record.id
    assert strategy.get(3) is not None and strategy.get(99) is None
    best = strategy.get_best()
    assert best is not None and best.id == 2


def test_base_get_best_recomputes_after_eviction() -> None:
    strategy = StrategyBase(seed=1)
    for record in [genome(1, 0.2), genome(2, 0.7), genome(3, 0.4)]:
        strategy.add(record)
    del strategy.genomes[2]
    best = strategy.get_best()
    assert best is not None and best.id == 3
    assert StrategyBase(seed=1).get_best() is None


def test_base_sample_shape_and_determinism() -> None:
    def draws(seed: int) -> list[tuple[int, list[int]]]:
        strategy = StrategyBase(seed)
        for record in validation_genomes():
            strategy.add(record)
        out = []
        for _ in range(5):
            parent, context = strategy.sample(3)
            assert list(parent) == [""] and list(context) == [""]
            out.append((parent[""].id, [g.id for g in context[""]]))
        return out

    first = draws(7)
    assert first == draws(7)
    assert all(len(ids) == 3 and parent not in ids for parent, ids in first)


def test_validation_genomes_cover_failed_and_labelled_candidates() -> None:
    genomes = validation_genomes()
    assert [g.id for g in genomes] == list(range(1, 14))
    assert sum(score_of(g) is None for g in genomes) == 2
    assert {g.label for g in genomes} == {"", DIVERGE, REFINE}


@pytest.mark.parametrize(
    ("choice", "problem"),
    [
        (([("", 1)], [("", [2, 3])]), None),
        (([("refine", 1)], [("", [1, 2])]), None),  # the parent in its own context is dropped, not an error
        (([], []), "exactly one parent, got 0"),
        (([("", 1), ("refine", 2)], []), "exactly one parent, got 2"),
        (([("explore", 1)], []), "parent label 'explore'"),
        (([("", 99)], []), "parent #99 is not a stored genome"),
        (([("", 1)], [("", [2, 98])]), "not stored genomes: #98"),
        (([("", 1)], [("", [2]), ("", [2])]), "repeats #2"),
        (([("", 1)], [("similar", [2])]), "context labels must be \"\""),
        (([("", 1)], [("", [2, 3, 4])]), "at most 2"),
    ],
)
def test_choice_problem(choice: Any, problem: str | None) -> None:
    found = choice_problem(choice, [1, 2, 3, 4], 2)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_choice_problem_with_no_context_wanted() -> None:
    assert choice_problem(([("", 1)], [("", [2])]), [1, 2], 4) is None
    assert choice_problem(([("", 1)], []), [1, 2], 0) is None
    found = choice_problem(([("", 1)], [("", [2])]), [1, 2], 0)
    assert found is not None and "at most 0" in found


def test_initial_strategy_mostly_refines_a_top_quartile_candidate() -> None:
    strategy = load_initial()(seed=3)
    genomes = [genome(i, i / 20, parent_id=1 if i > 1 else None) for i in range(1, 21)]
    for record in genomes:
        strategy.add(record)
    labels: list[str] = []
    for _ in range(200):
        parent, context = strategy.sample(4)
        ((label, chosen),) = parent.items()
        labels.append(label)
        ids = [g.id for g in context[""]]
        assert len(ids) == 4 and chosen.id not in ids and len(set(ids)) == 4
        if label == REFINE:
            assert chosen.id > 15  # the top quartile of 20
            assert ids[:3] == [i for i in (20, 19, 18, 17) if i != chosen.id][:3]
    assert 0.7 < labels.count(REFINE) / 200 < 0.9
    assert labels.count(DIVERGE) == 200 - labels.count(REFINE)


def test_initial_strategy_keeps_children_no_better_than_their_parent_out_of_the_refine_pool() -> None:
    # Five improvements in a line, then 40 children of the best that each scored below it (or tied): counted, they
    # would make the quartile 12 wide and the best would win a tournament of two in 1 draw of 6.
    line = [genome(i, i / 10, parent_id=i - 1 if i > 1 else None) for i in range(1, 6)]
    rejected = [genome(i, 0.45 if i % 2 else 0.5, parent_id=5) for i in range(6, 46)]
    strategy = load_initial()(seed=7)
    for record in line + rejected:
        strategy.add(record)
    refined = [parent[REFINE].id for parent, _ in (strategy.sample(4) for _ in range(300)) if REFINE in parent]
    assert refined and set(refined) <= {4, 5}  # the top quartile of the five that improved: two of them
    assert refined.count(5) / len(refined) > 0.9  # a tournament of two over two always draws the best


def test_initial_strategy_diverges_from_the_least_used_parent() -> None:
    strategy = load_initial()(seed=0)
    for record in [genome(i, i / 10, parent_id=1 if i > 1 else None) for i in range(1, 9)]:
        strategy.add(record)
    diverged = set()
    for _ in range(100):
        parent, _ = strategy.sample(2)
        if DIVERGE in parent:
            diverged.add(parent[DIVERGE].id)
    assert diverged and 1 not in diverged and diverged <= {2, 3, 4, 5, 6}


def test_initial_strategy_handles_tiny_and_failed_populations() -> None:
    cls = load_initial()
    only_failed = cls(seed=1)
    only_failed.add(genome(1, None))
    parent, context = only_failed.sample(4)
    assert parent == {"": only_failed.genomes[1]} and context == {"": []}
    single = cls(seed=1)
    single.add(genome(1, 0.3))
    assert single.sample(0) == ({"": single.genomes[1]}, {"": []})


def test_initial_strategy_is_deterministic_per_seed() -> None:
    def draws(seed: int) -> list[Any]:
        strategy = load_initial()(seed)
        for record in validation_genomes():
            strategy.add(record)
        out = []
        for _ in range(20):
            parent, context = strategy.sample(4)
            out.append([(label, g.id) for label, g in parent.items()] + [g.id for g in context[""]])
        return out

    assert draws(5) == draws(5)
    assert draws(5) != draws(6)
