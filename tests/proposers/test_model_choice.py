"""Tests for proposers/model_choice.py: the weighted, UCB and Thompson draws over the Models rows."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from autoloop_py.program.models import ModelSpec
from autoloop_py.proposers.model_choice import EPSILON, arms, choose, draw_rng, ucb_shares
from autoloop_py.state.model_stats import ModelRow, ModelTable

A, B = ModelSpec("m/a"), ModelSpec("m/b", weight=3.0)


def _table(*rows: ModelRow) -> ModelTable:
    return ModelTable(rows)


def _draws(method: str, table: ModelTable, n: int = 400) -> Counter[str]:
    return Counter(choose((A, B), table, method, draw_rng("models", 0, "demo", i)).name for i in range(n))


def test_the_draw_is_reproducible_from_seed_program_and_iteration() -> None:
    table = _table(ModelRow("m/a", calls=5, accepted=1, improvement=1, tokens=500),
                   ModelRow("m/b", calls=5, accepted=2, improvement=1, tokens=900))
    for method in ("weighted", "ucb", "thompson"):
        first = [choose((A, B), table, method, draw_rng("models", 7, "demo", i)).name for i in range(30)]
        again = [choose((A, B), table, method, draw_rng("models", 7, "demo", i)).name for i in range(30)]
        assert first == again
    assert draw_rng("models", 7, "demo", 1).random() != draw_rng("models", 7, "demo", 2).random()
    assert draw_rng("models", 7, "demo", 1).random() != draw_rng("models", 7, "other", 1).random()


def test_weighted_follows_the_weights_and_a_hand_set_weight_wins() -> None:
    counts = _draws("weighted", ModelTable())
    assert 0.65 < counts["m/b"] / 400 < 0.85  # weight 3 of 4
    counts = _draws("weighted", _table(ModelRow("m/a", weight=9.0), ModelRow("m/b", weight=1.0)))
    assert 0.82 < counts["m/a"] / 400 < 0.97


def test_a_weight_of_zero_takes_a_model_out_of_every_draw() -> None:
    table = _table(ModelRow("m/a", weight=0.0), ModelRow("m/b", calls=3, tokens=30))
    for method in ("weighted", "ucb", "thompson"):
        assert set(_draws(method, table, 50)) == {"m/b"}
    # When every model is weighted 0, none is left out (the program still needs a model).
    assert [arm.spec.name for arm in arms((A,), _table(ModelRow("m/a", weight=0.0)))] == ["m/a"]


@pytest.mark.parametrize("method", ["ucb", "thompson"])
def test_a_model_never_drawn_goes_first(method: str) -> None:
    table = _table(ModelRow("m/a", calls=10, accepted=10, improvement=50, tokens=100))
    assert set(_draws(method, table, 50)) == {"m/b"}


@pytest.mark.parametrize("method", ["ucb", "thompson"])
def test_the_bandit_prefers_improvement_per_spend(method: str) -> None:
    # m/a gained less in all, but per token it bought four times what m/b did.
    table = _table(ModelRow("m/a", calls=20, accepted=8, improvement=8, tokens=2_000),
                   ModelRow("m/b", calls=20, accepted=10, improvement=20, tokens=20_000))
    counts = _draws(method, table)
    assert counts["m/a"] > counts["m/b"] * 3


def test_dollars_count_once_every_drawn_model_has_a_price() -> None:
    # By tokens m/b looks cheaper; by dollars (both known) it is ten times dearer.
    table = _table(ModelRow("m/a", calls=10, accepted=5, improvement=5, tokens=10_000, usd=0.01),
                   ModelRow("m/b", calls=10, accepted=5, improvement=5, tokens=1_000, usd=0.1))
    shares = ucb_shares(arms((A, B), table))
    assert shares[0] == pytest.approx(1 - EPSILON) and shares[1] == pytest.approx(EPSILON)
    priceless = _table(ModelRow("m/a", calls=10, accepted=5, improvement=5, tokens=10_000, usd=0.01),
                       ModelRow("m/b", calls=10, accepted=5, improvement=5, tokens=1_000))
    assert ucb_shares(arms((A, B), priceless))[1] == pytest.approx(1 - EPSILON)


def test_one_model_is_always_drawn_without_randomness() -> None:
    rng = random.Random(0)
    state = rng.getstate()
    assert choose((A,), ModelTable(), "ucb", rng) == A
    assert rng.getstate() == state
