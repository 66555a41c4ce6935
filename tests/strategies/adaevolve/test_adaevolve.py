"""Tests for strategies/adaevolve.py: spec vectors A1–A8 and the decide/record/end_iteration bookkeeping (§2)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import pytest

from autoloop_py.state.population import Candidate, Population, empty_population, parse_population, render_population
from autoloop_py.strategies.adaevolve.archive import archive_bullets, archive_of, archive_status
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig, Preset
from autoloop_py.strategies.adaevolve.paradigms import active_paradigm, install_paradigms, use_paradigm, wants_paradigms
from autoloop_py.strategies.adaevolve.state import (
    AdaEvolveState,
    IslandState,
    Paradigm,
    initial_state,
    intensity,
    ucb_score,
)
from autoloop_py.strategies.adaevolve.strategy import (
    AdaEvolveDecision,
    decide,
    end_iteration,
    eval_failed,
    external_update,
    improvement,
    local_update,
    migration_due,
    mode_cutoffs,
    next_island,
    parse_state_block,
    pick_mode,
    productivity,
    record,
    spawn_choices,
    spawn_due,
    spawn_seeds,
)

CONFIG = AdaEvolveConfig()
NO_SPAWN = replace(CONFIG, use_dynamic_islands=False)


class FakeRng:
    """Returns the given uniforms in order (so tests choose u); fails loudly when one too many is drawn."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        assert self.values, "drew more uniforms than the test provided"
        return self.values.pop(0)


def code(name: str, lines: int = 3) -> str:
    """Returns a small distinct program: its identifiers carry the name."""
    body = "".join(f"    {name}_v{i} = {name}_w{i} + {i}\n" for i in range(lines))
    return f"def solve_{name}(values):\n{body}    return {name}_v0\n"


def cand(id: int, island: int, fitness: float | None, archive: str = "admitted", parents: tuple[int, ...] = (),
         source: str | None = None, mode: str = "exploitation") -> Candidate:
    """Returns a population entry with AdaEvolve's Island bullet."""
    return Candidate(
        id=id, island=island, fitness=fitness, gen=id, operator=mode, parents=parents, approach=f"approach {id}",
        status="accepted", code=source if source is not None else code(f"p{id}"),
        extra=archive_bullets(island, mode, archive),
    )


def population_of(*candidates: Candidate) -> Population:
    section = empty_population("AdaEvolve")
    ordered = tuple(sorted(candidates, key=lambda c: c.id, reverse=True))
    return replace(section, candidates=ordered, next_id=max((c.id for c in candidates), default=0) + 1)


def fold(rewards: Sequence[float], rho: float = 0.9) -> IslandState:
    """Returns an island after one admitted child per reward: R ← ρR + r, V ← ρV + 1, n += 1."""
    island = IslandState()
    for reward in rewards:
        island = replace(island, visits=island.visits + 1, decayed_visits=rho * island.decayed_visits + 1,
                         decayed_reward=rho * island.decayed_reward + reward)
    return island


def scored_state(*islands: IslandState, **changes: object) -> AdaEvolveState:
    return replace(initial_state(CONFIG), islands=islands, **changes)  # type: ignore[arg-type]


def child(fitness: float | None, source: str | None = None, gen: int = 1) -> Candidate:
    return Candidate(id=0, island=None, fitness=fitness, gen=gen, operator="", code=source or code(f"c{gen}"),
                     approach="child", status="rejected")


# --- A1: intensity ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("g", "expected"), [
    (0, 0.4999650035), (0.1, 0.4159114211), (0.25, 0.3833333318), (1, 0.3249999996), (4, 0.2666666666),
])
def test_a1_intensity_of_g(g: float, expected: float) -> None:
    assert round(intensity(g, CONFIG), 10) == expected


def test_a1_fixed_intensity_when_adaptive_search_is_off() -> None:
    assert intensity(4, replace(CONFIG, use_adaptive_search=False)) == 0.4


# --- A2: the G trace --------------------------------------------------------------------------------


def test_a2_g_trace_from_minus_infinity_changes_only_on_improvement() -> None:
    state = scored_state(IslandState())
    expected = [  # (child, δ, G after, I after)
        (1.0, 1.0, 0.1, None),
        (1.2, 0.199999998, 0.0939999999, 0.4178719967),
        (1.1, None, 0.0939999999, None),
        (2.4, 0.9999999917, 0.1845999983, 0.3948149880),
        (2.5, 0.0416666665, 0.1663136095, None),
    ]
    for f, delta, g_after, i_after in expected:
        if delta is not None:
            assert round(improvement(f, state.islands[0].best), 10) == delta
        state = local_update(state, 0, f, CONFIG)
        assert round(state.islands[0].g, 10) == g_after
        if i_after is not None:
            assert round(intensity(state.islands[0].g, CONFIG), 10) == i_after
    assert (state.islands[0].improvements, state.islands[0].evaluations, state.islands[0].best) == (4, 5, 2.5)


