"""EvoX's prompts: the solution prompt, the label-texts request, the meta rewrite, and reading their replies (§3.4)."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from autoloop_py import markdown as md
from autoloop_py.program.model import Program
from autoloop_py.render import render
from autoloop_py.state.population import Candidate, format_fitness, oriented
from autoloop_py.strategies import pareto
from autoloop_py.strategies.evox.config import EvoXConfig
from autoloop_py.strategies.evox.markdown import raw_text
from autoloop_py.strategies.evox.strategy import EvoXDecision, EvoXState, LabelTexts, StrategyRecord
from autoloop_py.strategies.evox.worker import ALLOWED_MODULES
from autoloop_py.strategies.prompt import (
    EVALUATOR_FEEDBACK,
    DataBlock,
    ProgramView,
    SolutionView,
    Steering,
    data_block,
    fence_for,
    program_view,
    solution_fields,
    with_newline,
)

TOP_K = 5
ERROR_TAIL = 800
_BULLET_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(\S.*?)\s*$")
_SUMMARY_RE = re.compile(r"^\s*SUMMARY:\s*(.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class EvoXPromptView(SolutionView):
    """The one object `evox_prompt.md.j2` renders: the shared solution fields and EvoX's own.

    Attributes:
      decision: the attempt being carried out.
      label_text: the label's `## IMPORTANT` text ('' for the free-form label).
      parent: the parent, or None for a from-scratch iteration.
      previous: the best earlier programs, with their outcome against their parent.
      context: the context programs the strategy chose.
      error: the previous attempt's failure, fenced as data (None on the first attempt).
      diff: ask for SEARCH/REPLACE edits (else a full rewrite).
      objectives: the Pareto objectives' paragraph, with the parent's values and front ('' without objectives).
    """

    decision: EvoXDecision
    label_text: str
    parent: ProgramView | None
    previous: tuple[ProgramView, ...]
    context: tuple[ProgramView, ...]
    error: DataBlock | None
    diff: bool
    objectives: str = ""


# ---------------------------------------------------------------- the solution prompt


def render_prompt(
    decision: EvoXDecision,
    config: EvoXConfig,
    *,
    program: Program,
    population: Sequence[Candidate],
    files: Mapping[str, str],
    framing: str,
    best_metric: float | None,
    steering: Steering = Steering(),
    problem: str = "",
    feedback: Sequence[str] = (),
) -> str:
    """Returns the solution prompt: previous attempts, context programs, evaluator feedback, the current solution.

    feedback: what evaluations said of the parent and its latest attempts, shown after the context programs and
    before `# Current Solution`, where the reference's prompt has its evaluator feedback (strategies.md §3.2).
    """
    fields = solution_fields(program, files, best_metric, framing, steering, problem)
    state = decision.state
    label_text = {"diverge": state.diverge_label, "refine": state.refine_label}.get(decision.label, "")
    view = EvoXPromptView(
        **{**fields, "data": (*fields["data"], *_feedback_block(feedback))},
        decision=decision, label_text=label_text.strip(),
        parent=None if decision.parent is None else program_view(decision.parent),
        previous=previous_attempts(population, config),
        context=tuple(program_view(c) for c in decision.context),
        error=_error_block(decision.previous_error), diff=config.diff_based_generation,
        objectives=pareto.prompt_section(config.objectives, decision.parent),
    )
    return render("evox_prompt.md.j2", view=view)


def previous_attempts(population: Sequence[Candidate], config: EvoXConfig) -> tuple[ProgramView, ...]:
    """Returns the best `num_previous_attempts` evaluated programs, best first, with their outcome."""
    by_id = {c.id: c for c in population}
    scored = [c for c in population if c.status != "error" and oriented(c.fitness, config.direction) is not None]
    scored.sort(key=lambda c: (-(oriented(c.fitness, config.direction) or 0.0), c.id))
    return tuple(program_view(c, _outcome(c, by_id, config.direction)) for c in scored[: config.num_previous_attempts])


def _outcome(candidate: Candidate, by_id: Mapping[int, Candidate], direction: str) -> str:
    parent = by_id.get(candidate.parents[0]) if candidate.parents else None
    mine, theirs = oriented(candidate.fitness, direction), oriented(parent.fitness, direction) if parent else None
    if mine is None or theirs is None:
        return "no parent to compare with"
    if mine > theirs:
        return f"improved on its parent #{parent.id if parent else '?'}"
    if mine < theirs:
        return f"regressed from its parent #{parent.id if parent else '?'}"
    return "no change from its parent"


def _feedback_block(feedback: Sequence[str]) -> tuple[DataBlock, ...]:
    """Returns the evaluator feedback as a data block (none when there is none)."""
    block = data_block(EVALUATOR_FEEDBACK, feedback, bullets=False)
    return (block,) if block is not None else ()


def _error_block(error: str) -> DataBlock | None:
    """Returns the previous attempt's failure as data: its first line and the last ERROR_TAIL characters."""
    text = error.strip()
    if not text:
        return None
    if len(text) > ERROR_TAIL:
        text = text.splitlines()[0][:200] + "\n…\n" + text[-ERROR_TAIL:]
    return data_block("The previous attempt failed", [text], bullets=False)


def label_texts(diverge: Sequence[str] = (), refine: Sequence[str] = (), source: str = "default") -> LabelTexts:
    """Returns the DIVERGE/REFINE texts with the given examples (our default texts when there are none)."""
    return LabelTexts(
        render("evox_label.md.j2", kind="diverge", examples=list(diverge)).strip(),
        render("evox_label.md.j2", kind="refine", examples=list(refine)).strip(),
        source,
    )


