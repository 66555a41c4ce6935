"""The metric's direction: what the frontmatter and the `## Evaluation` prose say, and why `check` cannot read it.

Read as upstream autoloop reads it: `metric_direction:` (or `metric-direction:`) in the frontmatter, else a
`Higher is better.` / `Lower is better.` sentence under `## Evaluation`. Nothing else is guessed: a sentence
such as `Lowr is better.`, two sentences that disagree, or no direction at all is a problem `check` refuses.
`run` keeps upstream's default (`higher`) for such a program and warns with the same sentence.

A sentence is about the metric unless it names something else: `cost ... (lower is better)` speaks of `cost`,
so under `objectives:` it is checked against `cost`'s direction and never against the metric's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError
from autoloop_py.program.objectives import DIRECTIONS, Objective

_SAYS_RE = re.compile(r"\b([A-Za-z][\w-]*)\s+is\s+better\b", re.IGNORECASE)
# Where a sentence ends: a full stop before a blank, a blank line, or the next list item.
_SENTENCE_END_RE = re.compile(r"[.!?](?=\s)|\n\s*\n|\n\s*(?:[-*+]|\d+[.)])\s")
_CODE_NAME_RE = re.compile(r"`([A-Za-z_][\w.-]*)`")
# `lower is better for `cost``: the name right after the saying is its subject.
_FOR_RE = re.compile(r"\s*(?:for|of|on|in)\s+(?:the\s+)?`?([A-Za-z_][\w.-]*)`?")
_FIX = ("write `Higher is better.` or `Lower is better.` under `## Evaluation`, or `metric_direction: higher` "
        "(or `lower`) in the frontmatter")


@dataclass(frozen=True)
class Reading:
    """What a program says about its metric's direction.

    Attributes:
      direction: "higher" or "lower", or None when the program does not say it readably.
      problem: why `check` refuses the program's direction (None when it is clear).
    """

    direction: str | None
    problem: ProgramError | None = None


@dataclass(frozen=True)
class Saying:
    """One `<word> is better` of the Evaluation prose.

    Attributes:
      word: the word before `is better`, as written.
      line: its 1-based line in program.md.
      subject: the metric name its sentence gives it (None: the sentence names none, so it is the metric's).
    """

    word: str
    line: int
    subject: str | None


def read_direction(
    frontmatter: str | None,
    frontmatter_line: int | None,
    section: md.Section | None,
    rel: Path,
    metric: str | None = None,
    objectives: Sequence[Objective] = (),
    objectives_line: int | None = None,
) -> Reading:
    """Returns the direction the frontmatter value (if readable) or else the Evaluation prose gives, and any problem.

    frontmatter: the frontmatter's readable direction (None when absent or unreadable); frontmatter_line: the
    line of its key when it is written at all. metric and objectives: the names a sentence may speak of; only the
    sentences about the metric (or naming nothing) decide its direction, and a sentence about an objective must
    agree with the objective's declared direction (objectives_line: the line of `objectives:`).
    """
    sayings = sayings_of(section, [name for name in (metric, *(o.name for o in objectives)) if name])
    against = _objective_disagreement(sayings, objectives, rel, objectives_line)
    own = [s for s in sayings if s.subject is None or s.subject == metric]
    reading = _metric_reading(frontmatter, frontmatter_line, own, section, rel)
    return reading if reading.problem is not None or against is None else Reading(reading.direction, against)


def _metric_reading(
    frontmatter: str | None, frontmatter_line: int | None, sayings: list[Saying], section: md.Section | None, rel: Path
) -> Reading:
    """Returns the metric's direction from the frontmatter, else from the sayings about the metric."""
    readable = [s for s in sayings if s.word.lower() in DIRECTIONS]
    if frontmatter is not None:
        against = next((s for s in readable if s.word.lower() != frontmatter), None)
        if against is None:
            return Reading(frontmatter)
        message = (f"the frontmatter says `metric_direction: {frontmatter}` but line {against.line} says "
                   f"`{against.word} is better`; make them agree")
        return Reading(frontmatter, ProgramError(message, rel, frontmatter_line))
    kinds = sorted({s.word.lower() for s in readable})
    if len(kinds) == 1:
        return Reading(kinds[0])
    if len(kinds) == 2:
        first = readable[0]
        second = next(s for s in readable if s.word.lower() != first.word.lower())
        message = f"`{first.word} is better` and line {second.line} `{second.word} is better` disagree; keep one"
        return Reading(None, ProgramError(message, rel, first.line))
    if sayings:
        message = f"cannot read the metric's direction from `{sayings[0].word} is better`: {_FIX}"
        return Reading(None, ProgramError(message, rel, sayings[0].line))
    where = frontmatter_line if frontmatter_line is not None else (section.start + 1 if section else None)
    what = "an unreadable `metric_direction`" if frontmatter_line is not None else "no metric direction"
    return Reading(None, ProgramError(f"{what} (run would assume higher is better): {_FIX}", rel, where))


def _objective_disagreement(
    sayings: list[Saying], objectives: Sequence[Objective], rel: Path, line: int | None
) -> ProgramError | None:
    """Returns the problem of the first sentence that gives an objective the other direction than `objectives:`."""
    declared = {o.name: o.direction for o in objectives}
    for saying in sayings:
        word = saying.word.lower()
        if saying.subject in declared and word in DIRECTIONS and word != declared[saying.subject]:
            message = (f"the frontmatter's `objectives:` says `{saying.subject}: {declared[saying.subject]}` but line "
                       f"{saying.line} says `{saying.word} is better` of `{saying.subject}`; make them agree")
            return ProgramError(message, rel, line)
    return None


def sayings_of(section: md.Section | None, names: Sequence[str] = ()) -> list[Saying]:
    """Returns each `<word> is better` of the section with its line and the name its sentence gives it.

    The subject is a name written right after it (`lower is better for `cost``), else the nearest name before
    it in its sentence, else the first after it; a name is any `backticked` one, or one of names written bare.
    """
    if section is None:
        return []
    text = section.text
    bare = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b") if names else None
    found: list[Saying] = []
    for match in _SAYS_RE.finditer(text):
        start, end = _sentence(text, match.start(), match.end())
        line = section.start + 1 + text[: match.start()].count("\n")
        found.append(Saying(match.group(1), line, _subject(text, start, end, match, bare)))
    return found


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """Returns the bounds of the sentence holding text[start:end]."""
    before = [m.end() for m in _SENTENCE_END_RE.finditer(text, 0, start)]
    after = _SENTENCE_END_RE.search(text, end)
    return (before[-1] if before else 0), (after.start() if after else len(text))


def _subject(text: str, start: int, end: int, saying: re.Match[str], bare: re.Pattern[str] | None) -> str | None:
    """Returns the name the sentence text[start:end] gives the saying (None when it names none)."""
    following = _FOR_RE.match(text, saying.end(), end)
    names = [(m.start(), m.group(1)) for m in _CODE_NAME_RE.finditer(text, start, end)]
    if bare is not None:
        names += [(m.start(), m.group(1)) for m in bare.finditer(text, start, end)]
    if following is not None and any(name == following.group(1) for _, name in names):
        return following.group(1)
    before = [(at, name) for at, name in names if at < saying.start()]
    if before:
        return max(before)[1]
    after = sorted((at, name) for at, name in names if at >= saying.end())
    return after[0][1] if after else None
