"""The AlphaEvolve iteration prompt: a decision, its parents' code, the framing, islands and reply format (spec §1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from autoloop_py.program.model import Program
from autoloop_py.render import render
from autoloop_py.state.population import Candidate
from autoloop_py.strategies.alphaevolve.config import AlphaEvolveConfig
from autoloop_py.strategies.alphaevolve.strategy import TWO_PARENT_OPERATORS, find_island
from autoloop_py.strategies.base import Decision
from autoloop_py.strategies.prompt import (
    DataBlock,
    ProgramView,
    SolutionView,
    Steering,
    data_block,
    program_view,
    solution_fields,
)


@dataclass(frozen=True, kw_only=True)
class ParentView(ProgramView):
    """A parent as the prompt shows it: its ProgramView (code '' when only a reference is stored) and its role.

    Attributes:
      label: "Parent A", "Parent B", or "Parent" for a single-parent operator (migration names roles).
      island: "<index> — <name>" (or "none").
      feedback: what its evaluation (and, for the first parent, its latest attempts not kept) said, as data;
        OpenEvolve's "Last Execution Output" of the program shown (None when nothing was said).
    """

    label: str
    island: str
    feedback: DataBlock | None = None


@dataclass(frozen=True)
class IslandView:
    """An island line of the prompt.

    Attributes:
      index: the island index.
      name: the family name ("new island: name it" when the LLM opens it).
      description: one line on the family.
      child: the child will belong to this island.
    """

    index: int
    name: str
    description: str
    child: bool


@dataclass(frozen=True, kw_only=True)
class AlphaEvolvePromptView(SolutionView):
    """The one object `alphaevolve_prompt.md.j2` renders: the shared solution fields and AlphaEvolve's own.

    Attributes:
      decision: the decision being carried out.
      child_island: the child's island as "<index> — <name>" ("none" without islands).
      mutation: the operator is exploitation or exploration (else crossover or migration).
      parents: the parents, the one to edit first.
      islands: every island, configured and opened, with the child's marked.
      framing_name: the framing file's name under strategy/prompts/.
      weights: the operator weights as shown ("exploitation 0.5 · …"); weights_note, islands_note: the playbook's
        notes on its weights and islands ('' without one).
      validity_checks: the playbook's cheap invariants.
      full_rewrite: the playbook's diff style is a full rewrite of the evolve block.
      name_new_island: the child opens an island the playbook does not list, so the reply must name it.
    """

    decision: Decision
    child_island: str
    mutation: bool
    parents: tuple[ParentView, ...]
    islands: tuple[IslandView, ...]
    framing_name: str
    weights: str
    weights_note: str
    islands_note: str
    validity_checks: tuple[str, ...]
    full_rewrite: bool
    name_new_island: bool


def framing_file(operator: str) -> str:
    """Returns the framing file an operator needs: mutation.md or crossover.md (under strategy/prompts/)."""
    return "crossover.md" if operator in TWO_PARENT_OPERATORS else "mutation.md"


def render_prompt(
    decision: Decision,
    config: AlphaEvolveConfig,
    *,
    program: Program,
    files: Mapping[str, str],
    framing: str,
    best_metric: float | None,
    direction: str,
    steering: Steering = Steering(),
    problem: str = "",
    feedback: Sequence[str] = (),
    parent_feedback: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """Returns the AlphaEvolve iteration prompt: the decision, parents' code, framing, islands and reply format.

    feedback: what evaluations said of the first parent and its latest attempts; parent_feedback: of each other
    parent, by id. Each is shown in its parent's block, as OpenEvolve shows a program's last execution output.
    """
    fields = solution_fields(program, files, best_metric, framing, steering, problem)
    view = AlphaEvolvePromptView(
        **{**fields, "direction": direction},
        decision=decision,
        child_island=_island_text(decision.island, config),
        mutation=decision.operator not in TWO_PARENT_OPERATORS,
        parents=_parent_views(decision, config, feedback, parent_feedback or {}),
        islands=_island_views(decision, config),
        framing_name=framing_file(decision.operator),
        weights=" · ".join(f"{name} {float(weight):g}" for name, weight in config.operator_weights),
        weights_note=config.weights_note,
        islands_note=config.islands_note,
        validity_checks=config.validity_checks,
        full_rewrite=config.diff_style != "minimal_diff",
        # the child opens an island the playbook does not list: the reply must name it
        name_new_island=(
            decision.new_island and decision.island is not None and find_island(config, decision.island) is None
        ),
    )
    return render("alphaevolve_prompt.md.j2", view=view)


def _parent_views(
    decision: Decision, config: AlphaEvolveConfig, feedback: Sequence[str], others: Mapping[str, Sequence[str]]
) -> tuple[ParentView, ...]:
    """Returns the parents as shown, labelled by role, each with what its evaluation said."""
    labels = ("Parent",) if len(decision.parents) == 1 else ("Parent A", "Parent B")
    if decision.operator == "migration" and len(decision.parents) == 2:
        labels = ("Parent A (recipient: edit this one)", "Parent B (donor of the technique)")
    told = [feedback, *(others.get(str(c.id), ()) for c in decision.parents[1:])]
    return tuple(_parent_view(label, c, config, items) for label, c, items in zip(labels, decision.parents, told))


def _parent_view(label: str, candidate: Candidate, config: AlphaEvolveConfig, told: Sequence[str]) -> ParentView:
    """Returns one parent's display form."""
    shown = program_view(candidate)
    block = data_block(f"Last execution output of candidate {candidate.id}", told, bullets=False)
    return ParentView(candidate, shown.fitness, shown.fence, shown.code, label=label,
                      island=_island_text(candidate.island, config), feedback=block)


def _island_text(index: int | None, config: AlphaEvolveConfig) -> str:
    """Returns an island as "<index> — <name>", the bare index when not configured, or "none"."""
    if index is None:
        return "none"
    island = find_island(config, index)
    return f"{index} — {island.name}" if island else str(index)


def _island_views(decision: Decision, config: AlphaEvolveConfig) -> tuple[IslandView, ...]:
    """Returns the configured islands plus any island the parents or the child use that is not configured."""
    shown = {i.index: IslandView(i.index, i.name, i.description, i.index == decision.island) for i in config.islands}
    # An island the LLM opened earlier is named by its members' first feature-cell bucket.
    names = {p.island: p.cell[0] for p in decision.parents if p.cell}
    used = {p.island for p in decision.parents} | {decision.island}
    for index in sorted(i for i in used if i is not None and i not in shown):
        fallback = "new island: name its family in your reply" if index == decision.island else "opened earlier"
        shown[index] = IslandView(index, names.get(index, fallback), "", index == decision.island)
    return tuple(shown[i] for i in sorted(shown))
