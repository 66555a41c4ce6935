"""EvoX as an Engine: the sandboxed strategy's decision, the solution prompt, the turn's bookkeeping, the LLM steps.

`refresh` holds every effect besides `sample`: the guide LLM's label texts (once), validating a
strategy a person edited, and the meta step (score the window, ask for a rewrite, validate it in
the sandbox). Its result travels to `decide`, which stays pure given the sandbox's `sample`.
"""

from __future__ import annotations

import logging
import random
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

from autoloop_py.program.model import Program
from autoloop_py.program.playbook import Playbook, load_config_yaml
from autoloop_py.program.playbook_notes import labelled_line, problem_framing
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.strategies import pareto
from autoloop_py.strategies.base import StrategyContext
from autoloop_py.strategies.engine import Guide, PromptInputs, SolutionEngine, ask_guide, entry_for
from autoloop_py.strategies.evox import fold as evox_fold
from autoloop_py.strategies.evox import sandbox as evox_sandbox
from autoloop_py.strategies.evox import strategy as evox
from autoloop_py.strategies.evox.config import EvoXConfig, parse_evox_config
from autoloop_py.strategies.evox.markdown import parse_state_block, render_state_block
from autoloop_py.strategies.evox.prompt import (
    label_texts,
    meta_code,
    meta_summary,
    parse_labels_reply,
    render_labels_prompt,
    render_meta_prompt,
    render_prompt,
)
from autoloop_py.strategies.evox.strategy import (
    EditCheck,
    EvoXDecision,
    EvoXRefresh,
    EvoXState,
    LabelTexts,
    MetaOutcome,
)

log = logging.getLogger(__name__)

META_FRAMING = "meta.md"
OPERATORS_FRAMING = "operators.md"
KEEP_INLINE = 5
EVALUATOR_CHARS = 8000


