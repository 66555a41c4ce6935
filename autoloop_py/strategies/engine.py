"""The Engine contract: what the runner asks of a strategy's bookkeeping during an iteration."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from autoloop_py.errors import ConfigurationError
from autoloop_py.program.model import Program
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.strategies.base import StrategyContext
from autoloop_py.strategies.prompt import Steering

SOLUTION_FRAMING = "solution.md"
Guide = Callable[[str], str]


class DecisionLike(Protocol):
    """What the runner reads of any strategy's decision (strategies.base.Decision satisfies it)."""

    @property
    def operator(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def parents(self) -> Sequence[pop.Candidate]: ...

    @property
    def island(self) -> int | None: ...


@dataclass(frozen=True)
class PromptInputs:
    """What a strategy's prompt is rendered from, besides its decision.

    Attributes:
      program: the program.
      files: the Target files as the candidate will start from them (the parent's code in place).
      framing: the text of the playbook's prompts/ file the decision asked for ('' for none).
      best: the current best metric, or None before the baseline.
      steering: the maintainers' Priorities and directives, shown as data.
      population: the state file's Population.
      feedback: what evaluations said of the parent and its latest attempts that were not kept, one text per
        candidate (loop/lineage_store.feedback_items); () when none.
      parent_feedback: what evaluations said of each other parent of the decision (its own row only), by id;
        an engine that shows feedback beside each parent (AlphaEvolve) uses it.
    """

    program: Program
    files: Mapping[str, str]
    framing: str
    best: float | None
    steering: Steering
    population: pop.Population
    feedback: tuple[str, ...] = ()
    parent_feedback: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Engine(Protocol):
    """A strategy's deterministic bookkeeping; every method is pure given its inputs and the rng.

    Optional members, looked up with getattr by strategies/runner.py (an engine without them does without):
      needs_all_code: bool, every folded source is loaded back before `decide`, `record` and `advance`.
      refresh(population, guide) -> str | None: consults the guide LLM before `decide` (its reply goes to
        `decide` as `guide_reply`).
      guide_wanted(population) -> str | None: why the next iteration would consult the guide (None: it
        would not); the hand-off, which has no LLM, says so in its prompt.
      advance(population, decision, *, iteration) -> Population: the bookkeeping of an iteration that had
        a decision but produced no Population entry (the proposal failed, or it was rejected before
        evaluation).
      retry(decision, error) -> decision | None: the decision of the next attempt of the same iteration
        after a failed one (the proposal failed or its evaluation did), with the error for its prompt;
        None when no attempt is left. The engine counts the attempts in the decision, and the decision
        may carry `attempt: int`, the attempts used, for the history.
      duplicate_of(population, code) -> Candidate | None: an evaluated entry the code repeats (checked before
        evaluation; FunSearch).
      load_strategy_code(population, load_code) -> Population: reads back state-block code the engine folded
        to the memory branch (EvoX's past strategies).
      fold_strategy_code(population) -> (Population, {path: source}): moves state-block code out to the memory
        branch when the state file nears its budget; the runner commits the sources beside the state file.
      evaluator_feedback: str, where the prompt shows PromptInputs.feedback: `slot` (the engine's own
        template places it), `none` (its reference shows none: FunSearch); absent: the runner adds it as a
        data section before `## How to reply`.

    A decision's `as_is` (False when absent) says it records the Target as it is, without a proposal (the
    Population's seed).

    An engine parses its `### ⚙️ Strategy State` block with first_line 0, so a StateError it raises
    numbers the block's lines from 1; the runner moves it to the state file's line.
    """

    name: str

    def decide(self, population: pop.Population, context: StrategyContext, rng: random.Random) -> Any:
        """Returns the iteration's decision (a DecisionLike; parents' code may still be folded)."""
        ...

    def with_parents(self, decision: Any, parents: tuple[pop.Candidate, ...]) -> Any:
        """Returns the decision with its parents replaced (their folded code loaded back)."""
        ...

    def framing_file(self, decision: Any) -> str:
        """Returns the file under the playbook's prompts/ folder this decision's prompt needs ('' for none)."""
        ...

    def prompt(self, decision: Any, inputs: PromptInputs) -> str:
        """Returns the rendered prompt."""
        ...

    def candidate(
        self, decision: Any, record: statefile.IterationRecord, code: str, approach: str | None, iteration: int,
        language: str,
    ) -> pop.Candidate:
        """Returns the Population entry of an evaluated candidate (id 0: assigned when recorded)."""
        ...

    def record(
        self,
        population: pop.Population,
        candidate: pop.Candidate,
        decision: Any,
        metrics: Mapping[str, Any],
        *,
        direction: str,
        iteration: int,
        rng: random.Random,
    ) -> tuple[pop.Population, pop.Candidate]:
        """Returns the Population after the candidate (id assigned, caps and strategy state applied) and the entry."""
        ...

    def keep_inline(self, population: pop.Population, direction: str) -> list[int]:
        """Returns the ids whose code stays inline longest, least important first (the last one never folds)."""
        ...


def entry_for(
    decision: DecisionLike,
    record: statefile.IterationRecord,
    code: str,
    approach: str | None,
    iteration: int,
    language: str,
    cell: tuple[str, str] | None = None,
    parents: tuple[int, ...] | None = None,
) -> pop.Candidate:
    """Returns the seed-schema Population entry of an evaluated candidate (id 0: assigned when recorded).

    `parents` overrides the decision's parent ids, for strategies that list them in another order.
    """
    return pop.Candidate(
        id=0,
        island=decision.island,
        fitness=record.metric if record.status != "error" else None,
        gen=iteration,
        operator=decision.operator,
        parents=parents if parents is not None else tuple(p.id for p in decision.parents),
        cell=cell,
        approach=approach or record.change,
        status=record.status,
        notes=record.lesson or record.notes,
        code=code,
        language=language,
    )


class SolutionEngine:
    """What AdaEvolve's and EvoX's engines share: one parent, prompts/solution.md for every solution prompt,
    retries that show the error, and the guide LLM's framing files under prompts_dir.

    Attributes:
      config: the strategy's settings (with `objectives` and `attempts`).
      objectives: the Pareto objectives the runner records on each entry (the frontmatter's, or the playbook's own).
      problem: the playbook's Problem framing ('' when it has none).
      notes: the playbook's tuning notes the guide LLM is shown.
      program: the program.
      prompts_dir: the playbook's prompts/ folder.
      state_path: the state file, named by the errors of the Strategy State block.
    """

    def __init__(
        self, config: Any, program: Program, prompts_dir: Path, state_path: str, problem: str = "",
        notes: tuple[str, ...] = (),
    ) -> None:
        self.config = config
        self.objectives = config.objectives
        self.problem = problem
        self.notes = notes
        self.program = program
        self.prompts_dir = prompts_dir
        self.state_path = state_path

    def with_parents(self, decision: Any, parents: tuple[pop.Candidate, ...]) -> Any:
        """Returns the decision with its parent replaced (its folded code loaded back)."""
        return dataclasses.replace(decision, parent=parents[0] if parents else None)

    def framing_file(self, decision: Any) -> str:
        """Returns prompts/solution.md, the framing of every solution prompt."""
        return SOLUTION_FRAMING

    def retry(self, decision: Any, error: str) -> Any:
        """Returns the next attempt after a failed one (same parent; the error shown), or None after
        config.attempts."""
        if decision.attempt >= self.config.attempts:
            return None
        return dataclasses.replace(decision, previous_error=error, attempt=decision.attempt + 1)

    def _framing(self, name: str) -> str:
        path = self.prompts_dir / name
        return path.read_text(encoding="utf-8") if path.is_file() else ""


def ask_guide(guide: Guide, prompt: str) -> str | Exception:
    """Returns the guide LLM's reply, or the provider error that made the call fail (the guide is advisory).

    A ConfigurationError (404 model, refused key, unreachable api-base) is raised: the run stops, as for the
    proposer's; a timeout, 5xx or rate limit is returned, and the iteration goes on without the guide.
    """
    try:
        return guide(prompt)
    except ConfigurationError:
        raise
    except Exception as err:
        return err
