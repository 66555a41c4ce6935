"""The tune proposer: an offline, seeded local search over numeric literals of Python Target files.

No model and no network: each proposal nudges one to three numbers inside the EVOLVE-BLOCK
(the whole file when it has no markers), chosen by the same knob rules as `autoloop tune`, so
structure (indices, slices, shapes, range offsets, `# autoloop: fixed` lines) is never touched.
Floats move on a log scale, ints by small steps that never cross zero, so a literal keeps its type
and sign and the file stays valid Python.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
from dataclasses import dataclass

from autoloop_py.analysis.tuning import split_lines, tunable_literals
from autoloop_py.proposers.base import Proposal, ProposalRequest

logger = logging.getLogger(__name__)

NO_LITERALS = "no numeric literals to tune in the EVOLVE-BLOCK"
_NAMED_WEIGHT = 3.0
_LOG_SIGMA = 0.5


@dataclass(frozen=True)
class Literal:
    """A numeric literal that may be tuned.

    Attributes:
      path: the file it is in.
      start: character offset of its first character (a unary minus included).
      end: character offset one past its last character.
      text: its source text.
      value: its value (int or float; a unary minus makes it negative).
      name: the variable, keyword, parameter or call argument it is (analysis/tuning.py names it), if any.
      line: 1-based line.
    """

    path: str
    start: int
    end: int
    text: str
    value: int | float
    name: str | None
    line: int

    @property
    def label(self) -> str:
        """Returns how a summary names the literal."""
        return self.name or f"line {self.line}"


class TuneProposer:
    """Proposes candidates by perturbing numeric literals; needs no model or key."""

    name = "tune"

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        """Returns a candidate with one to three literals perturbed, or a failure when there are none."""
        literals = [lit for path in sorted(request.files) if path.endswith(".py")
                    for lit in find_literals(path, request.files[path])]
        if not literals:
            return Proposal({}, "tune: nothing to tune", failure=NO_LITERALS)
        chosen = _weighted_sample(literals, rng.randint(1, min(3, len(literals))), rng)
        changes = [(lit, _new_text(lit, rng)) for lit in sorted(chosen, key=lambda c: (c.path, c.start))]
        files = {path: _rewrite(request.files[path], [c for c in changes if c[0].path == path])
                 for path in sorted({lit.path for lit, _ in changes})}
        several = len({lit.path for lit in literals}) > 1  # then each label names its file
        parts = [f"{f'{lit.path} ' if several else ''}{lit.label} {lit.text}→{new}" for lit, new in changes]
        return Proposal(files, "tune: " + ", ".join(parts))


def find_literals(path: str, text: str) -> list[Literal]:
    """Returns the tunable numeric literals of a Python file under `autoloop tune`'s knob rules.

    Only inside the EVOLVE-BLOCK (anywhere without one), never on a `# autoloop: fixed` line, and never
    an index, slice, shape, range offset, seed, exponent, zero or problem constant (analysis/tuning.py).
    """
    starts = list(itertools.accumulate((len(line) for line in split_lines(text)), initial=0))  # each line's offset
    found: list[Literal] = []
    for literal, name in tunable_literals(text):
        digits = literal.text.lstrip("+-").strip().lower()
        if "_" in digits or digits.startswith(("0x", "0o", "0b")):  # only plain decimal ints and floats
            continue
        begin = starts[literal.line - 1] + literal.col
        end = starts[literal.line - 1] + literal.end_col
        found.append(Literal(path, begin, end, literal.text, literal.value, name, literal.line))
    return found


def _weighted_sample(literals: list[Literal], count: int, rng: random.Random) -> list[Literal]:
    """Returns count distinct literals, named ones (likely parameters) more often."""
    pool = list(literals)
    chosen: list[Literal] = []
    for _ in range(count):
        weights = [_NAMED_WEIGHT if lit.name else 1.0 for lit in pool]
        pick = rng.choices(range(len(pool)), weights=weights)[0]
        chosen.append(pool.pop(pick))
    return chosen


def perturb(value: int | float, rng: random.Random) -> int | float:
    """Returns a nearby value of the same type and sign (floats on a log scale, ints by small steps)."""
    if isinstance(value, int):
        # Moved by ±1..±max(1, 20% of |value|), staying on its side of zero.
        step = rng.randint(1, max(1, int(abs(value) * 0.2)))
        moved = value + rng.choice((-1, 1)) * step
        if (moved > 0) != (value > 0) or moved == 0:
            # A step across zero would flip the sign (an empty range, a reversed loop): step away instead.
            moved = value + step if value > 0 else value - step
        return moved
    if value == 0:
        return rng.choice((-1.0, 1.0)) * 10 ** rng.uniform(-3.0, -1.0)
    return value * math.exp(rng.gauss(0.0, _LOG_SIGMA))


def format_number(value: int | float) -> str:
    """Returns compact source text for a value; a float always reads back as a float."""
    if isinstance(value, int):
        return str(value)
    text = f"{value:.6g}"
    return text if any(ch in text for ch in ".en") else text + ".0"


def _new_text(literal: Literal, rng: random.Random) -> str:
    """Returns the source text of a fresh perturbation that differs from the literal's text."""
    for _ in range(8):
        value = perturb(literal.value, rng)
        text = format_number(value)
        if text != literal.text and math.isfinite(value):
            return text
    return literal.text


def _rewrite(text: str, changes: list[tuple[Literal, str]]) -> str:
    """Returns text with each literal's span replaced by its new text."""
    for literal, new in sorted(changes, key=lambda c: c[0].start, reverse=True):
        text = text[: literal.start] + new + text[literal.end :]
    return text
