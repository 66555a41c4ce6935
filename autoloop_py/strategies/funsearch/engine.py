"""FunSearch as an Engine: islands of score-signature clusters, the versioned prompt and output-hash dedup (§4).

The proposers stay as they are: the runner places the best prompted version's code in the Target's
EVOLVE-BLOCK, and the prompt asks for the block back in the standard reply format with the new
version of the function in place. A seed decision (no island yet) is evaluated as it is, with no
proposal (`as_is`); its candidate founds every island. Past `max_population` entries the
weakest leave the Population table (their code stays on the memory branch).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from autoloop_py.program.model import Program
from autoloop_py.program.playbook import Playbook, load_config_yaml
from autoloop_py.program.playbook_notes import problem_framing
from autoloop_py.program.regions import primary_target
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.strategies.base import StrategyContext
from autoloop_py.strategies.engine import PromptInputs, entry_for
from autoloop_py.strategies.funsearch import prompt as funsearch_prompt
from autoloop_py.strategies.funsearch import strategy as fs
from autoloop_py.strategies.funsearch.config import SKELETON_FILE, FunSearchConfig, parse_funsearch_config
from autoloop_py.strategies.funsearch.islands import evictions, without_members
from autoloop_py.strategies.funsearch.state import FunSearchState
from autoloop_py.strategies.prompt import steering_blocks

log = logging.getLogger(__name__)

CODE_HASH = "Code hash"


@dataclass(frozen=True)
class FunSearchStep:
    """One FunSearch iteration as the runner sees it.

    Attributes:
      inner: the pure decision (mode, island, version, picks, uniforms).
      parents: the prompted versions, best first (the first one's code is placed in the Target).
    """

    inner: fs.FunSearchDecision
    parents: tuple[pop.Candidate, ...]

    @property
    def operator(self) -> str:
        """Returns `sample` or `seed`."""
        return self.inner.mode

    @property
    def reason(self) -> str:
        """Returns the island, temperature and clusters drawn."""
        return self.inner.reason

    @property
    def island(self) -> int | None:
        """Returns the island the child is registered on (None for the seed)."""
        return self.inner.island

    @property
    def as_is(self) -> bool:
        """Returns whether this is the seed: the Target's own function, evaluated without an LLM call (§4.2)."""
        return self.inner.mode == fs.SEED


def step_of(decision: fs.FunSearchDecision) -> FunSearchStep:
    """Returns the runner's view of a pure decision: its prompted versions best first."""
    return FunSearchStep(decision, tuple(reversed(decision.parents)))


def code_hash(code: str) -> str:
    """Returns a short hash of a candidate's evolved code, line endings and trailing blanks ignored."""
    lines = [line.rstrip() for line in code.replace("\r\n", "\n").split("\n")]
    return hashlib.sha256("\n".join(lines).strip("\n").encode("utf-8")).hexdigest()[:16]


class FunSearchEngine:
    """The runner's view of FunSearch."""

    name = "funsearch"
    # DeepMind's prompt is the versions alone: no evaluator feedback, as in the reference.
    evaluator_feedback = "none"

    def __init__(
        self, config: FunSearchConfig, primary: str, state_path: str = "state.md", seed: int | None = None,
        problem: str = "",
    ) -> None:
        self.config = config
        self.problem = problem
        self.primary = primary
        self.state_path = state_path
        self.seed = seed

    def state_of(self, population: pop.Population) -> FunSearchState:
        """Returns the FunSearch state the Population's Strategy State block holds."""
        return fs.parse_state_block(population.strategy_state, self.state_path, 0)

    def decide(self, population: pop.Population, context: StrategyContext, rng: random.Random) -> FunSearchStep:
        """Returns the island and the versions to prompt with, or the seed decision (§4.2 steps 1–5)."""
        decision = fs.decide(self.state_of(population), population.candidates, self.config, rng, context.slot)
        return step_of(decision)

    def with_parents(self, decision: FunSearchStep, parents: tuple[pop.Candidate, ...]) -> FunSearchStep:
        """Returns the decision with its parents (and the picks showing them) replaced by id."""
        by_id = {p.id: p for p in parents}
        picks = tuple(
            dataclasses.replace(p, candidate=by_id.get(p.candidate.id, p.candidate)) for p in decision.inner.picks
        )
        return step_of(dataclasses.replace(decision.inner, picks=picks))

    def framing_file(self, decision: FunSearchStep) -> str:
        """Returns the specification every prompt opens with."""
        return SKELETON_FILE

    def prompt(self, decision: FunSearchStep, inputs: PromptInputs) -> str:
        """Returns the versioned prompt, asking for the Target's evolved block back in the standard reply format."""
        current = inputs.files.get(self.primary, "")
        # The seed has no versions yet: it is prompted with the Target's own function as v0.
        inner = dataclasses.replace(decision.inner, mode=fs.SAMPLE)
        # The versions are the prompt's body; the maintainers' steering sits before the reply format.
        return funsearch_prompt.render_prompt(
            inner, self.config, program=inputs.program, specification=inputs.framing, current=current,
            path=self.primary, data=tuple(steering_blocks(inputs.steering)), problem=self.problem,
        )

    def candidate(
        self,
        decision: FunSearchStep,
        record: statefile.IterationRecord,
        code: str,
        approach: str | None,
        iteration: int,
        language: str,
    ) -> pop.Candidate:
        """Returns the entry of an evaluated candidate (its FunSearch bullets are added when recorded)."""
        shown = tuple(p.id for p in decision.inner.parents)  # v0 first, as the prompt lists them
        return entry_for(decision, record, code, approach, iteration, language, parents=shown)

    def record(
        self,
        population: pop.Population,
        candidate: pop.Candidate,
        decision: FunSearchStep,
        metrics: Mapping[str, Any],
        *,
        direction: str,
        iteration: int,
        rng: random.Random,
    ) -> tuple[pop.Population, pop.Candidate]:
        """Registers the candidate on its island (or every island for the seed) and adds its entry."""
        state = self.state_of(population)
        candidate = dataclasses.replace(candidate, id=population.next_id)
        outcome = fs.classify(state, decision.inner, candidate, metrics, self.config)
        after = fs.record(state, decision.inner, candidate, metrics, self.config, rng)
        if after.rng_seed is None and self.seed is not None:
            after = dataclasses.replace(after, rng_seed=self.seed)
        candidate = self._entry(candidate, decision, outcome)
        if not population.candidates and not population.strategy_state:
            population = dataclasses.replace(pop.empty_population("FunSearch"), next_id=population.next_id)
        population = pop.add_candidate(population, candidate)
        population, after = self._capped(population, after)
        population = pop.with_strategy_state(population, fs.render_state_block(after, self.config))
        log.info("funsearch: candidate %d %s", candidate.id, fs.describe(outcome))
        return population, candidate

    def _capped(self, population: pop.Population, state: FunSearchState) -> tuple[pop.Population, FunSearchState]:
        """Returns the Population cut to max_population entries, and the state without the evicted members."""
        gone = set(evictions(state, population.candidates, self.config.max_population, self.config))
        if not gone:
            return population, state
        log.info("funsearch: candidate(s) %s leave the Population (max_population %d); their code stays on the "
                 "memory branch", ", ".join(str(i) for i in sorted(gone)), self.config.max_population)
        kept = tuple(c for c in population.candidates if c.id not in gone)
        return dataclasses.replace(population, candidates=kept), without_members(state, gone)

    def _entry(self, candidate: pop.Candidate, decision: FunSearchStep, outcome: fs.Outcome) -> pop.Candidate:
        """Returns the entry with the reduced score as fitness and the FunSearch bullets."""
        fitness = outcome.score if outcome.score is not None else candidate.fitness
        notes = "; ".join(part for part in (candidate.notes, fs.describe(outcome)) if part)
        extra = (*fs.candidate_bullets(decision.inner, outcome), (CODE_HASH, code_hash(candidate.code or "")))
        return dataclasses.replace(candidate, fitness=fitness, notes=notes, extra=extra)

    def keep_inline(self, population: pop.Population, direction: str) -> list[int]:
        """Returns the islands' cluster members, worst cluster first (the best island's best last)."""
        state = self.state_of(population)
        present = {c.id for c in population.candidates}
        scored: dict[int, float] = {}
        for island in state.islands:
            for cluster in island.clusters:
                for member in cluster.members:
                    oriented = cluster.score if direction == "higher" else -cluster.score
                    scored[member.id] = max(scored.get(member.id, oriented), oriented)
        return [i for i in sorted(scored, key=lambda i: (scored[i], i)) if i in present]

    def duplicate_of(self, population: pop.Population, code: str) -> pop.Candidate | None:
        """Returns an evaluated candidate whose evolved code is the same as code (checked before evaluation)."""
        wanted = code_hash(code)
        for candidate in population.candidates:
            if _code_hash_of(candidate) == wanted:
                return candidate
        return None


def _code_hash_of(candidate: pop.Candidate) -> str | None:
    """Returns the candidate's recorded code hash, else the hash of its inline code."""
    recorded = next((value for label, value in candidate.extra if label == CODE_HASH), None)
    if recorded:
        return recorded
    return code_hash(candidate.code) if candidate.code is not None else None


def build(program: Program, playbook: Playbook, root: Path) -> FunSearchEngine:
    """Returns the engine of a program whose playbook is FunSearch's."""
    config = parse_funsearch_config(playbook, load_config_yaml(program, root), program.direction)
    return FunSearchEngine(config, primary_target(program, root), f"{program.name}.md", program.config.seed,
                           problem_framing(playbook.text))