def test_a2_odd_best_values() -> None:
    assert improvement(5.0, -math.inf) == 1.0
    assert improvement(0.5, 0.0) == 1.0  # min(Δ/1e-8, 1)
    assert improvement(-1.0, -2.0) == pytest.approx(0.5)


# --- A3: the mode split -----------------------------------------------------------------------------


def test_a3_mode_split_at_intensity_04() -> None:
    assert mode_cutoffs(0.4) == (0.4, 0.82)
    assert [pick_mode(0.4, u) for u in (0.0, 0.3999, 0.4, 0.8199, 0.82, 0.9999)] == [
        "exploration", "exploration", "exploitation", "exploitation", "balanced", "balanced",
    ]


def test_a3_regression_float_cutoff_would_call_082_exploitation() -> None:
    # In floats .4 + .7·(1 − .4) is 0.8200000000000001, so u = .82 would fall to exploitation.
    assert 0.4 + 0.7 * (1 - 0.4) > 0.82
    assert pick_mode(0.4, 0.82) == "balanced"


def test_a3_cutoffs_at_g_01() -> None:
    low, high = mode_cutoffs(intensity(0.1, CONFIG))
    assert (round(low, 10), round(high, 10)) == (0.4159114211, 0.8247734263)


# --- A4: UCB ---------------------------------------------------------------------------------------


def test_a4_ucb_at_t12_picks_island_0() -> None:
    islands = (fold([1, 0, 0]), fold([0, 0.1, 0, 0]), fold([0, 0, 0, 0.05, 0]))
    assert [(round(i.decayed_reward, 7), round(i.decayed_visits, 7), i.visits) for i in islands] == [
        (0.81, 2.71, 3), (0.081, 3.439, 4), (0.045, 4.0951, 5),
    ]
    scores = [round(ucb_score(i, 12, CONFIG) or 0, 10) for i in islands]
    assert scores == [1.6026536799, 1.1526432373, 1.0208774313]
    assert round(islands[0].decayed_reward / islands[0].decayed_visits, 10) == 0.2988929889
    assert next_island(scored_state(*islands), 12, CONFIG, FakeRng()) == 0


def test_a4_the_exploration_bonus_wins_for_a_less_visited_island() -> None:
    busy, idle = fold([1, 0.3, 0.2, 0.1, 0.2, 0.1, 0.3, 0.2]), fold([0, 0, 0, 0])
    assert (round(busy.decayed_reward, 7), round(busy.decayed_visits, 7), busy.visits) == (1.5182372, 5.6953279, 8)
    assert round(ucb_score(busy, 12, CONFIG) or 0, 10) == 1.0649630168
    assert round(ucb_score(idle, 12, CONFIG) or 0, 10) == 1.1290898788
    assert next_island(scored_state(busy, idle), 12, CONFIG, FakeRng()) == 1


def test_islands_under_three_visits_are_picked_first_uniformly() -> None:
    state = scored_state(fold([1, 1, 1]), fold([0]), fold([0, 0]))
    assert next_island(state, 5, CONFIG, FakeRng(0.0)) == 1
    assert next_island(state, 5, CONFIG, FakeRng(0.99)) == 2


def test_ucb_ties_go_to_the_lower_island_and_round_robin_without_ucb() -> None:
    state = scored_state(fold([0, 0, 0]), fold([0, 0, 0]))
    assert next_island(state, 7, CONFIG, FakeRng()) == 0
    assert next_island(state, 7, replace(CONFIG, use_ucb_selection=False), FakeRng()) == 0
    assert next_island(state, 8, replace(CONFIG, use_ucb_selection=False), FakeRng()) == 1


# --- A5: global vs local normalisation ----------------------------------------------------------------


def test_a5_reward_is_normalised_by_the_global_best_and_delta_by_the_local() -> None:
    state = scored_state(IslandState(best=0.5), ucb_normaliser=2.0)
    after = local_update(state, 0, 0.9, CONFIG)
    assert round(after.islands[0].decayed_reward, 9) == 0.199999999
    assert round(improvement(0.9, 0.5), 9) == 0.799999984
    assert after.islands[0].g == pytest.approx(0.1 * 0.799999984**2)
    assert after.ucb_normaliser == 2.0


