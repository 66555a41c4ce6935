"""AdaEvolve's two prompts: the solution prompt of an attempt, and the guide prompt asking for paradigms (§2.4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from autoloop_py.program.model import Program
from autoloop_py.render import render
from autoloop_py.state.population import Candidate
from autoloop_py.strategies import pareto
from autoloop_py.strategies.adaevolve.archive import archive_status
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.state import Paradigm, TriedParadigm
from autoloop_py.strategies.adaevolve.strategy import AdaEvolveDecision
from autoloop_py.strategies.prompt import (
    DataBlock,
    ProgramView,
    SolutionView,
    Steering,
    data_block,
    fence_for,
    solution_fields,
    with_newline,
)
from autoloop_py.strategies.prompt import program_view as shared_program_view

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


@dataclass(frozen=True, kw_only=True)
class AdaEvolvePromptView(SolutionView):
    """The one object `adaevolve_prompt.md.j2` renders: the shared solution fields and AdaEvolve's own.

    Attributes:
      decision: the attempt being carried out.
      label: the mode's label ('' for balanced).
      parent: the parent, or None for the first program.
      local_context: the island's programs most unlike the parent.
      global_context: the best programs of all islands.
      siblings: the parent's latest children.
      paradigm: the breakthrough idea to apply, or None.
      error: the previous attempt's failure, fenced as data (None when this is the first attempt).
      feedback: the evaluator's feedback on the parent, fenced as data (None when there is none).
      diff: ask for SEARCH/REPLACE edits (else a full rewrite).
      objectives: the Pareto objectives' paragraph, with the parent's values and front ('' without objectives).
    """

    decision: AdaEvolveDecision
    label: str
    parent: ProgramView | None
    local_context: tuple[ProgramView, ...]
    global_context: tuple[ProgramView, ...]
    siblings: tuple[ProgramView, ...]
    paradigm: Paradigm | None
    error: DataBlock | None
    feedback: DataBlock | None
    diff: bool
    objectives: str = ""


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
    view = AdaEvolvePromptView(
        **solution_fields(program, files, best_metric, framing, steering, problem),
        decision=decision, label=MODE_LABELS.get(decision.mode, ""),
        parent=None if decision.parent is None else program_view(decision.parent),
        local_context=tuple(program_view(c) for c in decision.local_context),
        global_context=tuple(program_view(c) for c in decision.global_context),
        siblings=tuple(program_view(c) for c in decision.siblings),
        paradigm=decision.paradigm,
        error=data_block("The previous attempt failed", [decision.previous_error or ""], bullets=False),
        feedback=data_block("Evaluator feedback", [feedback], bullets=False),
        diff=config.diff_based_generation,
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
        "metric": program.metric,
        "direction": program.direction,
        "best": None if best is None else program_view(best),
        "count": config.paradigm_num_to_generate,
        "tried": [(t.outcome, t.approach_type, t.idea, f"{t.gain:+.4f}") for t in tried],
        "framing": with_newline(framing.strip()),
        "framing_fence": fence_for(framing),
        "evaluator": data_block("Evaluator source", [evaluator], bullets=False),
        "feedback": data_block("Evaluator feedback on the best program", [feedback], bullets=False),
    }
    return render("adaevolve_guide_prompt.md.j2", view=view)


def program_view(candidate: Candidate) -> ProgramView:
    """Returns a program's display form, noting its archive status."""
    return shared_program_view(candidate, archive_status(candidate) or "")
