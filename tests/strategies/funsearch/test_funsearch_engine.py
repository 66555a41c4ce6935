"""Tests for strategies/funsearch_engine.py: FunSearch's decisions, prompt and bookkeeping as the runner sees them."""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.regions import place_code
from autoloop_py.program.target import Target
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.strategies.base import StrategyContext
from autoloop_py.strategies.engine import PromptInputs
from autoloop_py.strategies.funsearch.config import FunSearchConfig
from autoloop_py.strategies.funsearch.engine import FunSearchEngine, FunSearchStep, code_hash
from autoloop_py.strategies.prompt import steering_of

PRIMARY = "code/search.py"
CONFIG = FunSearchConfig("solve", num_islands=3, reset_every_registrations=100)
TARGET = (
    "import math\n\n# EVOLVE-BLOCK-START\nscale = 2\n\n\ndef solve(x):\n"
    '    """Returns the answer."""\n    return x * scale\n# EVOLVE-BLOCK-END\n'
)


def program() -> Program:
    """Returns a program whose metric is `score`, higher better."""
    return Program(
        name="toy", path=Path(".autoloop/programs/toy/program.md"), directory=Path(".autoloop/programs/toy"),
        goal="Make solve better.", target=Target((PRIMARY,)),
        evaluation=Evaluation("python code/evaluate.py", "score", 30), strategy_text="",
        config=ProgramConfig(), unconfigured=False, text="",
    )


def engine(config: FunSearchConfig = CONFIG) -> FunSearchEngine:
    return FunSearchEngine(config, PRIMARY, "toy.md", seed=7)


def code(factor: int) -> str:
    """Returns an evolved block whose solve multiplies by factor."""
    return f'scale = 2\n\n\ndef solve(x):\n    """Returns the answer."""\n    return x * {factor}\n'


def context(population: pop.Population) -> StrategyContext:
    return StrategyContext(population.candidates, (), None, 1, "higher", population.next_id)


def decide(e: FunSearchEngine, population: pop.Population, seed: int = 1) -> FunSearchStep:
    return e.decide(population, context(population), random.Random(seed))


def evaluated(e: FunSearchEngine, step: FunSearchStep, factor: int, metric: float | None, gen: int) -> pop.Candidate:
    status = "error" if metric is None else "rejected"
    record = statefile.IterationRecord(status, datetime(2025, 1, 1, tzinfo=timezone.utc), f"x{factor}", metric)
    return e.candidate(step, record, code(factor), None, gen, "python")


def add(
    e: FunSearchEngine, population: pop.Population, factor: int, metrics: Mapping[str, Any], gen: int = 1
) -> tuple[pop.Population, pop.Candidate]:
    """Decides, evaluates code(factor) with metrics and records it."""
    step = decide(e, population, gen)
    candidate = evaluated(e, step, factor, metrics.get("score"), gen)
    return e.record(population, candidate, step, metrics, direction="higher", iteration=gen, rng=random.Random(gen))


def metrics(score: float, output_hash: str) -> dict[str, Any]:
    return {"score": score, "scores": {"a": score, "b": score / 2}, "output_hash": output_hash}


def seeded() -> tuple[FunSearchEngine, pop.Population, pop.Candidate]:
    e = engine()
    population, seed = add(e, pop.empty_population(), 1, metrics(0.5, "h1"))
    return e, population, seed


def test_the_first_decision_is_the_seed_and_has_no_parent() -> None:
    step = decide(engine(), pop.empty_population())
    assert (step.operator, step.parents, step.island) == ("seed", (), None)


def test_the_seed_founds_every_island_with_its_bullets() -> None:
    e, population, seed = seeded()
    state = e.state_of(population)
    assert seed.id == 1 and population.next_id == 2
    assert [i.best_id for i in state.islands] == [1, 1, 1]
    extra = dict(population.candidates[0].extra)
    assert extra["Disposition"] == "stored" and extra["Signature"] == "(0.5, 0.25)"
    assert extra["Output hash"] == "h1" and extra["Code hash"] == code_hash(code(1))
    # The entry's fitness is the reduced score: with `last`, the last test's (b).
    assert population.candidates[0].fitness == 0.25 and population.candidates[0].operator == "seed"
    assert state.rng_seed == 7 and "FunSearch" in population.intro


def test_the_state_block_survives_the_state_file() -> None:
    e, population, _ = seeded()
    reread = pop.parse_population(pop.render_population(population), "toy.md", 0)
    assert e.state_of(reread) == e.state_of(population)
    assert reread.candidates[0].extra == population.candidates[0].extra


def test_a_sample_decision_is_recomputable_and_names_its_island() -> None:
    e, population, _ = seeded()
    first, second = decide(e, population, 5), decide(e, population, 5)
    assert first == second
    assert first.operator == "sample" and first.island in (0, 1, 2)
    assert [p.id for p in first.parents] == [1]


def test_parents_are_best_first() -> None:
    e, population, _ = seeded()
    for factor, score in ((2, 0.9), (3, 0.1)):
        decided = decide(e, population)
        step = dataclasses.replace(decided, inner=dataclasses.replace(decided.inner, island=0))
        candidate = evaluated(e, step, factor, score, factor)
        population, _ = e.record(
            population, candidate, step, metrics(score, f"h{factor}"), direction="higher", iteration=factor,
            rng=random.Random(factor),
        )
    for seed in range(20):
        step = decide(e, population, seed)
        scores = [p.fitness or 0.0 for p in step.parents]
        assert scores == sorted(scores, reverse=True)
        assert [p.id for p in step.inner.parents] == [p.id for p in reversed(step.parents)]