def test_external_update_moves_g_and_best_but_not_counts_or_reward() -> None:
    state = scored_state(IslandState(best=1.0, g=0.1, visits=4, decayed_visits=3.0, decayed_reward=0.5))
    after = external_update(state, 0, 1.5, CONFIG)
    island = after.islands[0]
    assert (island.best, island.visits, island.decayed_visits, island.decayed_reward) == (1.5, 4, 3.0, 0.5)
    assert island.g == pytest.approx(0.9 * 0.1 + 0.1 * (0.5 / (1 + 1e-8)) ** 2)
    assert (island.improvements, island.evaluations) == (0, 0)
    assert after.ucb_normaliser == 1.5
    assert external_update(after, 0, 1.2, CONFIG).islands[0] == island


# --- A6, A7: paradigms ------------------------------------------------------------------------------


IDEAS = tuple(Paradigm(f"idea {i}", f"how {i}", f"lib.f{i}") for i in range(3))


@pytest.mark.parametrize(("window", "ideas", "expected"), [
    ((1,) + (0,) * 9, (), True),
    ((1, 1) + (0,) * 8, (), False),
    ((0,) * 9, (), False),
    ((1,) + (0,) * 9, IDEAS[:1], False),
])
def test_a6_paradigm_trigger(window: tuple[int, ...], ideas: tuple[Paradigm, ...], expected: bool) -> None:
    state = replace(initial_state(CONFIG), window=window, paradigms=ideas)
    assert wants_paradigms(state, CONFIG) is expected


def test_a6_trigger_off_when_disabled_and_exhausted_ideas_do_not_block_it() -> None:
    window = (0,) * 10
    assert not wants_paradigms(replace(initial_state(CONFIG), window=window),
                               replace(CONFIG, use_paradigm_breakthrough=False))
    spent = tuple(replace(p, uses=2) for p in IDEAS)
    assert wants_paradigms(replace(initial_state(CONFIG), window=window, paradigms=spent), CONFIG)


def test_a7_ideas_rotate_until_each_is_used_twice() -> None:
    state = replace(initial_state(CONFIG), paradigms=IDEAS)
    used = []
    while (index := active_paradigm(state, CONFIG)) is not None:
        used.append(index)
        state = use_paradigm(state, index, CONFIG)
    assert used == [0, 1, 2, 0, 1, 2]
    assert [p.uses for p in state.paradigms] == [2, 2, 2]


def test_a_retired_idea_is_skipped() -> None:
    state = replace(initial_state(CONFIG), paradigms=(replace(IDEAS[0], retired=True), *IDEAS[1:]))
    assert active_paradigm(state, CONFIG) == 1


def test_a_failed_guide_call_waits_for_the_next_iteration_and_the_cooldown() -> None:
    reference = replace(CONFIG, paradigm_retry_cooldown=0)
    state = replace(initial_state(CONFIG), window=(0,) * 10, iteration=4)
    failed = install_paradigms(state, [], CONFIG)
    assert failed.guide_failed_at == 5 and failed.guide_failures == 1 and not failed.paradigms
    assert not wants_paradigms(replace(failed, iteration=4), reference)
    assert wants_paradigms(replace(failed, iteration=5), reference)
    assert not wants_paradigms(replace(failed, iteration=5), replace(CONFIG, paradigm_retry_cooldown=1))


def asked_at(state: AdaEvolveState, config: AdaEvolveConfig) -> int:
    """Returns the first iteration (after state's) at which the guide is asked again."""
    while not wants_paradigms(state, config):
        state = replace(state, iteration=state.iteration + 1)
    return state.iteration + 1


def test_unusable_guide_replies_in_a_row_double_the_wait_up_to_eight_times() -> None:
    state = replace(initial_state(CONFIG), window=(0,) * 10, iteration=4)
    assert CONFIG.paradigm_retry_cooldown == 5
    gaps = []
    for _ in range(6):
        state = install_paradigms(state, [], CONFIG)  # the reply of iteration state.iteration + 1
        asked = asked_at(state, CONFIG)
        gaps.append(asked - state.guide_failed_at)
        state = replace(state, iteration=asked - 1)
    assert gaps == [6, 11, 21, 41, 41, 41]
    assert state.guide_failures == 6
    installed = install_paradigms(state, IDEAS, CONFIG)
    assert (installed.guide_failures, installed.guide_failed_at) == (0, None)
    # A person who sets guide_failures back to 0 in the state table gets the first wait again.
    edited = replace(state, guide_failures=0, iteration=state.guide_failed_at - 1)
    assert asked_at(edited, CONFIG) - state.guide_failed_at == 6


