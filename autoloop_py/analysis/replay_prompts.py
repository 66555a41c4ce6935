"""Same-prompt replay, prompt variants: the saved prompt re-sent as it was, or changed in one named way.

`exact` re-sends it unchanged; `strict_diff` asks for SEARCH/REPLACE blocks only; `no_other_context` and
`no_history` cut the sections that show other programs or earlier attempts; `alternate_context` shows other
earlier programs of the run in place of the context programs. Sections are found by their markdown headings:
those of autoloop's own prompts and EvoTrace's markers (`# Program Generation History`, `## Other Context
Solutions`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import takewhile
from typing import Collection, Sequence

from autoloop_py.markdown import Heading, headings, normalize_heading
from autoloop_py.program.edits import EditFailure
from autoloop_py.render import render
from autoloop_py.strategies.prompt import fence_for

EXACT = "exact"
VARIANTS = ("exact", "strict_diff", "no_other_context", "no_history", "alternate_context")
# Headings whose sections show programs other than the parent (AdaEvolve, EvoX, OpenEvolve-style traces).
CONTEXT_HEADINGS = ("Other programs for inspiration", "Context programs", "Other Context Solutions")
# Headings whose sections show earlier attempts (default flow, EvoX, AdaEvolve, OpenEvolve-style traces).
HISTORY_HEADINGS = ("Recent history", "Previous attempts", "Earlier children of this parent",
                    "Program Generation History")
_CANDIDATE = re.compile(r"^Candidate\s+(\S+)")


@dataclass(frozen=True)
class VariantPrompt:
    """The prompt one variant re-sends.

    Attributes:
        variant: the variant's name.
        system: the system prompt.
        user: the user prompt, changed as the variant says.
        change: what the variant changed, in one line ('' for exact).
        skipped: why the variant does not apply to this prompt (then nothing is re-sent), else None.
    """

    variant: str
    system: str
    user: str
    change: str = ""
    skipped: str | None = None


@dataclass(frozen=True)
class ContextProgram:
    """A program of the run that can stand in for a context program.

    Attributes:
        id: its row id.
        iteration: its iteration_found.
        score: its primary score.
        source: its full source.
        approach: its one-line description ('' when none was recorded).
        language: the fence's info string.
    """

    id: str
    iteration: int
    score: float
    source: str
    approach: str = ""
    language: str = "python"


@dataclass(frozen=True)
class _Span:
    """Lines [start, end) of a prompt under one heading."""

    heading: Heading
    start: int
    end: int


def vary(variant: str, system: str, user: str, parent_score: float | None = None,
         pool: Sequence[ContextProgram] = ()) -> VariantPrompt:
    """Returns the prompt a variant re-sends; pool holds the stand-ins `alternate_context` may show."""
    if variant == EXACT:
        return VariantPrompt(variant, system, user)
    if variant == "strict_diff":
        return VariantPrompt(variant, system, user.rstrip("\n") + "\n" + render("replay_strict_diff.md.j2"),
                             "asked for SEARCH/REPLACE blocks only")
    if variant == "no_other_context":
        return _cut(variant, system, user, CONTEXT_HEADINGS, "other programs' context")
    if variant == "no_history":
        return _cut(variant, system, user, HISTORY_HEADINGS, "earlier attempts")
    if variant == "alternate_context":
        return alternate_context(system, user, parent_score, pool)
    raise ValueError(f"unknown replay variant {variant!r}; use one of {', '.join(VARIANTS)}")


def _cut(variant: str, system: str, user: str, names: Sequence[str], what: str) -> VariantPrompt:
    """Returns the prompt without the sections headed by one of names, or skipped when it has none."""
    spans = sections(user, names)
    if not spans:
        looked = ", ".join(f"'{name}'" for name in names)
        return VariantPrompt(variant, system, user, skipped=f"the prompt has no section of {what} (headings {looked})")
    cut = ", ".join(f"'{span.heading.text}'" for span in spans)
    return VariantPrompt(variant, system, without(user, spans), f"cut {cut}")


def sections(text: str, names: Sequence[str]) -> list[_Span]:
    """Returns the spans of the sections headed by one of names (nested matches fold into their outer one)."""
    wanted = {normalize_heading(name) for name in names}
    found = headings(text)
    spans: list[_Span] = []
    for index, heading in enumerate(found):
        if normalize_heading(heading.text) in wanted and not any(s.start <= heading.line < s.end for s in spans):
            spans.append(_Span(heading, heading.line, _end(found, index, len(text.splitlines()))))
    return spans


def _end(found: Sequence[Heading], index: int, total: int) -> int:
    """Returns the line where the section of found[index] ends: the next heading of its level or above."""
    level = found[index].level
    return next((h.line for h in found[index + 1:] if h.level <= level), total)


def without(text: str, spans: Sequence[_Span]) -> str:
    """Returns text without the lines of the spans."""
    lines = text.splitlines(keepends=True)
    return "".join(line for number, line in enumerate(lines) if not any(s.start <= number < s.end for s in spans))


def alternate_context(system: str, user: str, parent_score: float | None,
                      pool: Sequence[ContextProgram]) -> VariantPrompt:
    """Returns the prompt with each context program replaced by a pool program closest in score to the parent."""
    variant = "alternate_context"
    shown = [span for section in sections(user, CONTEXT_HEADINGS) for span in _programs(user, section)]
    if not shown:
        return VariantPrompt(variant, system, user, skipped="the prompt shows no context programs (no 'Candidate …' "
                             f"heading under {', '.join(repr(n) for n in CONTEXT_HEADINGS)})")
    shown_ids = {_shown_id(span) for span in shown}
    stand_ins = closest(pool, parent_score, len(shown), exclude=shown_ids)
    if not stand_ins:
        return VariantPrompt(
            variant, system, user, skipped="no earlier program of the run can stand in for the context"
        )
    text = _replace(user, shown, stand_ins)
    names = ", ".join(_shown_id(span) for span in shown)
    change = f"showed {', '.join(p.id for p in stand_ins)} instead of {names}"
    if len(stand_ins) < len(shown):
        change += f" (only {len(stand_ins)} earlier programs; the rest were cut)"
    return VariantPrompt(variant, system, text, change)


def _programs(text: str, section: _Span) -> list[_Span]:
    """Returns the spans of the `Candidate …` subsections of a section."""
    found = headings(text)
    return [
        _Span(heading, heading.line, min(_end(found, index, len(text.splitlines())), section.end))
        for index, heading in enumerate(found)
        if section.start < heading.line < section.end and _CANDIDATE.match(heading.text)
    ]


def _shown_id(span: _Span) -> str:
    match = _CANDIDATE.match(span.heading.text)
    return match.group(1) if match else span.heading.text


def closest(pool: Sequence[ContextProgram], score: float | None, count: int,
            exclude: Collection[str] = ()) -> list[ContextProgram]:
    """Returns up to count pool programs closest in score to `score` (the latest first on ties)."""
    usable = [p for p in pool if p.id not in exclude]
    return sorted(usable, key=lambda p: (0.0 if score is None else abs(p.score - score), -p.iteration, p.id))[:count]


def _replace(text: str, shown: Sequence[_Span], stand_ins: Sequence[ContextProgram]) -> str:
    """Returns text with the i-th shown program rendered as the i-th stand-in (shown programs beyond them cut)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    cursor = 0
    for number, span in enumerate(shown):
        out.extend(lines[cursor:span.start])
        if number < len(stand_ins):
            trailing = "".join(takewhile(lambda line: not line.strip(), reversed(lines[span.start:span.end])))
            out.append(_render_program(stand_ins[number], span.heading.level) + trailing)
        cursor = span.end
    out.extend(lines[cursor:])
    return "".join(out)


def _render_program(program: ContextProgram, level: int) -> str:
    """Returns a stand-in program in the form the strategy prompts show context programs."""
    code = program.source if program.source.endswith("\n") else program.source + "\n"
    view = {"id": program.id, "fitness": f"{program.score:.6g}", "approach": program.approach.strip(),
            "fence": fence_for(code), "language": program.language, "code": code}
    return render("replay_context_program.md.j2", program=view, level=level)


def retry_prompt(user: str, reply: str, parse_error: str | None = None, failures: Sequence[EditFailure] = (),
                 eval_error: str | None = None) -> str:
    """Returns the prompt of a retry: the prompt, the failed reply, and why it failed (unreadable,
    edits, evaluation)."""
    shown = tuple(replace(f, nearest_lines=_with_newline(f.nearest_lines)) for f in failures)
    reply_text = _with_newline(reply)
    quoted = "\n".join([reply_text, parse_error or "", eval_error or "", *(f.nearest_lines for f in shown)])
    return render("replay_retry.md.j2", prompt=user.rstrip("\n"), reply=reply_text, fence=fence_for(quoted),
                  parse_error=parse_error, failures=shown, eval_error=eval_error or "the evaluation failed")


def _with_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"
