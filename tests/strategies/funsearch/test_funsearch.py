"""Tests for strategies/funsearch.py and funsearch_islands.py: sampling, registration, dedup and resets (spec §4)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# The state generator is shared with the state-block tests.
from test_funsearch_markdown import states

from autoloop_py.state.population import Candidate
from autoloop_py.strategies.funsearch import strategy as fs
from autoloop_py.strategies.funsearch.config import FunSearchConfig
from autoloop_py.strategies.funsearch.islands import normal_noise, register, reset_islands
from autoloop_py.strategies.funsearch.markdown import parse_state_block, render_state_block
from autoloop_py.strategies.funsearch.state import (
    Cluster,
    FunSearchState,
    Island,
    Member,
)
from autoloop_py.strategies.slots import Slot

CONFIG = FunSearchConfig("priority")
RAW = FunSearchConfig("priority", score_normalization="none")  # the references' softmax over raw scores


class FakeRng:
    """Returns the given uniforms in order (so tests choose u)."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        """Returns the next given uniform."""
        return self.values.pop(0)


def code(score: float, pad: int = 0) -> str:
    """Returns a priority function whose body names its score, padded to change its length."""
    return f"def priority(x):\n    return {score!r}{' ' * pad}\n"


def cand(id: int, score: float | None = 0.5, pad: int = 0, status: str = "accepted") -> Candidate:
    """Returns a population entry holding a priority function."""
    source = code(score or 0.0, pad)
    return Candidate(id=id, island=0, fitness=score, gen=id, operator="sample", code=source, status=status)


def island(index: int, *clusters: Cluster, version: int = 0, programs: int = 0) -> Island:
    """Returns an island holding the clusters, its best taken from them (programs 0 keeps T at T_init)."""
    best = max(clusters, key=lambda c: c.score, default=None)
    return Island(
        index, version, programs, best.score if best else None, best.members[0].id if best else None, tuple(clusters)
    )


def cluster(score: float, *members: tuple[int, int] | tuple[int, int, str], signature: Sequence[float] = ()) -> Cluster:
    """Returns a cluster of (id, length[, hash]) members; the signature defaults to (score,)."""
    return Cluster(tuple(signature) or (score,), score, tuple(Member(*m) for m in members))


def sample(state: FunSearchState, *uniforms: float, config: FunSearchConfig = CONFIG) -> fs.FunSearchDecision:
    """Returns the decision for a population holding every member of the state."""
    ids = {m.id for i in state.islands for c in i.clusters for m in c.members}
    return fs.decide(state, [cand(i) for i in sorted(ids)], config, FakeRng(*uniforms))


# ---------------------------------------------------------------- F1–F4, F6: the numbers


def test_f1_softmax_matches_the_reference_unit_test() -> None:
    assert fs.softmax([2, 1, 0.1], 1) == pytest.approx([0.6590012, 0.242433, 0.0985659], abs=1e-7)
    assert fs.softmax([2, 1, 0.1], 2) == pytest.approx([0.50168777, 0.304289, 0.19402324], abs=1e-7)


@pytest.mark.parametrize(
    ("n", "expected"),
    [(0, 0.1), (1, 0.0999966667), (15000, 0.05), (29999, 3.3333e-6), (30000, 0.1), (45000, 0.05)],
)
def test_f2_temperature_falls_over_the_period_and_starts_over(n: int, expected: float) -> None:
    config = FunSearchConfig("f", cluster_sampling_temperature_init=0.1, cluster_sampling_temperature_period=30000)
    assert config.temperature(n) == pytest.approx(expected, rel=1e-4)
    assert config.temperature(n) >= 0.1 / 30000


def test_f3_cluster_probabilities_for_high_and_low_scores() -> None:
    assert fs.softmax([0.5, 0.4, 0.3], 0.1) == pytest.approx([0.66524096, 0.24472847, 0.09003057], abs=1e-8)
    assert fs.softmax([0.5, 0.4, 0.3], 0.05) == pytest.approx([0.86681333, 0.11731043, 0.01587624], abs=1e-8)
    assert fs.softmax([-0.9, -1, -1.2], 0.1) == pytest.approx([0.70538451, 0.25949646, 0.03511903], abs=1e-8)


def test_f3_decide_reports_the_probability_of_each_drawn_cluster() -> None:
    state = FunSearchState(islands=(island(0, cluster(0.5, (1, 10)), cluster(0.4, (2, 10)), cluster(0.3, (3, 10))),))
    decision = sample(state, 0.0, 0.0, 0.0, 0.0, 0.0, config=RAW)
    assert [p.cluster_probability for p in decision.picks] == pytest.approx([0.24472847, 0.66524096], abs=1e-8)


def test_f4_length_probabilities_prefer_short_programs() -> None:
    ref = fs.length_probabilities([100, 150, 200], "max")
    fork = fs.length_probabilities([100, 150, 200], "range")
    assert ref == pytest.approx([0.41922895, 0.32649584, 0.25427521], abs=1e-8)
    assert fork == pytest.approx([0.50648039, 0.30719589, 0.18632372], abs=1e-8)
    for normalization in ("max", "range"):
        assert fs.length_probabilities([70, 70, 70, 70], normalization) == pytest.approx([0.25] * 4)


def test_f6_the_stable_softmax_survives_scores_that_overflow_the_naive_one() -> None:
    with pytest.raises(OverflowError):
        [math.exp(x / 0.1) for x in (512, 510)]
    assert fs.softmax([512, 510], 0.1) == pytest.approx([0.999999998, 2.06115362e-9], rel=1e-8)
    assert fs.softmax([10, 9], 0.1) == pytest.approx([0.99995460, 4.53978687e-5], rel=1e-7)
    assert fs.softmax([1e308, -1e308], 1e-6) == [1.0, 0.0]


def test_overflowing_scores_leave_one_cluster_and_one_example_in_the_prompt_with_raw_scores() -> None:
    islands = (island(0, cluster(510, (1, 10))), island(1, cluster(512, (2, 10)), cluster(510, (3, 9))))
    state = FunSearchState(islands=islands)
    decision = sample(state, 0.9, 0.5, 0.5, config=RAW)
    assert decision.island == 1 and decision.temperature == 0.1
    assert [p.candidate.id for p in decision.picks] == [2]
    assert decision.picks[0].cluster_probability == pytest.approx(0.999999998)


def test_range_scaled_scores_show_several_versions_whatever_the_metric_units() -> None:
    # The same island as above: scaled to [0, 1] the weaker cluster keeps e^-10 of the best's weight, above 1e-6.
    islands = (island(0, cluster(510, (1, 10))), island(1, cluster(512, (2, 10)), cluster(510, (3, 9))))
    decision = sample(FunSearchState(islands=islands), 0.9, 0.5, 0.5, 0.5, 0.5)
    assert [p.candidate.id for p in decision.picks] == [3, 2]
    assert decision.picks[1].cluster_probability == pytest.approx(1 / (1 + math.exp(-10)))
    # Scaling makes the choice independent of the metric's offset and units.
    assert fs.normalized_scores([510, 512, 511]) == fs.normalized_scores([0.5, 2.5, 1.5]) == [0.0, 1.0, 0.5]


def test_normalized_scores_span_the_whole_float_range_without_overflow() -> None:
    low, middle, high = fs.normalized_scores([-1.7976931348623157e308, 0.0, 1.8e307])
    assert (low, high) == (0.0, 1.0) and 0.9 < middle < 0.91


def test_normalized_scores_keep_raw_scores_for_the_reference_and_equal_ones_level() -> None:
    assert fs.normalized_scores([3.0, -7.5], "none") == [3.0, -7.5]
    assert fs.normalized_scores([0.7, 0.7]) == [0.0, 0.0]


def test_all_equal_scores_are_drawn_uniformly() -> None:
    assert fs.softmax([0.7, 0.7, 0.7, 0.7], 0.1) == pytest.approx([0.25] * 4)
    state = FunSearchState(islands=(island(0, *(cluster(0.7, (i, 10), signature=(0.7, i)) for i in range(1, 5))),))
    decision = sample(state, 0.0, 0.6, 0.0, 0.0, 0.0)
    assert decision.picks[0].cluster_probability == pytest.approx(0.25)
    assert [p.candidate.id for p in decision.picks] == [3, 1]


def test_softmax_refuses_non_finite_logits() -> None:
    with pytest.raises(ValueError, match="finite"):
        fs.softmax([1.0, math.nan], 1.0)


def test_weighted_index_uses_cumulative_thresholds_and_survives_rounding() -> None:
    assert [fs.weighted_index([0.25, 0.5, 0.25], u) for u in (0.0, 0.2499, 0.25, 0.7499, 0.75)] == [0, 0, 1, 1, 2]
    assert fs.weighted_index([0.3, 0.3, 0.3999999, 0.0], 0.99999999) == 2


def test_normal_noise_is_the_quantile_of_the_uniform() -> None:
    assert normal_noise(0.5) == 0.0
    assert normal_noise(0.8413447460685429) == pytest.approx(1e-6)
    assert math.isfinite(normal_noise(0.0))


# ---------------------------------------------------------------- deciding


def test_an_empty_state_asks_for_the_seed() -> None:
    decision = fs.decide(FunSearchState(), [], CONFIG, FakeRng())
    assert decision.mode == fs.SEED and decision.island is None and decision.picks == () and decision.uniforms == ()
    assert decision.reason == (
        "no island holds a program yet: evaluate the Target as it is and register it on all 10 islands"
    )


def test_clusters_whose_members_left_the_population_are_skipped() -> None:
    state = FunSearchState(islands=(island(0, cluster(0.9, (1, 10), (2, 12))), island(1, cluster(0.5, (3, 10)))))
    decision = fs.decide(state, [cand(2), cand(3)], CONFIG, FakeRng(0.0, 0.0, 0.0))
    assert decision.island == 0 and [p.candidate.id for p in decision.picks] == [2]
    assert decision.reason.startswith("island 0 (uniform among 2 islands), T = 0.1: #2 from (0.9) (p 1)")
    missing = fs.decide(state, [], CONFIG, FakeRng())
    assert missing.mode == fs.SEED and missing.reason.startswith("no island has a cluster member left")


def test_islands_are_drawn_uniformly_and_the_draws_are_recorded() -> None:
    state = FunSearchState(islands=tuple(island(i, cluster(0.5, (i + 1, 10))) for i in range(4)))
    assert [sample(state, u, 0.0, 0.0).island for u in (0.0, 0.26, 0.5, 0.99)] == [0, 1, 2, 3]
    decision = sample(state, 0.6, 0.3, 0.7)
    assert decision.uniforms == (0.6, 0.3, 0.7) and decision.version == 0


def test_the_temperature_comes_from_the_islands_program_count() -> None:
    state = FunSearchState(islands=(island(0, cluster(0.5, (1, 10)), programs=15000),))
    assert sample(state, 0.0, 0.0, 0.0).temperature == pytest.approx(0.05)


def test_without_replacement_a_cluster_appears_once() -> None:
    state = FunSearchState(islands=(island(0, cluster(0.5, (1, 10)), cluster(0.49, (2, 10))),))
    decision = sample(state, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert sorted(p.candidate.id for p in decision.picks) == [1, 2]


def test_with_replacement_a_cluster_may_appear_twice() -> None:
    config = replace(CONFIG, cluster_sampling="with_replacement")
    state = FunSearchState(islands=(island(0, cluster(0.5, (1, 10)), cluster(0.4, (2, 10))),))
    decision = sample(state, 0.0, 0.1, 0.0, 0.2, 0.0, config=config)
    assert [p.candidate.id for p in decision.picks] == [1, 1]


def test_k_is_clamped_to_the_number_of_clusters() -> None:
    config = replace(CONFIG, functions_per_prompt=5)
    state = FunSearchState(islands=(island(0, cluster(0.5, (1, 10)), cluster(0.45, (2, 10))),))
    assert len(sample(state, *[0.0] * 8, config=config).picks) == 2


def test_members_are_drawn_by_length_shortest_likeliest() -> None:
    state = FunSearchState(islands=(island(0, cluster(0.5, (1, 100), (2, 150), (3, 200))),))
    picks = [sample(state, 0.0, 0.0, u).picks[0] for u in (0.5, 0.6, 0.9)]
    assert [p.candidate.id for p in picks] == [1, 2, 3]
    assert picks[0].member_probability == pytest.approx(0.50648039)


def test_f8_versions_are_ordered_by_cluster_score_ascending() -> None:
    state = FunSearchState(islands=(island(0, cluster(0.5, (5, 10)), cluster(0.4, (4, 10))),))
    decision = sample(state, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert [(p.candidate.id, p.score) for p in decision.picks] == [(4, 0.4), (5, 0.5)]


def test_a_lower_is_better_metric_orients_the_scores() -> None:
    config = replace(CONFIG, direction="lower")
    state = FunSearchState(islands=(island(0, cluster(-0.9, (1, 10)), cluster(-1.2, (2, 10))),))
    decision = sample(state, 0.0, 0.0, 0.0, 0.0, 0.0, config=config)
    assert decision.picks[0].cluster_probability == pytest.approx(fs.softmax(fs.normalized_scores([0.9, 1.2]), 0.1)[0])
    assert [p.score for p in decision.picks] == [-0.9, -1.2]


def test_a_single_island_is_always_chosen() -> None:
    state = FunSearchState(islands=(island(0, cluster(0.5, (1, 10))),))
    decision = sample(state, 0.999, 0.3, 0.3)
    assert decision.island == 0 and decision.reason.startswith("island 0 (the only island), T = 0.1: #1 from (0.5)")


def test_decide_is_deterministic_for_a_seeded_rng() -> None:
    islands = tuple(island(i, cluster(0.1 * i, (i + 1, 10)), cluster(0.2, (i + 20, 5))) for i in range(5))
    state = FunSearchState(islands=islands)
    population = [cand(i) for i in [*range(1, 6), *range(20, 25)]]
    first = fs.decide(state, population, CONFIG, random.Random(3))
    assert first == fs.decide(state, population, CONFIG, random.Random(3))


# ---------------------------------------------------------------- registering


def seed_state(config: FunSearchConfig = CONFIG) -> FunSearchState:
    """Returns the state after the seed (#1, score 0.5, hash h1) is registered."""
    seed = fs.decide(FunSearchState(), [], config, FakeRng())
    return fs.record(FunSearchState(), seed, cand(1), {"output_hash": "h1"}, config, FakeRng())


def child(
    state: FunSearchState, id: int, metrics: dict[str, Any], score: float | None = 0.6, **changes: Any
) -> FunSearchState:
    """Returns the state after a child prompted from island 0 is recorded."""
    decision = fs.FunSearchDecision(fs.SAMPLE, "test", 0, state.islands[0].version, 0.1, (), (0.1, 0.2))
    config = replace(CONFIG, **changes)
    return fs.record(state, decision, cand(id, score), metrics, config, FakeRng())


def test_the_seed_founds_every_island() -> None:
    state = seed_state(replace(CONFIG, num_islands=3))
    assert [i.index for i in state.islands] == [0, 1, 2]
    for i in state.islands:
        assert i.num_programs == 1 and i.best_score == 0.5 and i.best_id == 1
        assert i.clusters == (Cluster((0.5,), 0.5, (Member(1, len(code(0.5)), "h1"),)),)
    assert state.stored == 1 and state.registrations_since_reset == 1


def test_f7_signature_and_reduced_score() -> None:
    scores = {(6, 1): 10, (7, 1): 16}
    assert fs.signature_of(scores) == (10, 16)
    assert fs.reduce_scores(scores, "last") == 16
    assert fs.reduce_scores(scores, "average") == 13
    assert fs.reduce_scores(scores, "metric", 0.25) == 0.25


def test_a_child_joins_the_cluster_of_its_signature() -> None:
    state = child(seed_state(), 2, {"scores": {"n6": 10, "n7": 16}}, score=0.9)
    state = child(state, 3, {"scores": {"n7": 16, "n6": 10}}, score=0.9)
    first = state.islands[0]
    assert [c.signature for c in first.clusters] == [(0.5,), (10, 16)]
    assert first.clusters[1].score == 16 and [m.id for m in first.clusters[1].members] == [2, 3]
    assert first.num_programs == 3 and first.best_score == 16 and first.best_id == 2
    assert state.islands[1].num_programs == 1 and state.stored == 3


def test_a_partial_success_makes_its_own_signature() -> None:
    state = child(seed_state(), 2, {"scores": {"a": 3, "b": None, "c": math.nan, "d": True}})
    assert state.islands[0].clusters[-1].signature == (3,)


def test_members_are_kept_shortest_first() -> None:
    state = seed_state()
    for id, pad in ((2, 30), (3, 0), (4, 10)):
        decision = fs.FunSearchDecision(fs.SAMPLE, "t", 0, 0)
        state = fs.record(state, decision, cand(id, 0.9, pad), {"scores": {"a": 1}}, CONFIG, FakeRng())
    assert [m.id for m in state.islands[0].clusters[-1].members] == [3, 4, 2]


@pytest.mark.parametrize(
    ("fitness", "metrics", "why"),
    [
        (math.nan, {}, "the evaluator reported no finite metric"),
        (None, {}, "the evaluator reported no finite metric"),
        (math.inf, {}, "the evaluator reported no finite metric"),
        (True, {}, "the evaluator reported no finite metric"),
        (0.5, {"scores": {"a": math.nan, "b": "x"}}, "no test produced a finite score"),
        (0.5, {"scores": [1, 2]}, "`scores` must be an object of named per-test scores, got list"),
        (math.nan, {"scores": {"a": 1}}, None),
    ],
)
def test_nan_or_missing_fitness_is_an_execution_failure(fitness: Any, metrics: dict[str, Any], why: str | None) -> None:
    state = seed_state()
    candidate = replace(cand(2), fitness=fitness)
    decision = fs.FunSearchDecision(fs.SAMPLE, "t", 0, 0)
    outcome = fs.classify(state, decision, candidate, metrics, CONFIG)
    after = fs.record(state, decision, candidate, metrics, CONFIG, FakeRng())
    if why is None:  # per-test scores carry the signature and the score without the metric
        assert outcome.disposition == "stored" and outcome.score == 1
        return
    assert outcome == fs.Outcome("failed", why, length=len(code(0.5)))
    assert after.islands == state.islands and after.execution_failed == 1 and after.stored == 1


def test_metric_reduction_without_a_metric_fails() -> None:
    state = child(seed_state(), 2, {"scores": {"a": 1}}, score=None, score_reduction="metric")
    assert state.execution_failed == 1


def test_an_evaluation_error_fails_whatever_it_reports() -> None:
    outcome = fs.classify(seed_state(), fs.FunSearchDecision(fs.SAMPLE, "t", 0), cand(2, status="error"), {}, CONFIG)
    assert outcome.disposition == "failed" and outcome.reason == "the evaluation failed"


def test_a_known_output_hash_is_a_duplicate_on_its_island_only() -> None:
    state = seed_state()
    state = replace(state, islands=(state.islands[0], replace(state.islands[1], clusters=())))
    assert fs.is_duplicate(state, 0, "h1") and not fs.is_duplicate(state, 1, "h1")
    assert not any(fs.is_duplicate(state, i, h) for i, h in ((0, "h2"), (0, None), (9, "h1")))
    after = child(state, 2, {"output_hash": "h1"})
    assert after.duplicates == 1 and after.islands == state.islands and after.stored == 1
    assert child(state, 2, {"output_hash": "h1"}, deduplicate=False).islands[0].num_programs == 2
    assert child(state, 2, {}).islands[0].num_programs == 2


def test_long_output_hashes_are_stored_as_short_tokens() -> None:
    long = "sha256:" + "ab" * 32
    state = child(seed_state(), 2, {"output_hash": long})
    token = state.islands[0].clusters[-1].members[0].output_hash
    assert token is not None and len(token) == 16 and fs.is_duplicate(state, 0, long)


def test_a_child_of_a_reset_island_is_a_version_mismatch() -> None:
    state = seed_state()
    decision = fs.FunSearchDecision(fs.SAMPLE, "t", 0, version=0)
    moved = replace(state, islands=(replace(state.islands[0], version=1), *state.islands[1:]))
    outcome = fs.classify(moved, decision, cand(2, 0.9), {}, CONFIG)
    assert outcome.disposition == "version-mismatch"
    assert outcome.reason == "island 0 was reset after the prompt (version 0, now at version 1)"
    after = fs.record(moved, decision, cand(2, 0.9), {}, CONFIG, FakeRng())
    assert after.version_mismatch == 1 and after.islands == moved.islands


def test_a_tie_goes_to_the_larger_signature() -> None:
    base = Island(0, clusters=(Cluster((1, 2), 2, (Member(1, 10),)),), best_score=2, best_id=1, num_programs=1)
    assert register(base, Member(2, 10), (0, 2), 2, CONFIG).best_id == 1
    assert register(base, Member(3, 10), (1, 3), 2, CONFIG).best_id == 3
    lower = replace(CONFIG, direction="lower")
    assert register(base, Member(4, 10), (9,), 1, lower).best_id == 4
    assert register(base, Member(5, 10), (9,), 3, lower).best_id == 1


def test_draws_are_counted_in_the_state() -> None:
    state = child(seed_state(), 2, {})
    assert state.rng_draws == 2


def test_candidate_bullets_name_signature_hash_length_versions_and_disposition() -> None:
    picks = tuple(fs.Pick(cand(i), (0.1 * i,), 0.1 * i, 0.5, 1.0) for i in (12, 31))
    decision = fs.FunSearchDecision(fs.SAMPLE, "t", 0, picks=picks)
    outcome = fs.Outcome("stored", "", (10, 16), 16, "9f2c", 340)
    assert fs.candidate_bullets(decision, outcome) == (
        ("Signature", "(10, 16)"),
        ("Output hash", "9f2c"),
        ("Length (chars)", "340"),
        ("Prompt versions", "v0=#12, v1=#31"),
        ("Disposition", "stored"),
    )
    assert fs.describe(outcome) == "stored with score 16"
    failed = fs.Outcome("failed", "no test produced a finite score")
    assert fs.describe(failed) == "failed: no test produced a finite score"


# ---------------------------------------------------------------- resetting


F5_BESTS = (7, 3, 5, 6, 7, -2, 0, 17, 4, 3)


def f5_state() -> FunSearchState:
    """Returns ten islands whose bests are F5's, each holding one program (id 100 + island)."""
    return FunSearchState(
        islands=tuple(
            island(i, cluster(best, (100 + i, 10 + i), signature=(best, i))) for i, best in enumerate(F5_BESTS)
        ),
        registrations_since_reset=1200,
    )


@pytest.mark.parametrize("seed", range(8))
def test_f5_the_weaker_half_is_reset_and_refounded_from_the_kept_half(seed: int) -> None:
    before = f5_state()
    after = reset_islands(before, CONFIG, random.Random(seed), at=42)
    reset = {i.index for i in after.islands if i.version == 1}
    assert reset == {1, 5, 6, 8, 9}
    for index in reset:
        new = after.islands[index]
        assert new.best_score is not None and new.best_score >= 5 and new.num_programs == 1
        assert len(new.clusters) == 1 and new.clusters[0].members[0].id in {100, 102, 103, 104, 107}
    assert [after.islands[i] for i in (0, 2, 3, 4, 7)] == [before.islands[i] for i in (0, 2, 3, 4, 7)]
    assert after.registrations_since_reset == 0 and after.last_reset_at == 42


def test_f5_with_explicit_uniforms_the_founders_come_from_the_ascending_kept_order() -> None:
    # Noise quantile 0.5 is exactly 0, so the ties (7, 7) and (3, 3) keep index order.
    # Kept islands in ascending best: 2 (5), 3 (6), 0 (7), 4 (7), 7 (17).
    after = reset_islands(f5_state(), CONFIG, FakeRng(*[0.5] * 10, 0.0, 0.2, 0.4, 0.6, 0.99), at=1)
    founders = {i: after.islands[i].best_id for i in (5, 6, 1, 9, 8)}
    assert founders == {5: 102, 6: 103, 1: 100, 9: 104, 8: 107}


def test_a_reset_is_triggered_by_the_registration_counter() -> None:
    config = replace(CONFIG, num_islands=4, reset_every_registrations=3)
    state = seed_state(config)
    state = child(state, 2, {"scores": {"a": 9}}, num_islands=4, reset_every_registrations=3)
    assert all(i.version == 0 for i in state.islands) and state.registrations_since_reset == 2
    decision = fs.FunSearchDecision(fs.SAMPLE, "t", 0, 0, None, (), (0.3,))
    rng = FakeRng(0.5, 0.5, 0.5, 0.5, 0.99, 0.0)
    state = fs.record(state, decision, replace(cand(3, 0.9), gen=17), {"scores": {"a": 8}}, config, rng)
    assert [i.version for i in state.islands] == [0, 1, 1, 0]
    assert state.registrations_since_reset == 0 and state.last_reset_at == 17
    assert state.rng_draws == 2 + 1 + 6 and rng.values == []
    assert state.islands[1].best_id == 2 and state.islands[1].best_score == 9


def test_a_single_island_is_never_reset() -> None:
    config = replace(CONFIG, num_islands=1, reset_every_registrations=1)
    state = seed_state(config)
    state = child(state, 2, {"scores": {"a": 1}}, num_islands=1, reset_every_registrations=1)
    assert state.islands[0].version == 0 and state.islands[0].num_programs == 2
    assert reset_islands(state, config, FakeRng(), at=3) == state


def test_a_kept_island_without_a_best_founds_an_empty_island() -> None:
    state = FunSearchState(islands=(Island(0, best_score=None), island(1, cluster(1.0, (1, 10)))))
    stripped = replace(state, islands=(state.islands[0], replace(state.islands[1], best_id=99)))
    after = reset_islands(stripped, CONFIG, FakeRng(0.5, 0.5, 0.0), at=1)
    assert after.islands[0] == Island(0, version=1)


# ---------------------------------------------------------------- any state


@settings(max_examples=120, deadline=None)
@given(states, st.integers(0, 2**32), st.sampled_from(["with_replacement", "without_replacement"]))
def test_any_state_yields_ordered_picks_and_a_readable_state(state: FunSearchState, seed: int, sampling: str) -> None:
    config = replace(CONFIG, cluster_sampling=sampling, reset_every_registrations=1)
    ids = sorted({m.id for i in state.islands for c in i.clusters for m in c.members})
    decision = fs.decide(state, [cand(i) for i in ids], config, random.Random(seed))
    scores = [p.score for p in decision.picks]
    assert scores == sorted(scores) and len(decision.picks) <= config.functions_per_prompt
    assert decision.mode == (fs.SAMPLE if ids else fs.SEED)
    assert len(decision.uniforms) == (1 + 2 * len(decision.picks) if ids else 0)
    child = Candidate(10**9 + 1, decision.island, 0.5, 1, decision.mode, code=code(0.5))
    after = fs.record(state, decision, child, {"scores": {"a": 1.0}, "output_hash": "ab"}, config, random.Random(seed))
    assert parse_state_block(render_state_block(after, config)) == after


def test_slot_i_of_a_tick_samples_island_i_mod_n_without_a_draw_for_it() -> None:
    state = FunSearchState(islands=(island(0, cluster(0.9, (1, 10))), island(1, cluster(0.5, (2, 10))),
                                    island(2)))
    population = [cand(1), cand(2)]
    chosen = [fs.decide(state, population, CONFIG, FakeRng(0.0, 0.0), Slot(i, 4)) for i in range(4)]
    # Island 2 has nothing to offer: its slot takes the next island that has (0, after wrapping round).
    assert [d.island for d in chosen] == [0, 1, 0, 0]
    assert chosen[1].reason.startswith("island 1 (slot 1/4's island, i mod n), T = 0.1: #2")
    plain = fs.decide(state, population, CONFIG, FakeRng(0.0, 0.0, 0.0))
    assert len(chosen[1].uniforms) == len(plain.uniforms) - 1  # a plain decision also draws its island