def test_installing_ideas_archives_the_used_ones_with_their_outcome() -> None:
    state = replace(initial_state(CONFIG), global_best=2.0, best_at_gen=1.0, best_during=1.5,
                    paradigms=(replace(IDEAS[0], uses=2), IDEAS[1]))
    after = install_paradigms(state, [Paradigm("new", "d", "x.y", uses=1)], CONFIG)
    assert [(t.outcome, t.idea, t.gain) for t in after.tried] == [("SUCCESS", "idea 0", 0.5)]
    assert [(p.idea, p.uses) for p in after.paradigms] == [("new", 0)]
    assert (after.best_at_gen, after.best_during, after.current_paradigm) == (2.0, 2.0, 0)
    flat = install_paradigms(replace(after, paradigms=(replace(after.paradigms[0], uses=1),), best_during=2.0005),
                             IDEAS, replace(CONFIG, paradigm_max_tried=1, paradigm_num_to_generate=2))
    assert [(t.outcome, t.idea) for t in flat.tried] == [("FAILED", "new")]
    assert len(flat.paradigms) == 2


# --- A8: spawning -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("improvements", "expected"), [(2, True), (3, False)])
def test_a8_spawn_when_productivity_is_below_the_threshold(improvements: int, expected: bool) -> None:
    state = scored_state(IslandState(improvements=improvements, evaluations=100), IslandState(evaluations=40),
                         last_spawn=-30)
    assert round(productivity(state), 7) == round(improvements / 140, 7)
    assert spawn_due(state, True, 40, CONFIG) is expected


def test_a8_spawn_needs_programs_room_cooldown_and_the_switch() -> None:
    state = scored_state(IslandState(evaluations=100), IslandState(evaluations=40), last_spawn=10)
    assert not spawn_due(state, True, 39, CONFIG)
    assert spawn_due(state, True, 40, CONFIG)
    assert not spawn_due(state, False, 40, CONFIG)
    assert not spawn_due(state, True, 40, replace(CONFIG, max_islands=2))
    assert not spawn_due(state, True, 40, NO_SPAWN)
    assert productivity(scored_state(IslandState())) == 1.0


def test_a8_the_preset_is_drawn_among_the_least_used() -> None:
    state = scored_state(IslandState(), IslandState())
    assert spawn_choices(state, CONFIG) == ("quality", "diversity", "pareto", "exploration")
    assert spawn_choices(scored_state(*(IslandState(preset=p.name) for p in CONFIG.presets)), CONFIG) == tuple(
        p.name for p in CONFIG.presets
    )


# --- decide -----------------------------------------------------------------------------------------------


ARCHIVE = (cand(1, 0, 0.5), cand(2, 0, 0.9), cand(3, 0, 0.7), cand(4, 0, 0.8), cand(5, 1, 0.95))


def state_after_seed(**changes: object) -> AdaEvolveState:
    state = replace(initial_state(CONFIG), islands=(IslandState(g=0.1, best=0.9), IslandState(g=0.1, best=0.95)),
                    global_best=0.95, best_program_id=5, ucb_normaliser=0.95)
    return replace(state, **changes)  # type: ignore[arg-type]


def test_the_first_attempt_has_no_parent_and_draws_nothing() -> None:
    decision = decide(initial_state(CONFIG), (), CONFIG, FakeRng())
    assert (decision.island, decision.mode, decision.parent, decision.uniforms) == (0, "exploration", None, ())
    assert "seeds island 0" in decision.reason


def test_exploitation_takes_uniformly_from_the_top_quarter() -> None:
    decision = decide(state_after_seed(), ARCHIVE, CONFIG, FakeRng(0.5, 0.99))
    assert decision.mode == "exploitation"
    assert decision.parent is not None and decision.parent.id == 2  # top ⌊4/4⌋ = 1 of island 0
    assert decision.uniforms == (0.5, 0.99)
    assert "u = 0.5" in decision.reason and "→ exploitation" in decision.reason


def test_exploration_is_a_novelty_roulette_and_balanced_splits_in_half() -> None:
    explore = decide(state_after_seed(), ARCHIVE, CONFIG, FakeRng(0.0, 0.0))
    assert explore.mode == "exploration" and explore.parent is not None and explore.parent.id == 1
    top = decide(state_after_seed(), ARCHIVE, CONFIG, FakeRng(0.9, 0.2, 0.7))
    assert top.mode == "balanced" and top.parent is not None and top.parent.id == 2
    roulette = decide(state_after_seed(), ARCHIVE, CONFIG, FakeRng(0.9, 0.6, 0.999))
    assert roulette.parent is not None and roulette.parent.id == 4 and len(roulette.uniforms) == 3


