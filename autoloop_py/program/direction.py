"""The metric's direction: what the frontmatter and the `## Evaluation` prose say, and why `check` cannot read it.

Read as upstream autoloop reads it: `metric_direction:` (or `metric-direction:`) in the frontmatter, else a
`Higher is better.` / `Lower is better.` sentence under `## Evaluation`. Nothing else is guessed: a sentence
such as `Lowr is better.`, two sentences that disagree, or no direction at all is a problem `check` refuses.
`run` keeps upstream's default (`higher`) for such a program and warns with the same sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError

_SAYS_RE = re.compile(r"\b([A-Za-z][\w-]*)\s+is\s+better\b", re.IGNORECASE)
_READABLE = ("higher", "lower")
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


def read_direction(
    frontmatter: str | None, frontmatter_line: int | None, section: md.Section | None, rel: Path
) -> Reading:
    """Returns the direction the frontmatter value (if readable) or else the Evaluation prose gives, and any problem.

    frontmatter: the frontmatter's readable direction (None when absent or unreadable); frontmatter_line: the
    line of its key when it is written at all.
    """
    sayings = _sayings(section)
    readable = [(word, line) for word, line in sayings if word.lower() in _READABLE]
    if frontmatter is not None:
        against = next(((w, n) for w, n in readable if w.lower() != frontmatter), None)
        if against is None:
            return Reading(frontmatter)
        message = (f"the frontmatter says `metric_direction: {frontmatter}` but line {against[1]} says "
                   f"`{against[0]} is better`; make them agree")
        return Reading(frontmatter, ProgramError(message, rel, frontmatter_line))
    kinds = sorted({word.lower() for word, _ in readable})
    if len(kinds) == 1:
        return Reading(kinds[0])
    if len(kinds) == 2:
        first, second = readable[0], next(r for r in readable if r[0].lower() != readable[0][0].lower())
        message = f"`{first[0]} is better` and line {second[1]} `{second[0]} is better` disagree; keep one"
        return Reading(None, ProgramError(message, rel, first[1]))
    if sayings:
        word, line = sayings[0]
        message = f"cannot read the metric's direction from `{word} is better`: {_FIX}"
        return Reading(None, ProgramError(message, rel, line))
    where = frontmatter_line if frontmatter_line is not None else (section.start + 1 if section else None)
    what = "an unreadable `metric_direction`" if frontmatter_line is not None else "no metric direction"
    return Reading(None, ProgramError(f"{what} (run would assume higher is better): {_FIX}", rel, where))


def _sayings(section: md.Section | None) -> list[tuple[str, int]]:
    """Returns each `<word> is better` of the section with its 1-based line in program.md."""
    if section is None:
        return []
    return [(found.group(1), section.start + 1 + section.text[: found.start()].count("\n"))
            for found in _SAYS_RE.finditer(section.text)]