class EvoXEngine(SolutionEngine):
    """The runner's view of EvoX (its iteration makes at most max_attempts attempts on one parent and context)."""

    name = "evox"
    # A strategy replays every evaluated program, so each one's code must be at hand.
    needs_all_code = True
    # Evaluator feedback follows the context programs, before `# Current Solution` (strategies.md §3.2 step 2).
    evaluator_feedback = "slot"
    config: EvoXConfig

    def __init__(
        self, config: EvoXConfig, program: Program, root: Path, prompts_dir: Path, state_path: str, problem: str = "",
        notes: tuple[str, ...] = (),
    ) -> None:
        super().__init__(config, program, prompts_dir, state_path, problem, notes)
        self.root = root
        self.limits = evox_sandbox.SandboxLimits(config.sandbox_seconds, config.sandbox_memory_mb,
                                                 config.sandbox_cpu_seconds)

    def state_of(self, population: pop.Population) -> EvoXState:
        """Returns the strategy state the Population's block holds (a StateError numbers the block's lines from 1)."""
        return parse_state_block(population.strategy_state, self.state_path, 0, self.config)

    # ------------------------------------------------------------ the effects before the decision

    def refresh(self, population: pop.Population, guide: Guide | None) -> EvoXRefresh | None:
        """Returns the label texts, hand-edit check and meta step this iteration needs (None: nothing to do)."""
        state = self.state_of(population)
        labels = self._labels(state, guide)
        edit = self._edit_check(state)
        checked = evox.apply_edit(state, edit, self.config, 0)
        meta = self._meta(checked, population, guide) if checked.evolve_due and guide is not None else None
        if labels is None and edit is None and meta is None:
            return None
        return EvoXRefresh(labels, edit, meta)

    def _labels(self, state: EvoXState, guide: Guide | None) -> LabelTexts | None:
        """Returns the guide's label texts once (the defaults when it fails); None when nothing is asked."""
        wanted = state.labels in ("pending", "default") and self.config.auto_generate_variation_operators
        if guide is None or not wanted:
            return None
        prompt = render_labels_prompt(self.program, self._evaluator_source(), self._framing(OPERATORS_FRAMING),
                                      self.problem)
        reply = ask_guide(guide, prompt)
        if isinstance(reply, Exception):
            log.warning("evox: the label call failed (%s); using the default DIVERGE/REFINE texts", reply)
            return label_texts(source="failed")
        texts = parse_labels_reply(reply)
        if texts is None:
            log.warning("evox: the label reply lacks a DIVERGE or REFINE list; using the default texts")
            return label_texts(source="failed")
        return texts

    def _edit_check(self, state: EvoXState) -> EditCheck | None:
        """Returns the validation of the active strategy when a person edited its code (None otherwise)."""
        if not evox.edited(state):
            return None
        code = state.strategy(state.active).code
        problems = evox_sandbox.validate(code, self.config.random_seed, self.limits)
        log.info("evox: S%d was edited by hand; validation %s", state.active, "passed" if not problems else "failed")
        return EditCheck(state.active, evox.checksum(code), tuple(problems))

    def _meta(self, state: EvoXState, population: pop.Population, guide: Guide) -> MetaOutcome:
        """Returns the meta LLM's rewrite of the best strategy, validated in the sandbox (≤ meta_attempts calls)."""
        best = evox.current_best(population.candidates, self.config.direction)
        scored = evox.reset_window(evox.score_active(state, best, 0), best, 0)
        parent = evox.strategy_parent(scored)
        parent = scored.active if parent is None else parent
        references = evox.meta_references(scored, parent, random.Random(f"{scored.rng_seed}:meta:{scored.evolutions}"))
        problems: list[str] = []
        code, summary, attempt = None, "", 0
        for attempt in range(1, self.config.meta_attempts + 1):
            prompt = render_meta_prompt(
                scored, self.config, program=self.program, population=population.candidates,
                parent=scored.strategy(parent), references=[scored.strategy(i) for i in references],
                framing=self._framing(META_FRAMING), problems=problems, problem=self.problem,
                notes=self.notes,
            )
            reply = ask_guide(guide, prompt)
            if isinstance(reply, Exception):
                problems = [f"the meta call failed: {reply}"]
                break
            code, summary = meta_code(reply), meta_summary(reply)
            problems = (["the reply holds no ```python block; give the whole module in one"] if code is None
                        else evox_sandbox.validate(code, self.config.random_seed, self.limits))
            if not problems:
                break
            log.info("evox: meta attempt %d was rejected: %s", attempt, "; ".join(problems))
        return MetaOutcome(parent, references, code, tuple(problems), attempt, summary)

    # ------------------------------------------------------------ the Engine protocol

    def decide(
        self, population: pop.Population, context: StrategyContext, rng: random.Random,
        guide_reply: EvoXRefresh | None = None,
    ) -> EvoXDecision:
        """Returns the parent, label and context the active strategy samples in the sandbox."""
        decision = evox.decide(
            self.state_of(population), population.candidates, self.config, rng, self._sample,
            iteration=context.iteration, defaults=label_texts(), reply=guide_reply,
        )
        for event in decision.events:
            log.info("evox: %s", event)
        return decision

    def _sample(self, code: str, genomes: Any, seed: int, num_context: int) -> evox_sandbox.Sample:
        return evox_sandbox.sample(code, genomes, seed, num_context, self.limits)

    def guide_wanted(self, population: pop.Population) -> str | None:
        """Returns why the next iteration would consult the guide LLM (None: it would not)."""
        state = self.state_of(population)
        if state.evolve_due:
            return (f"the search made no progress for {state.switch_interval} turns: the meta LLM would rewrite "
                    "the search strategy")
        if state.labels in ("pending", "default") and self.config.auto_generate_variation_operators:
            return "the guide LLM would write the DIVERGE/REFINE texts for this problem"
        return None

    def prompt(self, decision: EvoXDecision, inputs: PromptInputs) -> str:
        """Returns the EvoX solution prompt."""
        return render_prompt(
            decision, self.config, program=inputs.program, population=inputs.population.candidates,
            files=inputs.files, framing=inputs.framing, best_metric=inputs.best, steering=inputs.steering,
            problem=self.problem, feedback=inputs.feedback,
        )

    def candidate(
        self, decision: EvoXDecision, record: statefile.IterationRecord, code: str, approach: str | None,
        iteration: int, language: str,
    ) -> pop.Candidate:
        """Returns the Population entry of an evaluated candidate with its Label, Context and Strategy bullets."""
        entry = entry_for(decision, record, code, approach, iteration, language)
        context = ", ".join(f"#{c.id}" for c in decision.context) or "—"
        extra = (("Label", evox.LABEL_WORDS.get(decision.label, "none")), ("Context", context),
                 ("Strategy", f"S{decision.strategy_id}"))
        return replace(entry, extra=extra)

    def record(
        self,
        population: pop.Population,
        candidate: pop.Candidate,
        decision: EvoXDecision,
        metrics: Mapping[str, Any],
        *,
        direction: str,
        iteration: int,
        rng: random.Random,
    ) -> tuple[pop.Population, pop.Candidate]:
        """Returns the Population with the candidate added and the turn's window and stagnation step applied."""
        child = replace(candidate, id=max(candidate.id, population.next_id))
        population = pop.add_candidate(population, child)
        return self.advance(population, decision, iteration=iteration), population.candidates[0]

    def advance(self, population: pop.Population, decision: EvoXDecision | None, *, iteration: int) -> pop.Population:
        """Returns the Population after a turn (a candidate or not): the decision's state, one window step."""
        state = decision.state if decision is not None else self.state_of(population)
        best = evox.current_best(population.candidates, self.config.direction)
        if decision is not None and decision.as_is:
            state = evox.start_first_window(state, best)
        else:
            state = evox.end_turn(state, [best] * (decision.attempt if decision is not None else 1), self.config)
        return pop.with_strategy_state(population, render_state_block(state, self.config.direction))

    def load_strategy_code(self, population: pop.Population, load_code: Callable[[str], str | None]) -> pop.Population:
        """Returns the Population with every folded strategy's code read back into its block (references kept)."""
        state = self.state_of(population)
        if not any(evox_fold.is_folded(s) for s in state.strategies):
            return population
        loaded, missing = evox_fold.unfold(state, load_code)
        for path in missing:
            log.warning("evox: a strategy's source %s is missing from the memory branch", path)
        return pop.with_strategy_state(population, render_state_block(loaded, self.config.direction))

    def fold_strategy_code(self, population: pop.Population) -> tuple[pop.Population, dict[str, str]]:
        """Returns the Population with only the strategies that may run inline, and the sources newly folded."""
        state = self.state_of(population)
        folded, sources = evox_fold.fold(state, lambda k: evox_fold.strategy_path(self.program.name, k))
        if folded == state:
            return population, {}
        return pop.with_strategy_state(population, render_state_block(folded, self.config.direction)), sources

    def keep_inline(self, population: pop.Population, direction: str) -> list[int]:
        """Returns the best few programs' ids, worst first: the prompts show their code most often."""
        scored = [c for c in population.candidates if c.status != "error" and c.fitness is not None]
        scored.sort(key=lambda c: (-(pop.oriented(c.fitness, direction) or 0.0), c.id))
        return [c.id for c in reversed(scored[:KEEP_INLINE])]

    # ------------------------------------------------------------ files

    def _evaluator_source(self) -> str:
        """Returns the source of the .py files the evaluation command names (cut to EVALUATOR_CHARS)."""
        command = self.program.evaluation.command if self.program.evaluation else ""
        texts = []
        for token in re.findall(r"[\w./-]+\.py\b", command):
            for base in (self.root / self.program.base_dir, self.root):
                if (base / token).is_file():
                    texts.append((base / token).read_text(encoding="utf-8", errors="replace"))
                    break
        return "\n".join(texts)[:EVALUATOR_CHARS]


def build(program: Program, playbook: Playbook, root: Path) -> EvoXEngine:
    """Returns the engine of a program's customised EvoX playbook and its `code/config.yaml`."""
    config = parse_evox_config(playbook, load_config_yaml(program, root), program.direction)
    objectives = pareto.in_force(config.pareto_objectives, dict(config.higher_is_better), program.config.objectives,
                             (playbook.path, None))
    config = replace(config, initial_code=evox_sandbox.initial_strategy(), objectives=objectives)
    prompts = root / playbook.path.parent / "prompts"
    notes = tuple(n for n in (labelled_line(playbook.text, "tuning notes"),) if n)
    return EvoXEngine(config, program, root, prompts, f"{program.name}.md", problem_framing(playbook.text), notes)
