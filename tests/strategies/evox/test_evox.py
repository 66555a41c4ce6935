"""EvoX bookkeeping: the vectors E1–E8 of strategies.md §3.7 and the edge cases of §3.6 (no sandbox, no LLM)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Sequence

import pytest

from autoloop_py.state.population import Candidate
from autoloop_py.strategies.evox import strategy as evox
from autoloop_py.strategies.evox.config import EvoXConfig, switch_interval
from autoloop_py.strategies.evox.sandbox import Genome, Sample, StrategyFailure
from autoloop_py.strategies.evox.strategy import EditCheck, EvoXRefresh, LabelTexts, MetaOutcome, StrategyRecord

INITIAL = "class EvolvedStrategy(StrategyBase):\n    pass\n"
NEW = "class EvolvedStrategy(StrategyBase):\n    NEW = 1\n"
CRASHES = "class EvolvedStrategy(StrategyBase):\n    CRASH = 1\n"
CONFIG = EvoXConfig(switch_interval=3, initial_code=INITIAL)
DEFAULTS = LabelTexts("## IMPORTANT: diverge", "## IMPORTANT: refine", "default")


# ---------------------------------------------------------------- E1–E8


def test_e1_j_uses_the_fixed_horizon_not_the_observed_length() -> None:
    assert evox.strategy_score(0.5, [0.5, 0.6, 0.8, 0.7], 10) == pytest.approx(0.1333341274, abs=1e-10)
    assert evox.strategy_score(0.5, [0.5, 0.6, 0.8, 0.7], 4) == pytest.approx(0.2108197662, abs=1e-10)


def test_e2_j_from_a_zero_start() -> None:
    assert evox.strategy_score(0.0, [0.2], 10) == pytest.approx(0.0632455532, abs=1e-10)


def test_e3_a_negative_start_has_log_weight_one() -> None:
    assert evox.strategy_score(-2.0, [-1.5], 10) == pytest.approx(0.1581138830, abs=1e-10)


def test_e4_flat_window_scores_zero_and_a_large_start_weighs_more() -> None:
    assert evox.strategy_score(0.9, [0.9, 0.9], 10) == 0
    assert evox.strategy_score(10.0, [12.0], 10) == pytest.approx(2.1490176626, abs=1e-10)


@pytest.mark.parametrize(("max_iterations", "expected"), [(100, 10), (50, 5), (10, 1), (9, 1), (5, 1)])
def test_e5_switch_interval_is_ten_percent_at_least_one(max_iterations: int, expected: int) -> None:
    assert switch_interval(None, max_iterations) == expected
    assert EvoXConfig(max_iterations=max_iterations).interval == expected
    assert switch_interval(7, max_iterations) == 7


def test_e6_stagnation_counts_and_fires_at_the_interval() -> None:
    count, last, counts, fired_at = 0, None, [], []
    for turn, best in enumerate([0.50, 0.505, 0.52, 0.52, 0.525, 0.53, 0.531]):
        before = count
        count, last, fired = evox.stagnation_step(count, last, best, 3)
        counts.append(before + 1 if fired else count)
        if fired:
            fired_at.append(turn)
            assert count == 0
    assert counts == [0, 1, 0, 1, 2, 3, 1]
    assert fired_at == [5]


def test_e7_a_three_attempt_turn_adds_three_steps_but_one_count() -> None:
    state = replace(evox.initial_state(CONFIG), last_tracked_best=0.5, window_start_score=0.5)
    after = evox.end_turn(state, [0.5, 0.5, 0.5], CONFIG)
    assert after.window_bests == (0.5, 0.5, 0.5)
    assert after.stagnant_count == 1


def test_e8_db_parent_is_argmax_j_with_non_numbers_last() -> None:
    assert evox.db_parent([(0, 0.05), (1, 0.13), (2, "N/A")]) == 1
    assert evox.db_parent([(0, "N/A"), (1, None)]) == 0
    assert evox.db_parent([(3, 0.2), (4, 0.2)]) == 3
    assert evox.db_parent([]) is None



def test_failed_meta_steps_in_a_row_pass_over_more_stagnation_signals_each_time() -> None:
    # switch_interval 3: flat scores fire every 3 turns; record when a meta step is due and fail it each time.
    meta = MetaOutcome(0, (), None, (), 3)
    state = replace(evox.initial_state(CONFIG), last_tracked_best=0.5, window_start_score=0.5)
    asked = []
    for turn in range(1, 61):
        state = evox.end_turn(state, [0.5], CONFIG)
        if state.evolve_due:
            asked.append(turn)
            state = evox.evolve(state, meta, 0.5, turn)
    assert asked == [3, 9, 18, 33, 60]  # gaps of 2, 3, 5 and 9 intervals: 1, 2, 4 and 8 signals passed over
    assert (state.meta_failures, state.meta_failures_in_row, state.meta_backoff) == (5, 5, 8)
    # A valid rewrite clears the back-off; so does a person setting meta_backoff to 0 in the state table.
    good = MetaOutcome(0, (), INITIAL, (), 1)
    after = evox.evolve(replace(state, evolve_due=True), good, 0.5, 61)
    assert (after.meta_failures_in_row, after.meta_backoff, after.meta_failures) == (0, 0, 5)
    edited = replace(state, meta_backoff=0, stagnant_count=2)
    assert evox.end_turn(edited, [0.5], CONFIG).evolve_due


# ---------------------------------------------------------------- §3.6 edge cases


def test_slow_creep_never_resets_the_count() -> None:
    state = evox.initial_state(CONFIG)
    fired = 0
    for step in range(7):
        state = evox.end_turn(state, [0.5 + 0.005 * step], CONFIG)
        if state.evolve_due:
            fired += 1
            state = replace(state, evolve_due=False)
    assert fired == 2
    assert state.stagnant_count == 0


def test_flat_scores_keep_the_initial_strategy_as_db_parent() -> None:
    state = evox.initial_state(CONFIG)
    state = replace(state, window_start_score=0.7, window_bests=(0.7, 0.7), evolve_due=True)
    state = evox.evolve(state, MetaOutcome(0, (), NEW, (), 1), 0.7, 4)
    state = replace(state, window_bests=(0.7,), evolve_due=True)
    state = evox.score_active(state, 0.7, 8)
    assert [s.j for s in state.strategies] == [0, 0]
    assert evox.strategy_parent(state) == 0


def _candidate(cid: int, fitness: float | None, gen: int, label: str = "none", status: str = "rejected") -> Candidate:
    return Candidate(cid, None, fitness, gen, "improve", parents=(1,) if cid > 1 else (), status=status,
                     code=f"x = {cid}\n", extra=(("Label", label), ("Context", "#1"), ("Strategy", "S0")))


POPULATION = (
    _candidate(4, None, 4, status="error"),
    _candidate(3, 0.7, 3, "refine"),
    _candidate(2, 0.9, 2, "diverge"),
    _candidate(1, 0.5, 1),
)


def _first_two(code: str, genomes: Sequence[Genome], seed: int, num_context: int) -> Sample:
    if code == CRASHES:
        raise StrategyFailure("crash", "ZeroDivisionError: division by zero")
    return Sample(genomes[-1].id, "refine", tuple(g.id for g in genomes[:2]))


def _decide(state: evox.EvoXState, reply: EvoXRefresh | None = None, population: Sequence[Candidate] = POPULATION,
            iteration: int = 5) -> evox.EvoXDecision:
    return evox.decide(state, population, CONFIG, random.Random(1), _first_two, iteration=iteration,
                       defaults=DEFAULTS, reply=reply)


def _never(*_: object) -> Sample:
    raise AssertionError("sample must not run without genomes")


def test_an_empty_population_evaluates_the_seed_as_is_without_sampling() -> None:
    decision = evox.decide(evox.initial_state(CONFIG), (), CONFIG, random.Random(1), _never, iteration=1,
                           defaults=DEFAULTS)
    assert decision.parent is None and decision.parents == () and decision.label == ""
    assert decision.as_is and decision.operator == "seed" and decision.state.labels == "default"


def test_a_population_without_a_scored_program_runs_from_scratch_without_sampling() -> None:
    failed = Candidate(1, None, None, 1, "seed", status="error", code="x = 1\n")
    decision = evox.decide(evox.initial_state(CONFIG), (failed,), CONFIG, random.Random(1), _never, iteration=2,
                           defaults=DEFAULTS)
    assert decision.parent is None and not decision.as_is and decision.operator == "improve"


def test_first_window_starts_at_the_seed_score_like_reference() -> None:
    # skydiscover 0.1.0's LogWindowScorer, reset from the evaluated seed (.30) and stepped once per attempt
    # (.42 ×3), scores the first strategy at J = 0.08745916174868039 (H 3); from the first child's .42 it is 0.
    config = replace(CONFIG, switch_interval=3)
    state = evox.start_first_window(evox.initial_state(config), 0.30)
    assert (state.window_start_score, state.window_bests, state.stagnant_count) == (0.30, (), 0)
    for _ in range(3):
        state = evox.end_turn(state, [0.42], config)
    scored = evox.score_active(state, 0.42, 4)
    assert scored.strategy(0).j == 0.08745916174868039 and scored.strategy(0).start_score == 0.30
    assert evox.start_first_window(state, 0.9) == state  # only the first window


def test_nan_j_sorts_like_reference_parent_choice() -> None:
    # The reference's `max(programs, key=J)`: a NaN J wins only when it comes first; elsewhere it is passed over.
    nan = float("nan")
    assert evox.db_parent([(0, nan), (1, 0.13), (2, 0.05)]) == 0
    assert evox.db_parent([(0, 0.05), (1, nan), (2, 0.13)]) == 2
    assert evox.db_parent([(0, 0.2), (1, nan), (2, 0.1)]) == 0
    assert evox.db_parent([(0, "N/A"), (1, nan), (2, 0.1)]) == 2
    assert evox.db_parent([(0, -math.inf), (1, nan)]) == 0


def test_genomes_skip_failed_evaluations_and_keep_labels_by_id() -> None:
    genomes = evox.genomes_of(POPULATION, "higher")
    assert [g.id for g in genomes] == [1, 2, 3]
    assert [g.label for g in genomes] == ["", "diverge", "refine"]
    assert genomes[1].context_ids == (1,)
    lower = evox.genomes_of(POPULATION, "lower")
    assert lower[0].metrics["score"] == -0.5


def test_decide_maps_the_sample_to_candidates() -> None:
    decision = _decide(evox.initial_state(CONFIG))
    assert decision.parent is not None and decision.parent.id == 3
    assert [c.id for c in decision.context] == [1, 2]
    assert decision.label == "refine" and decision.strategy_id == 0
    assert decision.state.rng_draws == 1 and decision.island is None


def test_a_runtime_fault_rolls_back_to_the_fallback_and_still_decides() -> None:
    state = replace(evox.initial_state(CONFIG), window_start_score=0.5, evolve_due=True)
    state = evox.evolve(state, MetaOutcome(0, (), CRASHES, (), 1), 0.9, 4)
    assert state.active == 1 and state.fallback == 0
    decision = _decide(state)
    assert decision.strategy_id == 0 and decision.parent is not None
    assert decision.state.strategy(1).status == "rolled-back"
    assert "crash: ZeroDivisionError" in decision.state.strategy(1).note
    assert decision.state.active == 0 and decision.state.fallback is None and decision.state.pending is None
    assert decision.events == ("S1 failed at run time (crash); rolled back to S0",)


def test_a_fault_without_fallback_restores_the_initial_strategy() -> None:
    state = replace(evox.initial_state(CONFIG), strategies=(StrategyRecord(0, CRASHES, window_start=1),))
    decision = _decide(state)
    assert [s.status for s in decision.state.strategies] == ["rolled-back", "active"]
    assert decision.state.strategy(1).code == INITIAL and decision.strategy_id == 1


def test_meta_llm_unreachable_means_no_evolution() -> None:
    state = replace(evox.initial_state(CONFIG), evolve_due=True)
    decision = _decide(state)
    assert not decision.state.evolve_due
    assert len(decision.state.strategies) == 1 and decision.state.evolutions == 0
    assert "no meta LLM" in decision.events[0]


def test_a_valid_meta_rewrite_is_swapped_in_pending() -> None:
    state = replace(evox.initial_state(CONFIG), evolve_due=True, window_start_score=0.5, window_bests=(0.6, 0.9))
    meta = MetaOutcome(0, (), NEW, (), 2, "refine the top quartile")
    decision = _decide(state, EvoXRefresh(meta=meta))
    after = decision.state
    s0, s1 = after.strategies
    assert s0.status == "scored" and s0.j == pytest.approx(evox.strategy_score(0.5, [0.6, 0.9], 3))
    assert s0.window_end == 5 and s0.end_score == 0.9
    assert s1.status == "active" and s1.j is None and s1.window_start == 5 and s1.parent == 0
    assert (after.active, after.pending, after.fallback) == (1, 1, 0)
    assert after.window_start_iteration == 5 and after.window_start_score == 0.9 and after.window_bests == ()
    assert after.best_strategy_j == s0.j and after.evolutions == 1 and decision.strategy_id == 1


def test_an_invalid_meta_rewrite_is_recorded_and_the_old_strategy_runs() -> None:
    state = replace(evox.initial_state(CONFIG), evolve_due=True, window_start_score=0.5, window_bests=(0.6,))
    meta = MetaOutcome(0, (), "import os\n", ("imports: line 1: import of 'os' is not allowed",), 3)
    after = _decide(state, EvoXRefresh(meta=meta)).state
    assert after.strategy(1).status == "failed-validation" and "import of 'os'" in after.strategy(1).validation
    assert after.active == 0 and after.meta_failures == 1 and after.evolutions == 1
    assert after.strategy(0).j is not None and after.pending is None
    # The old strategy is never rescored.
    again = evox.evolve(replace(after, evolve_due=True, window_bests=(2.0,)), meta, 2.0, 9)
    assert again.strategy(0).j == after.strategy(0).j


def test_a_valid_hand_edit_runs_and_is_recorded() -> None:
    state = evox.initial_state(CONFIG)
    state = evox._with(state, replace(state.strategy(0), code=NEW))
    assert evox.edited(state)
    edit = EditCheck(0, evox.checksum(NEW), ())
    after = _decide(state, EvoXRefresh(edit=edit)).state
    assert not evox.edited(after) and after.active == 0 and "edited by hand" in after.strategy(0).note


def test_an_invalid_hand_edit_is_kept_and_the_previous_strategy_runs() -> None:
    state = replace(evox.initial_state(CONFIG), evolve_due=True, window_start_score=0.5)
    state = evox.evolve(state, MetaOutcome(0, (), NEW, (), 1), 0.5, 3)
    state = evox._with(state, replace(state.strategy(1), code="import os\n"))
    edit = EditCheck(1, evox.checksum("import os\n"), ("imports: line 1: import of 'os' is not allowed",))
    decision = _decide(state, EvoXRefresh(edit=edit))
    assert decision.state.strategy(1).status == "failed-validation"
    assert decision.state.strategy(1).code == "import os\n"
    assert decision.strategy_id == 0 and decision.state.active == 0
    assert "failed; S0 runs instead" in decision.events[0]


def test_generated_labels_replace_the_defaults_once() -> None:
    labels = LabelTexts("## IMPORTANT: go wide", "## IMPORTANT: polish", "generated")
    state = _decide(evox.initial_state(CONFIG), EvoXRefresh(labels=labels)).state
    assert (state.diverge_label, state.refine_label, state.labels) == (labels.diverge, labels.refine, "generated")
    assert _decide(state).state.diverge_label == labels.diverge