def test_a_hand_edited_g_sets_the_next_intensity() -> None:
    edited = state_after_seed(islands=(IslandState(g=4.0, best=0.9), IslandState(g=0.1, best=0.95)))
    decision = decide(edited, ARCHIVE, CONFIG, FakeRng(0.3, 0.0))
    assert round(decision.intensity, 10) == 0.2666666666
    assert decision.mode == "exploitation"  # 0.3 is above I(4) but below I(0.1)


def test_context_is_local_most_distant_and_global_top_excluding_the_parent() -> None:
    decision = decide(state_after_seed(), ARCHIVE, CONFIG, FakeRng(0.5, 0.0))
    assert decision.parent is not None and decision.parent.id == 2
    assert {c.id for c in decision.local_context} <= {1, 3, 4} and len(decision.local_context) == 2
    assert [c.id for c in decision.global_context] == [5, 4]


def test_siblings_are_the_parents_latest_children_on_the_island() -> None:
    children = tuple(cand(10 + i, 0, 0.1, "rejected", parents=(2,)) for i in range(7))
    elsewhere = cand(30, 1, 0.1, "rejected", parents=(2,))
    decision = decide(state_after_seed(), (*ARCHIVE, *children, elsewhere), CONFIG, FakeRng(0.5, 0.0))
    assert [c.id for c in decision.siblings] == [16, 15, 14, 13, 12]


def test_an_active_paradigm_makes_the_global_best_the_parent() -> None:
    state = state_after_seed(paradigms=IDEAS, current_paradigm=1)
    decision = decide(state, ARCHIVE, CONFIG, FakeRng(0.5, 0.0))
    assert decision.sampled_parent is not None and decision.sampled_parent.id == 2
    assert decision.parent is not None and decision.parent.id == 5
    assert (decision.paradigm, decision.paradigm_index) == (IDEAS[1], 1)
    assert all(c.id != 5 for c in decision.global_context)


def test_an_empty_island_samples_from_all_islands() -> None:
    state = state_after_seed(current_island=1)
    decision = decide(state, ARCHIVE[:4], CONFIG, FakeRng(0.5, 0.0))
    assert decision.island == 1 and decision.parent is not None and decision.parent.id == 2
    assert "island 1's archive is empty" in decision.reason


def test_each_attempt_draws_afresh_and_carries_the_previous_error() -> None:
    first = decide(state_after_seed(), ARCHIVE, CONFIG, FakeRng(0.5, 0.0))
    retry = decide(state_after_seed(), ARCHIVE, CONFIG, FakeRng(0.1, 0.0), previous_error="SyntaxError line 3")
    assert (first.mode, retry.mode, retry.previous_error) == ("exploitation", "exploration", "SyntaxError line 3")


# --- record -------------------------------------------------------------------------------------------------


def test_the_first_scored_program_seeds_island_0_and_is_copied_to_the_others() -> None:
    state = initial_state(CONFIG)
    decision = decide(state, (), CONFIG, FakeRng())
    step = record(state, decision, child(1.0), {}, empty_population("AdaEvolve"), CONFIG)
    island0, island1 = step.state.islands
    assert (island0.g, island0.visits, island0.decayed_visits, island0.decayed_reward) == (0.1, 1, 1.0, 1.0)
    assert (island1.g, island1.best, island1.visits) == (0.1, 1.0, 0)
    assert (step.state.window, step.state.global_best, step.state.best_program_id) == ((1,), 1.0, 1)
    seed, copy = sorted(step.population.candidates, key=lambda c: c.id)
    assert (seed.id, seed.island, archive_status(seed)) == (1, 0, "admitted")
    assert (copy.id, copy.island, copy.operator, copy.parents) == (2, 1, "seed", (1,))
    assert ("Copied from", "island 0 (#1)") in copy.extra
    assert "| 1 | balanced | 0.1 | 1 | 0 | 0 | 0 | 0 | 0 |" in step.population.strategy_state


def test_the_seed_has_no_copies_on_a_single_island() -> None:
    config = replace(CONFIG, num_islands=1)
    state = initial_state(config)
    step = record(state, decide(state, (), config, FakeRng()), child(1.0), {}, empty_population(), config)
    assert [c.id for c in step.population.candidates] == [1]


@pytest.mark.parametrize(("fitness", "metrics"), [
    (None, {}), (math.nan, {}), (math.inf, {}), (0.99, {"validity": 0}), (0.0, {"combined_score": 0, "error": "x"}),
])
def test_a_missing_nan_or_failed_fitness_is_recorded_but_changes_nothing(fitness: float | None,
                                                                          metrics: dict[str, object]) -> None:
    state = state_after_seed(rng_draws=4)
    decision = decide(state, ARCHIVE, CONFIG, FakeRng(0.5, 0.0))
    step = record(state, decision, child(fitness), metrics, population_of(*ARCHIVE), CONFIG)
    assert step.state == replace(state, rng_draws=6)
    new = step.population.candidates[0]
    assert (new.id, new.island, archive_status(new), new.parents) == (6, 0, "rejected", (2,))


