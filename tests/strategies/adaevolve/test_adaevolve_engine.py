"""Tests for strategies/adaevolve_engine.py: the runner's view of AdaEvolve, the guide hook and record."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from test_adaevolve import cand, population_of

from autoloop_py.errors import ConfigurationError, StateError
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.target import Target
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.strategies import runner as strategy
from autoloop_py.strategies.adaevolve import strategy as adaevolve
from autoloop_py.strategies.adaevolve.archive import archive_status
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.engine import AdaEvolveEngine
from autoloop_py.strategies.adaevolve.state import AdaEvolveState
from autoloop_py.strategies.adaevolve.strategy import AdaEvolveDecision
from autoloop_py.strategies.base import StrategyContext
from autoloop_py.strategies.runner import StrategyRunner
from autoloop_py.strategies.slots import Slot

CONFIG = AdaEvolveConfig(paradigm_window_size=3, use_dynamic_islands=False)
GUIDE_REPLY = (
    '{"ideas": [{"idea": "Basin hopping", "description": "Hop between basins.", '
    '"approach_type": "scipy.optimize.basinhopping"}, {"idea": "Grid restarts", "description": "Seed from a grid.", '
    '"approach_type": "itertools.product"}]}'
)


def _program() -> Program:
    return Program(
        name="fm", path=Path(".autoloop/programs/fm/program.md"), directory=Path(".autoloop/programs/fm"),
        goal="Find the global minimum of f.", target=Target(("code/search.py",), ()),
        evaluation=Evaluation("python code/evaluate.py", "score", 30), strategy_text="", config=ProgramConfig(),
        unconfigured=False, text="",
    )


def _engine(tmp_path: Path, config: AdaEvolveConfig = CONFIG) -> AdaEvolveEngine:
    (tmp_path / "paradigm.md").write_text("PARADIGM FRAMING: think in basins\n", encoding="utf-8")
    return AdaEvolveEngine(config, _program(), tmp_path, "fm.md")


def _context(population: pop.Population) -> StrategyContext:
    return StrategyContext(population=population.candidates, recent_statuses=(), best_metric=None, iteration=1,
                           direction="higher", next_id=population.next_id)


def _with_state(population: pop.Population, state: AdaEvolveState, config: AdaEvolveConfig = CONFIG) -> pop.Population:
    return pop.with_strategy_state(population, adaevolve.render_state_block(state, config, population.candidates))


def _stagnant(config: AdaEvolveConfig = CONFIG) -> pop.Population:
    """Returns two archived programs and a full window without a new global best."""
    population = population_of(cand(1, 0, 0.5), cand(2, 1, 0.7))
    state = replace(adaevolve.initial_state(config), window=(0, 0, 0), global_best=0.7, best_program_id=2,
                    iteration=5)
    return _with_state(population, state, config)


def _record(status: str = "rejected", metric: float | None = 0.6) -> statefile.IterationRecord:
    return statefile.IterationRecord(status=status, timestamp=datetime(2025, 1, 1, tzinfo=timezone.utc),
                                     change="tune: step", metric=metric, notes="n")


def test_first_decision_has_no_parent_and_seeds_every_island(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = pop.empty_population("AdaEvolve")
    decision = engine.decide(population, _context(population), random.Random(1))
    assert decision.parents == () and decision.island == 0 and decision.operator == "exploration"
    child = engine.candidate(decision, _record("accepted"), "x = 1\n", None, 1, "python")
    after, recorded = engine.record(population, child, decision, {"score": 0.6}, direction="higher", iteration=1,
                                    rng=random.Random(2))
    assert recorded.id == 1 and archive_status(recorded) == "admitted"
    copies = [c for c in after.candidates if c.id != 1]
    assert [(c.island, c.operator, c.parents) for c in copies] == [(1, "seed", (1,))]
    state = engine.state_of(after)
    assert state.iteration == 1 and state.best_program_id == 1 and state.global_best == 0.6
    assert engine.keep_inline(after, "higher")[-1] in {1, 2}


def test_decide_is_recomputable_and_with_parents_swaps_the_parent(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _stagnant()
    first = engine.decide(population, _context(population), random.Random(7))
    again = engine.decide(population, _context(population), random.Random(7))
    assert first == again and first.parents
    loaded = replace(first.parents[0], code="loaded\n")
    assert engine.with_parents(first, (loaded,)).parents == (loaded,)
    assert engine.framing_file(first) == "solution.md"


def test_refresh_asks_the_guide_only_when_the_search_stagnates(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    prompts: list[str] = []

    def guide(prompt: str) -> str:
        prompts.append(prompt)
        return GUIDE_REPLY

    fresh = _with_state(population_of(cand(1, 0, 0.5)), replace(adaevolve.initial_state(CONFIG), window=(0, 1, 0)))
    assert engine.refresh(fresh, guide) is None and prompts == []
    assert engine.refresh(_stagnant(), None) is None
    assert engine.refresh(_stagnant(), guide) == GUIDE_REPLY
    assert len(prompts) == 1 and "PARADIGM FRAMING: think in basins" in prompts[0]


def test_a_failing_guide_call_does_not_stop_the_iteration(tmp_path: Path) -> None:
    def broken(prompt: str) -> str:
        raise ConnectionError("no network")

    assert _engine(tmp_path).refresh(_stagnant(), broken) is None


def test_a_guide_model_misconfigured_stops_the_iteration(tmp_path: Path) -> None:
    # A 404 model, a refused key or an unreachable api-base is a setting, not bad luck: it reaches the runner.
    def misconfigured(prompt: str) -> str:
        raise ConfigurationError("model 'openai/meta': the server says the model does not exist")

    with pytest.raises(ConfigurationError, match="openai/meta"):
        _engine(tmp_path).refresh(_stagnant(), misconfigured)


def test_guide_ideas_are_applied_to_the_global_best_and_installed_when_recorded(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _stagnant()
    decision = engine.decide(population, _context(population), random.Random(3), guide_reply=GUIDE_REPLY)
    assert decision.guide_reply == GUIDE_REPLY
    assert decision.paradigm is not None and decision.paradigm.idea == "Basin hopping"
    assert decision.parents[0].id == 2 and "paradigm 1 is active" in decision.reason
    child = engine.candidate(decision, _record(), "y = 2\n", "basins", 6, "python")
    after, _ = engine.record(population, child, decision, {"score": 0.6}, direction="higher", iteration=6,
                             rng=random.Random(4))
    state = engine.state_of(after)
    assert [p.idea for p in state.paradigms] == ["Basin hopping", "Grid restarts"]
    assert [p.uses for p in state.paradigms] == [1, 0] and state.current_paradigm == 1
    assert "Basin hopping" in after.strategy_state


def test_a_reply_without_ideas_marks_the_guide_call_failed(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _stagnant()
    decision = engine.decide(population, _context(population), random.Random(3), guide_reply="no JSON here")
    assert decision.paradigm is None
    child = engine.candidate(decision, _record(), "z = 3\n", None, 6, "python")
    after, _ = engine.record(population, child, decision, {"score": 0.6}, direction="higher", iteration=6,
                             rng=random.Random(4))
    assert engine.state_of(after).guide_failed_at == 6


def test_a_failed_evaluation_is_kept_with_null_fitness_and_not_admitted(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _stagnant()
    decision = engine.decide(population, _context(population), random.Random(5))
    child = engine.candidate(decision, _record("error", None), "broken(\n", None, 6, "python")
    assert child.fitness is None
    after, recorded = engine.record(population, child, decision, {"error": "boom"}, direction="higher", iteration=6,
                                    rng=random.Random(6))
    assert recorded.id == 3 and recorded.fitness is None and archive_status(recorded) == "rejected"
    before, now = engine.state_of(population), engine.state_of(after)
    assert now.islands == before.islands and now.global_best == before.global_best and now.iteration == 6


def test_keep_inline_lists_archive_members_worst_first(tmp_path: Path) -> None:
    population = population_of(cand(1, 0, 0.5), cand(2, 1, 0.9), cand(3, 0, 0.7), cand(4, 0, 0.95, "rejected"))
    assert _engine(tmp_path).keep_inline(population, "higher") == [1, 3, 2]


def test_decision_exposes_what_the_runner_reads(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _stagnant()
    decision = engine.decide(population, _context(population), random.Random(9))
    assert isinstance(decision, AdaEvolveDecision)
    assert decision.operator in adaevolve.MODES and decision.island == 0 and decision.reason.startswith("island 0")


@pytest.mark.parametrize("direction", ["higher", "lower"])
def test_record_round_trips_the_state_block(tmp_path: Path, direction: str) -> None:
    config = replace(CONFIG, direction=direction)
    engine = _engine(tmp_path, config)
    population = _stagnant(config)
    decision = engine.decide(population, _context(population), random.Random(11))
    child = engine.candidate(decision, _record(), "w = 4\n", None, 6, "python")
    after, _ = engine.record(population, child, decision, {"score": 0.6}, direction=direction, iteration=6,
                             rng=random.Random(12))
    state = engine.state_of(after)
    assert adaevolve.render_state_block(state, config, after.candidates) == after.strategy_state


def _with_idea(uses: int = 0) -> pop.Population:
    """Returns the stagnant population with one installed idea that has `uses` uses."""
    population = _stagnant()
    idea = adaevolve.parse_paradigms(GUIDE_REPLY)[0]
    state = adaevolve.parse_state_block(population.strategy_state, "fm.md", 0, CONFIG)
    return _with_state(population, replace(state, paradigms=(replace(idea, uses=uses),)))


def test_retry_keeps_island_mode_and_parent_and_shows_the_error(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _stagnant()
    first = engine.decide(population, _context(population), random.Random(7))
    second = engine.retry(first, "evaluation failed: NameError: x")
    assert second is not None and second.attempt == 2
    assert (second.island, second.operator, second.parents) == (first.island, first.operator, first.parents)
    assert second.previous_error == "evaluation failed: NameError: x"
    third = engine.retry(second, "evaluation failed: SyntaxError")
    assert third is not None and third.attempt == 3 == CONFIG.attempts
    assert engine.retry(third, "again") is None


def test_no_retry_when_error_retry_is_off(tmp_path: Path) -> None:
    engine = _engine(tmp_path, replace(CONFIG, enable_error_retry=False))
    population = _stagnant()
    decision = engine.decide(population, _context(population), random.Random(7))
    assert engine.retry(decision, "boom") is None


def test_advance_ends_the_iteration_without_an_entry(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _stagnant()
    decision = engine.decide(population, _context(population), random.Random(7))
    after = engine.advance(population, decision, iteration=6)
    before, now = engine.state_of(population), engine.state_of(after)
    assert [c.id for c in after.candidates] == [c.id for c in population.candidates]
    # Nothing was evaluated, so the islands learn nothing; the iteration still ends and its draws count.
    assert now.islands == before.islands and now.window == before.window and now.global_best == before.global_best
    assert now.iteration == 6 and now.rng_draws >= before.rng_draws + len(decision.uniforms)


def test_every_attempt_uses_the_active_paradigm(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _with_idea()
    decision = engine.decide(population, _context(population), random.Random(7))
    assert decision.paradigm_index == 0
    retried = engine.retry(decision, "boom")
    assert retried is not None
    once = engine.state_of(engine.advance(population, decision, iteration=6))
    twice = engine.state_of(engine.advance(population, retried, iteration=6))
    assert once.paradigms[0].uses == 1 and twice.paradigms[0].uses == 2
    # A third attempt finds the idea used up (max 2 uses) and books no further use.
    third = engine.retry(retried, "boom")
    assert third is not None and engine.state_of(engine.advance(population, third, iteration=6)).paradigms[0].uses == 2


def test_record_books_the_attempts_of_a_retried_iteration(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _with_idea()
    decision = engine.retry(engine.decide(population, _context(population), random.Random(7)), "boom")
    assert decision is not None
    child = engine.candidate(decision, _record(), "v = 5\n", None, 6, "python")
    after, _ = engine.record(population, child, decision, {"score": 0.6}, direction="higher", iteration=6,
                             rng=random.Random(8))
    assert engine.state_of(after).paradigms[0].uses == 2


def test_guide_wanted_says_why_only_when_the_search_stagnates(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    reason = engine.guide_wanted(_stagnant())
    assert reason is not None and "found 0 new global best(s)" in reason and "threshold 0.12" in reason
    assert engine.guide_wanted(_with_idea()) is None
    fresh = _with_state(population_of(cand(1, 0, 0.5)), replace(adaevolve.initial_state(CONFIG), window=(0, 1, 0)))
    assert engine.guide_wanted(fresh) is None


def test_a_broken_state_row_is_reported_at_its_line_in_the_state_file(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    fresh = statefile.new_state("fm", "Find the minimum.", "score", "higher", None)
    text = statefile.render_state(statefile.with_section(fresh, statefile.POPULATION, pop.render_population(_stagnant())))
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("| 1 | balanced | "))
    lines[at] = re.sub(r"^(\| 1 \| balanced \| )[^|]+", r"\1lots ", lines[at])
    state = statefile.parse_state("\n".join(lines) + "\n", "fm.md")
    runner = StrategyRunner(None, engine, "code/search.py")  # type: ignore[arg-type]
    with pytest.raises(StateError) as caught:
        strategy.decide(runner, state, None, 6, "higher", random.Random(1), lambda path: None)
    assert (str(caught.value.path), caught.value.line) == ("fm.md", at + 1)
    assert "island 1's G 'lots' is not a number >= 0" in caught.value.message
    with pytest.raises(StateError) as again:
        strategy.guide_wanted(runner, state)
    assert again.value.line == at + 1


@pytest.mark.parametrize("iteration", [1, 4])
def test_an_empty_population_is_seeded_with_the_evaluated_target(tmp_path: Path, iteration: int) -> None:
    # Iteration 1: a fresh program whose baseline was just measured; 4: a strategy added to a program that ran.
    engine = _engine(tmp_path)
    empty = pop.empty_population("AdaEvolve")
    known = replace(_context(empty), best_metric=0.6, iteration=iteration)
    decision = engine.decide(empty, known, random.Random(1))
    assert decision.as_is and decision.parents == () and decision.operator == "seed"
    assert decision.reason.startswith("the Population is empty: the Target as it is")
    child = engine.candidate(decision, _record(metric=0.6), "x = 1\n", "the unchanged Target", iteration, "python")
    population, seeded = engine.record(empty, child, decision, {"score": 0.6}, direction="higher",
                                       iteration=iteration, rng=random.Random(1))
    assert seeded.fitness == 0.6 and archive_status(seeded) == "admitted" and seeded.operator == "seed"
    assert {c.island for c in population.candidates} == set(range(CONFIG.num_islands))
    state = engine.state_of(population)
    assert state.best_program_id == seeded.id and state.global_best == 0.6
    # The next decision's parent is the Target (or a copy of it), whatever the island.
    after = engine.decide(population, replace(known, population=population.candidates, iteration=iteration + 1),
                          random.Random(2))
    assert not after.as_is and after.parents and after.parents[0].code == "x = 1\n"
    # Without an evaluated Target (no best known) nothing is seeded.
    assert not engine.decide(empty, _context(empty), random.Random(1)).as_is


def test_the_guide_prompt_carries_the_problem_framing_and_the_settings_notes(tmp_path: Path) -> None:
    (tmp_path / "paradigm.md").write_text("PARADIGM FRAMING\n", encoding="utf-8")
    engine = AdaEvolveEngine(CONFIG, _program(), tmp_path, "fm.md", "FRAMING: minimise f.",
                             ("NOTE: evaluations take a second",))
    prompts: list[str] = []
    engine.refresh(_stagnant(), lambda prompt: prompts.append(prompt) or "[]")
    assert len(prompts) == 1
    assert "## Problem framing\n\nFRAMING: minimise f.\n" in prompts[0]
    assert "- NOTE: evaluations take a second\n" in prompts[0]


def test_a_slot_without_a_barrier_keeps_off_the_islands_the_slots_in_flight_work(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _stagnant()  # two islands, island 0 current
    free = engine.decide(population, replace(_context(population), slot=Slot(0, 2, launch=4)), random.Random(1))
    assert engine.island(free) == 0  # nothing in flight: the bandit's current island, as in a tick
    clear = replace(_context(population), slot=Slot(0, 2, launch=4, busy=(0,)))
    assert engine.island(engine.decide(population, clear, random.Random(1))) == 1
    every = replace(_context(population), slot=Slot(1, 2, launch=5, busy=(0, 1)))
    assert engine.island(engine.decide(population, every, random.Random(1))) in (0, 1)  # all taken: a new round
    assert strategy.island_of(None, free) is None