def render_labels_prompt(program: Program, evaluator: str, framing: str, problem: str = "") -> str:
    """Returns the guide LLM's request for DIVERGE and REFINE examples for this problem."""
    evaluator = with_newline(evaluator.strip())
    view = {
        "program": program.name, "goal": program.goal.strip(), "problem": problem,
        "metric": program.metric, "direction": program.direction,
        "evaluator": evaluator, "evaluator_fence": fence_for(evaluator),
        "framing": with_newline(framing.strip()), "framing_fence": fence_for(framing),
    }
    return render("evox_labels_prompt.md.j2", view=view)


def parse_labels_reply(reply: str) -> LabelTexts | None:
    """Returns the label texts built from a reply's two example lists (None when either list is missing)."""
    sections: dict[str, list[str]] = {"diverge": [], "refine": []}
    current: str | None = None
    for line in reply.splitlines():
        if line.lstrip().startswith("#"):
            upper = line.upper()
            current = "diverge" if "DIVERGE" in upper else "refine" if "REFINE" in upper else None
            continue
        bullet = _BULLET_RE.match(line)
        if current is not None and bullet:
            sections[current].append(bullet.group(1))
    if not sections["diverge"] or not sections["refine"]:
        return None
    return label_texts(sections["diverge"][:6], sections["refine"][:5], "generated")


# ---------------------------------------------------------------- the meta rewrite


def render_meta_prompt(
    state: EvoXState,
    config: EvoXConfig,
    *,
    program: Program,
    population: Sequence[Candidate],
    parent: StrategyRecord,
    references: Sequence[StrategyRecord],
    framing: str,
    problems: Sequence[str] = (),
    problem: str = "",
    notes: Sequence[str] = (),
) -> str:
    """Returns the meta LLM's request for a full rewrite of the strategy that scores J best so far."""
    view = {
        "program": program.name, "goal": program.goal.strip(), "direction": program.direction, "problem": problem,
        "notes": [n for n in notes if n], "metric": program.metric,
        "horizon": state.switch_interval, "threshold": config.improvement_threshold,
        "num_context": config.num_context_programs, "allowed": ALLOWED_MODULES,
        "start": raw_text(state.window_start_score, config.direction),
        "stats": population_stats(population, config.direction),
        "parent": strategy_view(parent, state, config.direction),
        "references": [strategy_view(r, state, config.direction) for r in references],
        "framing": with_newline(framing.strip()), "framing_fence": fence_for(framing),
        "problems": [p for p in problems if p.strip()],
    }
    return render("evox_meta_prompt.md.j2", view=view)


def strategy_view(record: StrategyRecord, state: EvoXState, direction: str) -> dict[str, Any]:
    """Returns a strategy as the meta prompt shows it: J, window, score change and source."""
    code = with_newline(record.code)
    end = record.window_end
    return {
        "id": record.id, "j": "not scored yet" if record.j is None else f"{record.j:.4f}",
        "window": "—" if record.window_start is None else f"{record.window_start}–{end if end is not None else '…'}",
        "change": f"{raw_text(record.start_score, direction)} → {raw_text(record.end_score, direction)}",
        "status": record.status, "code": code, "fence": fence_for(code),
    }


def population_stats(population: Sequence[Candidate], direction: str) -> dict[str, Any]:
    """Returns the population's state in numbers: size, quartiles, top programs, labels used, no-improvement streak."""
    scored = sorted((c for c in population if c.status != "error" and c.fitness is not None), key=lambda c: c.gen)
    values = [oriented(c.fitness, direction) or 0.0 for c in scored]
    quartiles = statistics.quantiles(values, n=4, method="inclusive") if len(values) >= 2 else values * 3
    top = sorted(scored, key=lambda c: (-(oriented(c.fitness, direction) or 0.0), c.id))[:TOP_K]
    labels = Counter(_label(c) for c in population)
    return {
        "size": len(population), "errors": sum(1 for c in population if c.status == "error"),
        "quartiles": [f"{q if direction == 'higher' else -q:.6g}" for q in quartiles[:3]],
        "top": [(c.id, format_fitness(c.fitness), _label(c), ", ".join(f"#{p}" for p in c.parents) or "—")
                for c in top],
        "labels": sorted(labels.items()), "streak": _streak(scored, values),
    }


def _label(candidate: Candidate) -> str:
    return next((v for k, v in candidate.extra if k == "Label"), "none")


def _streak(scored: Sequence[Candidate], values: Sequence[float]) -> int:
    """Returns the iterations since the best last rose (0 with no programs)."""
    if not scored:
        return 0
    best, at = values[0], scored[0].gen
    for candidate, value in zip(scored, values):
        if value > best:
            best, at = value, candidate.gen
    return scored[-1].gen - at


def meta_code(reply: str) -> str | None:
    """Returns the last python block of a meta reply (None when it has none)."""
    blocks = [code for info, code, _ in md.fenced_code(reply) if info.split()[:1] in ([], ["python"], ["py"])]
    return blocks[-1] if blocks else None


def meta_summary(reply: str) -> str:
    """Returns the reply's SUMMARY line (else its first prose line), cut to 200 characters."""
    found = _SUMMARY_RE.search(reply)
    if found:
        return found.group(1)[:200]
    prose = next((line.strip() for line in reply.splitlines() if line.strip() and not line.startswith("```")), "")
    return " ".join(prose.split())[:200]
