"""AdaEvolve's two prompts: the solution prompt of an attempt, and the guide prompt asking for paradigms (§2.4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from autoloop_py.program.model import Program
from autoloop_py.render import render
from autoloop_py.state.population import Candidate, format_fitness
from autoloop_py.strategies import pareto
from autoloop_py.strategies.adaevolve.archive import archive_status
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.state import Paradigm, TriedParadigm
from autoloop_py.strategies.adaevolve.strategy import AdaEvolveDecision
from autoloop_py.strategies.prompt import (
    DataBlock,
    FileView,
    PromptContext,
    Steering,
    fence_for,
    prompt_view,
    steering_blocks,
)

MODE_LABELS = {
    "exploration": (
        "EXPLORE: this parent was drawn for being unlike the rest of its island. Reach the goal a substantially "
        "different way; a small tweak of its current approach is not what this attempt is for."
    ),
    "exploitation": (
        "EXPLOIT: this parent is among the best of its island. Keep what already works and make one targeted "
        "improvement to it."
    ),
}


@dataclass(frozen=True)
class ProgramView:
    """A program as a prompt shows it.

    Attributes:
      candidate: the program's entry.
      fitness: its raw fitness as text.
      fence: a fence its code cannot close.
      code: its source ('' when only a reference is stored).
      status: its archive status ('' when unknown).
    """

    candidate: Candidate
    fitness: str
    fence: str
    code: str
    status: str


@dataclass(frozen=True)
class AdaEvolvePromptView:
    """The one object `adaevolve_prompt.md.j2` renders.

    Attributes:
      program: the program's name.
      goal: the Goal text.
      metric: the metric's name (None when unconfigured).
      direction: 'higher' or 'lower'.
      best: the current best metric as text, or None.
      decision: the attempt being carried out.
      label: the mode's label ('' for balanced).
      parent: the parent, or None for the first program.
      local_context: the island's programs most unlike the parent.
      global_context: the best programs of all islands.
      siblings: the parent's latest children.
      paradigm: the breakthrough idea to apply, or None.
      error: the previous attempt's failure, fenced as data (None when this is the first attempt).
      feedback: the evaluator's feedback on the parent, fenced as data (None when there is none).
      framing: the framing file's text; framing_fence: a fence it cannot close.
      diff: ask for SEARCH/REPLACE edits (else a full rewrite).
      data: the maintainers' steering (comments, Priorities, Lessons, Foreclosed Avenues), fenced as data.
      files: the Target files as they are in the worktree.
      include: the Target patterns; exclude: the Do-not-modify patterns.
      example_path: the path used in the reply example.
      objectives: the Pareto objectives' paragraph, with the parent's values and front ('' without objectives).
    """

    program: str
    goal: str
    metric: str | None
    direction: str
    best: str | None
    decision: AdaEvolveDecision
    label: str
    parent: ProgramView | None
    local_context: tuple[ProgramView, ...]
    global_context: tuple[ProgramView, ...]
    siblings: tuple[ProgramView, ...]
    paradigm: Paradigm | None
    error: DataBlock | None
    feedback: DataBlock | None
    framing: str
    framing_fence: str
    diff: bool
    data: tuple[DataBlock, ...]
    files: tuple[FileView, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    example_path: str
    problem: str = ""
    objectives: str = ""

    @property
    def evolve(self) -> bool:
        """Returns whether any Target file has EVOLVE-BLOCK markers."""
        return any(f.evolve for f in self.files)


def render_prompt(
    decision: AdaEvolveDecision,
    config: AdaEvolveConfig,
    *,
    program: Program,
    files: Mapping[str, str],
    framing: str,
    best_metric: float | None,
    steering: Steering = Steering(),
    feedback: str = "",
    problem: str = "",
) -> str:
    """Returns an attempt's solution prompt: mode label, parent, context, paradigm, siblings, previous error."""
    base = prompt_view(PromptContext(program=program, files=files, best_metric=best_metric, iteration=0))
    view = AdaEvolvePromptView(
        program=program.name, goal=base.goal, metric=base.metric, direction=program.direction, best=base.best,
        decision=decision, label=MODE_LABELS.get(decision.mode, ""),
        parent=None if decision.parent is None else program_view(decision.parent),
        local_context=tuple(program_view(c) for c in decision.local_context),
        global_context=tuple(program_view(c) for c in decision.global_context),
        siblings=tuple(program_view(c) for c in decision.siblings),
        paradigm=decision.paradigm,
        error=_block("The previous attempt failed", decision.previous_error or ""),
        feedback=_block("Evaluator feedback", feedback),
        framing=_with_newline(framing.strip()), framing_fence=fence_for(framing),
        diff=config.diff_based_generation,
        data=tuple(steering_blocks(steering)),
        files=base.files, include=base.include, exclude=base.exclude, example_path=base.example_path,
        problem=problem,
        objectives=pareto.prompt_section(config.objectives, decision.parent),
    )
    return render("adaevolve_prompt.md.j2", view=view)


def render_guide_prompt(
    config: AdaEvolveConfig,
    *,
    program: Program,
    best: Candidate | None,
    tried: Sequence[TriedParadigm],
    framing: str,
    evaluator: str = "",
    feedback: str = "",
    problem: str = "",
    notes: Sequence[str] = (),
) -> str:
    """Returns the guide LLM's prompt asking for `paradigm_num_to_generate` breakthrough ideas as JSON."""
    view = {
        "program": program.name,
        "goal": program.goal.strip(),
        "problem": problem,
        "notes": [n for n in notes if n],
        "metric": program.evaluation.metric if program.evaluation else None,
        "direction": program.direction,
        "best": None if best is None else program_view(best),
        "count": config.paradigm_num_to_generate,
        "tried": [(t.outcome, t.approach_type, t.idea, f"{t.gain:+.4f}") for t in tried],
        "framing": _with_newline(framing.strip()),
        "framing_fence": fence_for(framing),
        "evaluator": _block("Evaluator source", evaluator),
        "feedback": _block("Evaluator feedback on the best program", feedback),
    }
    return render("adaevolve_guide_prompt.md.j2", view=view)


def program_view(candidate: Candidate) -> ProgramView:
    """Returns a program's display form."""
    code = _with_newline(candidate.code or "")
    return ProgramView(candidate, format_fitness(candidate.fitness), fence_for(code), code,
                       archive_status(candidate) or "")


def _block(title: str, text: str) -> DataBlock | None:
    body = _with_newline(text.strip())
    return DataBlock(title, body, fence_for(body)) if body else None


def _with_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"
