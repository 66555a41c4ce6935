"""AlphaEvolve as an Engine: the decision engine, its prompt, the MAP-Elites cell and the capped Population."""

from __future__ import annotations

import dataclasses
import logging
import random
from pathlib import Path
from typing import Any, Mapping

from autoloop_py.program.model import Program
from autoloop_py.program.playbook import Playbook, load_config_yaml
from autoloop_py.program.playbook_notes import problem_framing
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.strategies.alphaevolve import prompt as alphaevolve_prompt
from autoloop_py.strategies.alphaevolve import features
from autoloop_py.strategies.alphaevolve import strategy as alphaevolve
from autoloop_py.strategies.alphaevolve.config import AlphaEvolveConfig, parse_alphaevolve_config
from autoloop_py.strategies.base import Decision, StrategyContext
from autoloop_py.strategies.engine import PromptInputs, entry_for

log = logging.getLogger(__name__)


class AlphaEvolveEngine:
    """The runner's view of AlphaEvolve."""

    name = "alphaevolve"
    # Each parent's block shows what its evaluation said (OpenEvolve's "Last Execution Output" of a program).
    evaluator_feedback = "slot"

    def __init__(self, config: AlphaEvolveConfig, problem: str = "") -> None:
        self.config = config
        self.problem = problem
        self._engine = alphaevolve.AlphaEvolve(config)

    def decide(self, population: pop.Population, context: StrategyContext, rng: random.Random) -> Decision:
        """Returns the operator, parents and island (strategies.md §1.2)."""
        return self._engine.decide(context, rng)

    def with_parents(self, decision: Decision, parents: tuple[pop.Candidate, ...]) -> Decision:
        """Returns the decision with parents replaced."""
        return dataclasses.replace(decision, parents=parents)

    def framing_file(self, decision: Decision) -> str:
        """Returns mutation.md or crossover.md."""
        return alphaevolve_prompt.framing_file(decision.operator)

    def prompt(self, decision: Decision, inputs: PromptInputs) -> str:
        """Returns the AlphaEvolve prompt."""
        return alphaevolve_prompt.render_prompt(
            decision,
            self.config,
            program=inputs.program,
            files=inputs.files,
            framing=inputs.framing,
            best_metric=inputs.best,
            direction=inputs.program.direction,
            steering=inputs.steering,
            problem=self.problem,
            feedback=inputs.feedback,
            parent_feedback=inputs.parent_feedback,
        )

    def candidate(
        self, decision: Decision, record: statefile.IterationRecord, code: str, approach: str | None, iteration: int,
        language: str,
    ) -> pop.Candidate:
        """Returns the seed schema's entry with the island and feature cell."""
        island = alphaevolve.find_island(self.config, decision.island)
        cell = alphaevolve.cell_for(island, code, self.config)
        return entry_for(decision, record, code, approach, iteration, language, cell)

    def record(
        self,
        population: pop.Population,
        candidate: pop.Candidate,
        decision: Decision,
        metrics: Mapping[str, Any],
        *,
        direction: str,
        iteration: int,
        rng: random.Random,
    ) -> tuple[pop.Population, pop.Candidate]:
        """Appends the candidate in its feature cell and evicts past the cap (never a cell's best nor an elite).

        A metric dimension's bin comes from the evaluation's metrics and the running range, which the
        Population's Strategy State block keeps.
        """
        ranges = features.updated_ranges(features.parse_ranges(population.strategy_state), self.config.dimensions,
                                         metrics)
        for dimension in self.config.dimensions:
            if dimension.kind == features.METRIC and features.metric_value(metrics, dimension.name) is None:
                log.warning("the feature dimension `%s` is no numeric metric of this evaluation (it printed %s); "
                            "the cell says n/a: name a metric the evaluator prints", dimension.name,
                            ", ".join(sorted(metrics)) or "none")
        island = alphaevolve.find_island(self.config, candidate.island)
        cell = alphaevolve.cell_for(island, candidate.code or "", self.config, metrics, ranges)
        candidate = dataclasses.replace(candidate, id=population.next_id, cell=cell)
        population = pop.add_candidate(population, candidate)
        if ranges:
            population = pop.with_strategy_state(population, features.render_ranges(ranges))
        population, evicted = pop.evict(population, self.config.population_size, self.config.archive_size, direction)
        if evicted:
            log.info("evicted candidate(s) %s", ", ".join(str(c.id) for c in evicted))
        return population, candidate

    def keep_inline(self, population: pop.Population, direction: str) -> list[int]:
        """Returns the elite archive, worst first."""
        elites = pop.elites(population.candidates, self.config.archive_size, direction)
        ranked = sorted(elites, key=lambda c: (pop.oriented(c.fitness, direction) or float("-inf"), c.id))
        return [c.id for c in ranked]


def build(program: Program, playbook: Playbook, root: Path) -> AlphaEvolveEngine:
    """Returns the AlphaEvolve engine configured by the program's playbook and config.yaml."""
    config = parse_alphaevolve_config(playbook, load_config_yaml(program, root))
    return AlphaEvolveEngine(config, problem_framing(playbook.text))