def test_a_failed_attempt_still_uses_the_paradigm() -> None:
    state = state_after_seed(paradigms=IDEAS)
    decision = decide(state, ARCHIVE, CONFIG, FakeRng(0.5, 0.0))
    after = record(state, decision, child(None), {}, population_of(*ARCHIVE), CONFIG).state
    assert [p.uses for p in after.paradigms] == [1, 0, 0] and after.current_paradigm == 1


def test_an_admitted_child_updates_its_island_the_global_best_and_the_window() -> None:
    state = state_after_seed(paradigms=IDEAS, best_at_gen=0.95, best_during=0.95)
    decision = decide(state, ARCHIVE, CONFIG, FakeRng(0.5, 0.0))
    step = record(state, decision, child(1.2), {}, population_of(*ARCHIVE), CONFIG)
    island = step.state.islands[0]
    assert (island.best, island.improvements, island.evaluations, island.visits) == (1.2, 1, 1, 1)
    assert round(island.decayed_reward, 9) == round(min(0.3 / (0.95 + 1e-8), 1), 9)
    assert (step.state.global_best, step.state.best_program_id, step.state.window) == (1.2, 6, (1,))
    assert step.state.best_during == 1.2


def test_a_child_below_the_islands_best_is_admitted_without_reward() -> None:
    state = state_after_seed()
    decision = decide(state, ARCHIVE, CONFIG, FakeRng(0.5, 0.0))
    step = record(state, decision, child(0.6), {}, population_of(*ARCHIVE), CONFIG)
    island = step.state.islands[0]
    assert (island.g, island.best, island.improvements, island.evaluations, island.decayed_reward) == (
        0.1, 0.9, 0, 1, 0.0)
    assert step.state.window == (0,)


def test_at_capacity_a_winning_child_evicts_its_nearest_unprotected_rival() -> None:
    config = replace(CONFIG, population_size=4)
    members = (cand(1, 0, 0.9), cand(2, 0, 0.8), cand(3, 0, 0.7), cand(4, 0, 0.5, source=code("near")))
    state = state_after_seed(islands=(IslandState(best=0.9), IslandState()))
    decision = decide(state, members, config, FakeRng(0.5, 0.0))
    step = record(state, decision, child(0.85, code("near", 4), gen=9), {}, population_of(*members), config)
    by_id = {c.id: c for c in step.population.candidates}
    assert archive_status(by_id[5]) == "admitted"
    assert archive_status(by_id[4]) == "evicted@9"
    assert [c.id for c, _ in archive_of(step.population.candidates, 0, "higher")] == [1, 2, 3, 5]


def test_lower_is_better_orients_the_fitness() -> None:
    config = replace(CONFIG, direction="lower")
    state = initial_state(config)
    seeded = record(state, decide(state, (), config, FakeRng()), child(12.0), {}, empty_population(), config)
    decision = decide(seeded.state, seeded.population.candidates, config, FakeRng(0.5, 0.0))
    better = record(seeded.state, decision, child(9.5, gen=2), {}, seeded.population, config)
    assert better.state.global_best == -9.5 and better.state.best_program_id == 3
    assert "| global_best | 9.5 |" in better.population.strategy_state


def test_all_scores_equal_freeze_g_and_fill_the_window_with_zeros() -> None:
    config = replace(CONFIG, population_size=3, paradigm_window_size=4, num_islands=1)
    state = initial_state(config)
    step = record(state, decide(state, (), config, FakeRng()), child(0.5), {}, empty_population(), config)
    for gen in range(2, 6):
        decision = decide(step.state, step.population.candidates, config, FakeRng(0.5, 0.0))
        step = record(step.state, decision, child(0.5, code(f"flat{gen}"), gen), {}, step.population, config)
    assert step.state.islands[0].g == 0.1 and step.state.window == (0, 0, 0, 0)
    assert productivity(step.state) == pytest.approx(1 / 5)
    assert wants_paradigms(step.state, config)


# --- end_iteration ------------------------------------------------------------------------------------------


def test_end_iteration_picks_the_next_island_and_counts_draws() -> None:
    state = state_after_seed(rng_draws=2)
    step = end_iteration(state, population_of(*ARCHIVE), NO_SPAWN, FakeRng(0.7), 3)
    assert (step.state.iteration, step.state.current_island, step.state.rng_draws) == (3, 1, 3)
    assert "| current_island | 1 |" in step.population.strategy_state