def test_with_parents_replaces_the_shown_versions_by_id() -> None:
    e, population, _ = seeded()
    step = decide(e, population)
    loaded = dataclasses.replace(step.parents[0], code=code(9))
    replaced = e.with_parents(step, (loaded,))
    assert replaced.parents[0].code == code(9) and replaced.inner.picks[0].candidate.code == code(9)


def test_the_prompt_shows_versions_and_asks_for_the_target_in_the_standard_format() -> None:
    e, population, _ = seeded()
    step = e.with_parents(decide(e, population), tuple(decide(e, population).parents))
    files = {PRIMARY: place_code(TARGET, step.parents[0].code or "")}
    state = statefile.new_state("toy", "goal", "score", "higher", None)
    steering = steering_of(state, ("try a larger scale",))
    text = e.prompt(step, PromptInputs(program(), files, "## Problem\n\nSpec.\n", 0.5, steering, population))
    assert "def solve_v0(x):" in text and 'def solve_v1(x):\n    """Improved version of `solve_v0`."""' in text
    assert text.count("## How to reply") == 1 and "Spec." in text
    assert f"Write the path `{PRIMARY}` on its own line" in text and "SUMMARY:" in text
    assert "Steering from people" in text and "```text\ntry a larger scale\n```" in text


def test_the_seed_prompt_shows_the_targets_function() -> None:
    e = engine()
    step = decide(e, pop.empty_population())
    state = statefile.new_state("toy", "goal", "score", "higher", None)
    inputs = PromptInputs(program(), {PRIMARY: TARGET}, "", None, steering_of(state, ()), pop.empty_population())
    text = e.prompt(step, inputs)
    assert "the function as it is in the Target now" in text and "def solve_v0(x):" in text
    assert "Steering from people" not in text


def test_a_repeated_output_hash_on_the_island_is_a_duplicate_not_a_member() -> None:
    e, population, _ = seeded()
    population, twin = add(e, population, 4, metrics(0.7, "h1"), gen=2)
    state = e.state_of(population)
    assert dict(population.candidates[0].extra)["Disposition"] == "duplicate"
    assert state.duplicates == 1 and state.stored == 1
    assert all(m.id != twin.id for i in state.islands for c in i.clusters for m in c.members)


def test_a_failed_evaluation_is_recorded_as_failed() -> None:
    e, population, _ = seeded()
    population, failed = add(e, population, 5, {}, gen=2)
    assert failed.fitness is None and dict(failed.extra)["Disposition"] == "failed"
    assert e.state_of(population).execution_failed == 1


def test_duplicate_of_finds_code_already_evaluated_even_when_folded() -> None:
    e, population, seed = seeded()
    folded = pop.fold_code(population, lambda c: False, lambda c: f"candidates/toy/{c.id}.py")
    assert folded.candidates[0].code is None
    found = e.duplicate_of(folded, code(1) + "\n")
    assert found is not None and found.id == seed.id
    assert e.duplicate_of(folded, code(2)) is None


def test_keep_inline_ranks_cluster_members_best_last() -> None:
    e, population, _ = seeded()
    population, better = add(e, population, 6, metrics(0.9, "h6"), gen=2)
    population, worse = add(e, population, 7, metrics(0.1, "h7"), gen=3)
    assert e.keep_inline(population, "higher")[-1] == better.id
    assert e.keep_inline(population, "higher")[0] == worse.id


def test_only_the_seed_is_evaluated_as_is() -> None:
    e, population, _ = seeded()
    assert decide(e, pop.empty_population()).as_is
    assert not decide(e, population).as_is


def test_past_max_population_entries_outside_clusters_leave_first_then_the_weakest_members() -> None:
    e = engine(dataclasses.replace(CONFIG, max_population=3))
    population, seed = add(e, pop.empty_population(), 1, metrics(0.5, "h1"))
    population, twin = add(e, population, 2, metrics(0.7, "h1"), gen=2)  # the seed's hash: a duplicate
    population, failed = add(e, population, 3, {}, gen=3)
    population, strong = add(e, population, 4, metrics(0.9, "h4"), gen=4)
    assert [c.id for c in population.candidates] == [strong.id, twin.id, seed.id] and e.state_of(population).evicted == 1
    population, weak = add(e, population, 5, metrics(0.1, "h5"), gen=5)
    assert [c.id for c in population.candidates] == [weak.id, strong.id, seed.id]
    population, newest = add(e, population, 6, metrics(0.06, "h6"), gen=6)
    state = e.state_of(population)
    # Every island's best (the seed, and `strong` on its island) and the newest entry stay; `weak` goes.
    assert [c.id for c in population.candidates] == [newest.id, strong.id, seed.id]
    assert state.evicted == 3 and population.next_id == newest.id + 1
    members = {m.id for i in state.islands for c in i.clusters for m in c.members}
    assert members == {seed.id, strong.id, newest.id} and all(c.members for i in state.islands for c in i.clusters)
    assert state.stored + state.duplicates + state.execution_failed == len(population.candidates) + state.evicted
    reread = pop.parse_population(pop.render_population(population), "toy.md", 0)
    assert e.state_of(reread) == state and reread.next_id == population.next_id
