"""Tests for EvoX's Pareto objectives: genomes carry their objective values and front, `pareto_front()`, the
initial strategy's front-restricted parent (as the reference's multi-objective sample), and the prompt."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autoloop_py.errors import ProgramError
from autoloop_py.program.playbook import Playbook
from autoloop_py.strategies.evox.config import parse_evox_config
from autoloop_py.strategies import runner
from autoloop_py.strategies.evox.engine import build
from autoloop_py.strategies.pareto import in_force

from autoloop_py.program.objectives import Objective
from autoloop_py.state.population import Candidate
from autoloop_py.strategies.evox import strategy as evox
from autoloop_py.strategies.evox.contract import Genome
from autoloop_py.state.population import empty_population
from autoloop_py.strategies.pareto import prompt_section, with_fronts, with_objectives
from tests.strategies.evox.test_evox_contract import load_initial
from tests.strategies.evox.test_evox_engine import _program

OBJECTIVES = (Objective("accuracy", "higher"), Objective("latency", "lower"))


def entry(id: int, accuracy: float, latency: float) -> Candidate:
    base = Candidate(id=id, island=None, fitness=accuracy, gen=id, operator="refine", status="accepted",
                     approach=f"entry {id}", code=f"x = {id}\n")
    return with_objectives(base, {"accuracy": accuracy, "latency": latency}, OBJECTIVES)


def test_genomes_carry_objective_values_and_the_front() -> None:
    # The reference's case: p1 (.95, 90) and p2 (.90, 10) are the front; p3 (.80, 120) is dominated by both.
    population = (entry(1, 0.95, 90.0), entry(2, 0.90, 10.0), entry(3, 0.80, 120.0))
    genomes = evox.genomes_of(population, "higher", OBJECTIVES)
    assert [dict(g.metrics) for g in genomes] == [
        {"score": 0.95, "accuracy": 0.95, "latency": 90.0, "front": 0.0},
        {"score": 0.9, "accuracy": 0.9, "latency": 10.0, "front": 0.0},
        {"score": 0.8, "accuracy": 0.8, "latency": 120.0, "front": 1.0},
    ]
    assert [dict(g.metrics) for g in evox.genomes_of(population, "higher")] == [
        {"score": 0.95}, {"score": 0.9}, {"score": 0.8}]


def test_the_initial_strategy_samples_its_parent_from_the_front() -> None:
    # As skydiscover's test_sample_prefers_pareto_parent: a dominated program is never the parent. The front is
    # #1 (.95, 90), #2 (.90, 10) and #3 (.60, 1); #4 (.94, 95) is dominated by #1. Without objectives the top
    # quartile is #1 alone; with them the tournament of 2 draws from the front, so #2 wins when drawn with #3.
    # (One sample in five diverges from a neglected program instead; those may be anyone.)
    population = (entry(1, 0.95, 90.0), entry(2, 0.90, 10.0), entry(3, 0.60, 1.0), entry(4, 0.94, 95.0))
    strategy = load_initial()(seed=7)
    for genome in evox.genomes_of(population, "higher", OBJECTIVES):
        strategy.add(genome)
    assert [g.id for g in strategy.pareto_front()] == [1, 2, 3]
    refined = set()
    for _ in range(40):
        parent, _context = strategy.sample(1)
        (label, chosen), = parent.items()
        if label == strategy.REFINE_LABEL:
            refined.add(chosen.id)
    assert refined == {1, 2}


def test_without_objectives_the_front_is_empty_and_sampling_is_unchanged() -> None:
    strategy = load_initial()(seed=7)
    for genome in (Genome(1, "a", {"score": 0.5}, None, 1), Genome(2, "b", {"score": 0.9}, None, 2)):
        strategy.add(genome)
    assert strategy.pareto_front() == []
    assert next(iter(strategy.sample(1)[0].values())).id == 2


def test_the_prompt_names_the_trade_off_and_the_parents_values_and_front() -> None:
    population = with_fronts(replace(empty_population("EvoX"), candidates=(entry(2, 0.9, 10.0), entry(1, 0.95, 90.0))),
                             OBJECTIVES)
    parent = population.candidates[0]
    text = prompt_section(OBJECTIVES, parent)
    assert text.startswith("Pareto trade-offs: the search keeps every program that no other program beats")
    assert "- `accuracy`: higher is better (the parent: 0.9)\n" in text
    assert "- `latency`: lower is better (the parent: 10)\n" in text
    assert "The parent is on front 0" in text
    assert prompt_section((), parent) == ""


def test_the_playbook_may_name_the_objectives_with_directions() -> None:
    folder = Path(".autoloop/programs/p")
    book = Playbook("evox", folder / "strategy/evox.md", "# EvoX\n", folder)
    config = parse_evox_config(book, {"pareto_objectives": "[accuracy, latency]", "higher_is_better": {"latency": False}})
    assert (config.pareto_objectives, config.higher_is_better) == (("accuracy", "latency"), (("latency", False),))
    where = (book.path, None)
    assert in_force(config.pareto_objectives, dict(config.higher_is_better), (), where) == OBJECTIVES
    assert in_force((), {}, OBJECTIVES, where) == OBJECTIVES
    with pytest.raises(ProgramError, match="`pareto_objectives` names `latency`, which the frontmatter's"):
        in_force(config.pareto_objectives, {}, (Objective("accuracy", "higher"),), where)
    with pytest.raises(ProgramError, match="`higher_is_better` must be a mapping of metric names to true/false"):
        parse_evox_config(book, {"higher_is_better": "latency"})


def test_objectives_the_playbook_names_are_the_ones_the_runner_records(tmp_path: Path) -> None:
    text = ("| Setting | Value | What |\n|---|---|---|\n| `pareto_objectives` | accuracy, latency | x |\n"
            "| `higher_is_better` | — | y |\n")
    playbook = Playbook("evox", tmp_path / "strategy/evox.md", text, tmp_path)
    engine = build(_program(tmp_path), playbook, tmp_path)
    assert engine.objectives == engine.config.objectives == (Objective("accuracy", "higher"), Objective("latency", "higher"))
    assert runner.objectives_of(runner.StrategyRunner(playbook, engine, "code/search.py"), engine.program) == \
        engine.objectives