def test_migration_copies_the_top_programs_around_the_ring_so_a_program_may_hop_twice() -> None:
    config = replace(NO_SPAWN, migration_count=1, num_islands=3)
    members = (cand(1, 0, 0.5), cand(2, 0, 0.9), cand(5, 1, 0.3), cand(6, 2, 0.1))
    state = replace(initial_state(config), islands=(IslandState(best=0.9), IslandState(best=0.3, visits=3),
                                                    IslandState(best=0.1)))
    assert migration_due(15, 3, config) and not migration_due(14, 3, config) and not migration_due(0, 3, config)
    step = end_iteration(state, population_of(*members), config, FakeRng(0.0), 15)
    copies = sorted((c for c in step.population.candidates if c.operator == "migration"), key=lambda c: c.id)
    # 2 goes to island 1 (as 7), 7 goes on to island 2 (as 8); 8's code is already on island 0.
    assert [(c.id, c.island, c.parents, c.fitness) for c in copies] == [(7, 1, (2,), 0.9), (8, 2, (7,), 0.9)]
    assert ("Migrated from", "island 0 (#2)") in copies[0].extra
    assert ("Migrated from", "island 1 (#7)") in copies[1].extra
    island1 = step.state.islands[1]
    assert (island1.best, island1.visits, island1.evaluations, island1.decayed_reward) == (0.9, 3, 0, 0.0)
    assert island1.g == pytest.approx(0.1 * 1.0)  # δ = min(0.6/0.3, 1)
    assert step.state.islands[2].best == 0.9


def test_migration_skips_code_already_on_the_destination() -> None:
    config = replace(NO_SPAWN, migration_count=2)
    shared = cand(6, 1, 0.8, source=ARCHIVE[3].code)
    step = end_iteration(state_after_seed(), population_of(*ARCHIVE, shared), config, FakeRng(0.0), 15)
    copies = sorted((c for c in step.population.candidates if c.operator == "migration"), key=lambda c: c.id)
    assert [(c.id, c.island, c.parents) for c in copies] == [(7, 1, (2,)), (8, 0, (5,))]


def test_a_single_island_never_migrates_and_always_comes_next() -> None:
    config = replace(NO_SPAWN, num_islands=1)
    state = replace(initial_state(config), islands=(IslandState(g=0.1, best=0.9, visits=5),))
    members = population_of(*ARCHIVE[:4])
    step = end_iteration(state, members, config, FakeRng(), 15)
    assert step.state.current_island == 0 and step.state.rng_draws == 0
    assert [c.id for c in step.population.candidates] == [4, 3, 2, 1]


def test_a_spawned_island_starts_fresh_with_copies_of_the_global_top() -> None:
    config = replace(CONFIG, spawn_cooldown_iterations=5)
    state = state_after_seed(islands=(IslandState(g=0.1, best=0.9, evaluations=100, improvements=1, visits=3),
                                      IslandState(g=0.1, best=0.95, evaluations=40, visits=3)))
    twin = cand(6, 1, 0.9, source=ARCHIVE[1].code)
    step = end_iteration(state, population_of(*ARCHIVE, twin), config, FakeRng(0.3), 7)
    new = step.state.islands[2]
    assert (new.preset, new.best, new.g, step.state.last_spawn) == ("diversity", -math.inf, 0.0, 7)
    copies = [c for c in step.population.candidates if c.island == 2]
    # Top 5 by f over island 0 then island 1 (5, 2, 6, 4, 3): the twin of #2 is copied too, as the reference does.
    assert [c.parents[0] for c in sorted(copies, key=lambda c: c.id)] == [5, 2, 6, 4, 3]
    assert all(c.operator == "spawn" and archive_status(c) == "admitted" for c in copies)
    assert step.state.current_island == 2  # the only island with fewer than 3 visits


def test_spawn_seeds_follow_archive_order_with_duplicates_like_reference() -> None:
    # skydiscover 0.1.0's `_seed_new_island` on these archives gave the parents [#4, #6, #5, #1, #2]: islands listed
    # in order (so #6 on island 0 precedes #5 on island 1 at .6), and the seed's copy on island 1 comes again.
    seed = "def solve(x):\n    return x\n"
    members = (cand(1, 0, 0.5, source=seed), cand(2, 1, 0.5, source=seed), cand(4, 1, 0.9), cand(5, 1, 0.6),
               cand(6, 0, 0.6))
    assert [c.id for c, _ in spawn_seeds(population_of(*members), 2, CONFIG)] == [4, 6, 5, 1, 2]
    config = replace(CONFIG, spawn_cooldown_iterations=5)
    state = state_after_seed(islands=(IslandState(g=0.1, best=0.6, evaluations=100, visits=3),
                                      IslandState(g=0.1, best=0.9, evaluations=40, visits=3)))
    step = end_iteration(state, population_of(*members), config, FakeRng(0.3), 7)
    copies = sorted((c for c in step.population.candidates if c.island == 2), key=lambda c: c.id)
    assert [c.parents[0] for c in copies] == [4, 6, 5, 1, 2]


