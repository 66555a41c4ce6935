"""AdaEvolve as an Engine: island decisions, the solution prompt, admission and the end-of-iteration step.

The guide-LLM paradigm call is the one effect: the runner calls `refresh` before `decide` with a guide
callable (or None without an LLM); the reply text travels in the decision, so that `decide` stays pure
and `record` can install the same ideas on the freshest state it is given.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from pathlib import Path
from typing import Any, Mapping

from autoloop_py.program.model import Program
from autoloop_py.program.playbook import Playbook, load_config_yaml
from autoloop_py.program.playbook_notes import labelled_line, opening_paragraph, problem_framing
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.strategies.adaevolve import prompt as adaevolve_prompt
from autoloop_py.strategies.adaevolve import slots
from autoloop_py.strategies.adaevolve import strategy as adaevolve
from autoloop_py.strategies.adaevolve.archive import archive_of, ranked
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig, parse_adaevolve_config
from autoloop_py.strategies.adaevolve.paradigms import GuideReplyError
from autoloop_py.strategies.adaevolve.state import AdaEvolveState, Paradigm
from autoloop_py.strategies.adaevolve.strategy import AdaEvolveDecision
from autoloop_py.strategies.base import StrategyContext, seeds_from_target
from autoloop_py.strategies.engine import Guide, PromptInputs, SolutionEngine, ask_guide, entry_for

log = logging.getLogger(__name__)

SEED_MODE = "seed"
SEED_REASON = ("the Population is empty: the Target as it is (its evaluation as the baseline or the branch's best) "
               "seeds island 0 and is copied to the other islands, so the first candidate starts from it")
PARADIGM_FRAMING = "paradigm.md"


class AdaEvolveEngine(SolutionEngine):
    """The runner's view of AdaEvolve (its iteration makes at most config.attempts attempts)."""

    name = "adaevolve"
    # The solution prompt has its own "Evaluator feedback" slot (strategies.md: evaluator feedback after the context).
    evaluator_feedback = "slot"
    # Novelty, admission and migration compare the code of every archive member, folded or not.
    needs_all_code = True

    config: AdaEvolveConfig

    def state_of(self, population: pop.Population) -> AdaEvolveState:
        """Returns the strategy state the Population's `### ⚙️ Strategy State` block holds."""
        return adaevolve.parse_state_block(population.strategy_state, self.state_path, 0, self.config)

    def refresh(self, population: pop.Population, guide: Guide | None) -> str | None:
        """Returns the guide's reply when the search stagnates and a guide is given (None: no call made)."""
        state = self.state_of(population)
        if guide is None or not adaevolve.wants_paradigms(state, self.config):
            return None
        everyone = archive_of(population.candidates, None, self.config.direction)
        best = adaevolve.global_best(state, everyone) if everyone else None
        prompt = adaevolve_prompt.render_guide_prompt(
            self.config, program=self.program, best=best, tried=state.tried, framing=self._framing(PARADIGM_FRAMING),
            problem=self.problem, notes=self.notes,
        )
        reply = ask_guide(guide, prompt)
        if isinstance(reply, Exception):
            log.warning("adaevolve: the guide call failed (%s); no paradigm this iteration", reply)
            return None
        log.info("adaevolve: the search stagnates; asked the guide for %d ideas", self.config.paradigm_num_to_generate)
        return reply

    def guide_wanted(self, population: pop.Population) -> str | None:
        """Returns why the next iteration asks the guide for paradigms (None when it does not)."""
        state = self.state_of(population)
        if not adaevolve.wants_paradigms(state, self.config):
            return None
        found, size = sum(state.window), len(state.window)
        return (f"the last {size} iterations found {found} new global best(s), a rate of {found / size:.2f}, below "
                f"paradigm_improvement_threshold {self.config.paradigm_improvement_threshold:g}, and no paradigm "
                "is active")

    def decide(
        self, population: pop.Population, context: StrategyContext, rng: random.Random, guide_reply: str | None = None
    ) -> AdaEvolveDecision:
        """Returns the attempt's island, mode, parent and context, after installing the guide's ideas."""
        state = self._installed(self.state_of(population), guide_reply)
        slot = context.slot
        if slot is not None and slot.parallel and state.islands:
            first = context.iteration - slot.index
            sources = slots.pick_sources(self.program.config.seed, self.program.name, first, slot.count)
            island = slots.slot_islands(state, slot, first, self.config, sources)[-1]
            if island in slot.busy:  # without a barrier the slots in flight started from older states
                island = slots.pick_free(state, set(slot.busy), context.iteration, self.config,
                                         slots.away_source(self.program.config.seed, self.program.name,
                                                           context.iteration, slot))
            state = dataclasses.replace(state, current_island=island)
        decision = dataclasses.replace(adaevolve.decide(state, population.candidates, self.config, rng),
                                       guide_reply=guide_reply)
        if seeds_from_target(context):
            return dataclasses.replace(decision, mode=SEED_MODE, reason=SEED_REASON, as_is=True)
        return decision

    def island(self, decision: AdaEvolveDecision) -> int:
        """Returns the island the decision works (a run without a barrier keeps its next slots off it)."""
        return decision.island

    def prompt(self, decision: AdaEvolveDecision, inputs: PromptInputs) -> str:
        """Returns the AdaEvolve solution prompt."""
        return adaevolve_prompt.render_prompt(
            decision, self.config, program=inputs.program, files=inputs.files, framing=inputs.framing,
            best_metric=inputs.best, steering=inputs.steering, problem=self.problem,
            feedback="\n\n".join(inputs.feedback),
        )

    def candidate(
        self, decision: AdaEvolveDecision, record: statefile.IterationRecord, code: str, approach: str | None,
        iteration: int, language: str,
    ) -> pop.Candidate:
        """Returns the Population entry of an evaluated candidate (archive bullets are added when recorded)."""
        return entry_for(decision, record, code, approach, iteration, language)

    def record(
        self,
        population: pop.Population,
        candidate: pop.Candidate,
        decision: AdaEvolveDecision,
        metrics: Mapping[str, Any],
        *,
        direction: str,
        iteration: int,
        rng: random.Random,
    ) -> tuple[pop.Population, pop.Candidate]:
        """Returns the Population after admission and the end of iteration (spawn, next island, migration)."""
        state = self._installed(self.state_of(population), decision.guide_reply)
        child_id = max(candidate.id, population.next_id)
        step = adaevolve.record(state, decision, candidate, metrics, population, self.config, decision.attempt)
        step = adaevolve.end_iteration(step.state, step.population, self.config, rng, iteration)
        child = next(c for c in step.population.candidates if c.id == child_id)
        return step.population, child

    def advance(self, population: pop.Population, decision: AdaEvolveDecision, *, iteration: int) -> pop.Population:
        """Returns the Population after an iteration without a candidate: paradigm uses, then the end of iteration.

        A proposal that failed or was rejected before evaluation teaches the archive nothing, but the attempts
        still use the paradigm and the iteration still ends (spawn, next island, migration), as §2.2 has it.
        """
        state = self._installed(self.state_of(population), decision.guide_reply)
        # Seeded as the runner seeds `record`'s draws, so an iteration ends alike with or without a candidate.
        rng = random.Random(f"{self.program.config.seed}:{self.program.name}:{iteration}:record")
        step = adaevolve.advance(state, decision, population, self.config, rng, iteration, decision.attempt)
        return step.population

    def keep_inline(self, population: pop.Population, direction: str) -> list[int]:
        """Returns the islands' archive members, worst first: novelty and admission need their code."""
        members = ranked(archive_of(population.candidates, None, direction))
        return [c.id for c, _ in reversed(members)]

    def _installed(self, state: AdaEvolveState, guide_reply: str | None) -> AdaEvolveState:
        """Returns the state with the guide reply's ideas installed (a reply without one marks a failed call)."""
        if guide_reply is None or not adaevolve.wants_paradigms(state, self.config):
            return state
        return adaevolve.install_paradigms(state, _ideas(guide_reply), self.config)


def _ideas(reply: str) -> list[Paradigm]:
    """Returns the reply's valid ideas ([] when it has none, which install_paradigms records as a failed call)."""
    try:
        return adaevolve.parse_paradigms(reply)
    except GuideReplyError as err:
        log.warning("adaevolve: the guide reply has no usable idea: %s", err.message)
        return []


def build(program: Program, playbook: Playbook, root: Path) -> AdaEvolveEngine:
    """Returns the engine of a program's customised AdaEvolve playbook and its `code/config.yaml`."""
    config = parse_adaevolve_config(playbook, load_config_yaml(program, root), program.direction,
                                   program.config.objectives)
    prompts = root / playbook.path.parent / "prompts"
    notes = (labelled_line(playbook.text, "tuning notes"), opening_paragraph(playbook.text, "island presets"))
    return AdaEvolveEngine(config, program, prompts, f"{program.name}.md", problem_framing(playbook.text),
                           tuple(n for n in notes if n))