def test_end_iteration_output_round_trips_through_the_state_file() -> None:
    step = end_iteration(state_after_seed(), population_of(*ARCHIVE), NO_SPAWN, FakeRng(0.2), 15)
    again = parse_population(render_population(step.population))
    assert parse_state_block(again.strategy_state, "state.md", 0, NO_SPAWN) == step.state
    assert {c.id: c.extra for c in again.candidates} == {c.id: c.extra for c in step.population.candidates}


# --- evaluation failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("metrics", "failed"), [
    ({"validity": 0}, True), ({"validity": -1}, True), ({"validity": 1}, False), ({"timeout": True}, True),
    ({"timeout": True, "validity": 1}, False), ({"combined_score": 0, "error": "boom"}, True),
    ({"combined_score": 0}, False), ({"combined_score": 0.5, "error": "x"}, False), ({}, False),
])
def test_eval_failure_shapes(metrics: dict[str, object], failed: bool) -> None:
    assert eval_failed(metrics) is failed


def test_decisions_expose_operator_and_parents_like_the_base_decision() -> None:
    decision = AdaEvolveDecision(0, "balanced", "why", ARCHIVE[0])
    assert (decision.operator, decision.parents) == ("balanced", (ARCHIVE[0],))
    assert AdaEvolveDecision(0, "exploration", "why", None).parents == ()


def test_spawn_puts_each_offered_copy_through_the_new_islands_admission_like_reference() -> None:
    # population_size 3 < 5 offers. The reference's `_seed_new_island` calls archive.add on each of the top 5, so the
    # 4th and 5th offers compete by crowding (the spawned "diversity" island weighs novelty .5): the loop (#4, .6)
    # evicts the copy of #2 and the math import (#5, .5) evicts the copy of #4. Truncating to capacity kept 1, 2, 3.
    sources = ["def solve(x):\n    return x + 1\n", "def solve(x):\n    return x - 1\n", "def solve(x):\n    return x\n",
               "def solve(x):\n    while x:\n        x -= 1\n    return x\n",
               "import math\ndef solve(x):\n    for i in range(3):\n        x = math.sqrt(x)\n    return x\n"]
    members = [cand(i + 1, 0 if i < 3 else 1, f, source=s) for i, (f, s) in enumerate(zip([.9, .8, .7, .6, .5], sources))]
    config = replace(CONFIG, spawn_cooldown_iterations=5, population_size=3)
    state = state_after_seed(islands=(IslandState(g=0.1, best=0.9, evaluations=100, visits=3),
                                      IslandState(g=0.1, best=0.6, evaluations=40, visits=3)))
    step = end_iteration(state, population_of(*members), config, FakeRng(0.3), 7)
    assert step.state.islands[2].preset == "diversity"
    copies = sorted((c for c in step.population.candidates if c.island == 2), key=lambda c: c.id)
    assert [(c.parents[0], archive_status(c)) for c in copies] == [
        (1, "admitted"), (2, "evicted@7"), (3, "admitted"), (4, "evicted@7"), (5, "admitted")]
    assert [c.id for c, _ in archive_of(step.population.candidates, 2, "higher")] == [6, 8, 10]


def test_spawn_offers_stop_at_capacity_when_no_offer_wins_the_crowding() -> None:
    # A preset without novelty: each later offer is worse than every member, so its fitness share is 0 (clamped)
    # and it never beats its rival: the island keeps the first population_size offers.
    config = replace(CONFIG, spawn_cooldown_iterations=5, population_size=2)
    state = state_after_seed(islands=(IslandState(g=0.1, best=0.9, evaluations=100, visits=3),
                                      IslandState(g=0.1, best=0.95, evaluations=40, visits=3)))
    step = end_iteration(state, population_of(*ARCHIVE), replace(config, presets=(Preset("fit", 0.0, 1.0, 0.0, 0.2),)), FakeRng(0.3), 7)
    kept = archive_of(step.population.candidates, 2, "higher")
    assert [c.parents[0] for c, _ in kept] == [5, 2]
    assert len([c for c in step.population.candidates if c.island == 2]) == 2
