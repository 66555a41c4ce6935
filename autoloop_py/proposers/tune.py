"""The tune proposer: an offline, seeded local search over numeric literals of Python Target files.

No model and no network: each proposal nudges one to three numbers inside the EVOLVE-BLOCK
(the whole file when it has no markers). Floats move on a log scale, ints by small steps that
never cross zero, so a literal keeps its type and sign and the file stays valid Python.
"""

from __future__ import annotations

import ast
import io
import keyword
import logging
import math
import random
import tokenize
from dataclasses import dataclass
from typing import Iterator, Sequence

from autoloop_py.edits import evolve_regions
from autoloop_py.proposers.base import Proposal, ProposalRequest

logger = logging.getLogger(__name__)

NO_LITERALS = "no numeric literals to tune in the EVOLVE-BLOCK"
_NAMED_WEIGHT = 3.0
_LOG_SIGMA = 0.5
_VALUE_END_KEYWORDS = {"True", "False", "None"}
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


@dataclass(frozen=True)
class Literal:
    """A numeric literal that may be tuned.

    Attributes:
      path: the file it is in.
      start: character offset of its first character (a unary minus included).
      end: character offset one past its last character.
      text: its source text.
      value: its value (int or float; a unary minus makes it negative).
      name: the variable, attribute, keyword or parameter it is assigned to, if it is the whole value.
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
        several = len({lit.path for lit in literals}) > 1
        parts = [f"{_label(lit, several)} {lit.text}→{new}" for lit, new in changes]
        return Proposal(files, "tune: " + ", ".join(parts))


def find_literals(path: str, text: str) -> list[Literal]:
    """Returns the tunable numeric literals of a Python file inside its EVOLVE-BLOCK (or anywhere without one)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as err:
        logger.info("tune: skipping %s: it does not tokenize (%s)", path, err)
        return []
    regions = evolve_regions(text)
    offsets = _line_offsets(text)
    names = _assigned_names(text)
    found: list[Literal] = []
    for index, start in _tunable_numbers(tokens):
        token = tokens[index]
        if regions and not any(a <= token.start[0] - 1 < b for a, b in regions):
            continue
        begin = offsets[start.start[0] - 1] + start.start[1]
        end = offsets[token.end[0] - 1] + token.end[1]
        value = _value(text[begin:end])
        if value is None:
            continue
        name = names.get(start.start)
        found.append(Literal(path, begin, end, text[begin:end], value, name, token.start[0]))
    return found


def _tunable_numbers(tokens: Sequence[tokenize.TokenInfo]) -> Iterator[tuple[int, tokenize.TokenInfo]]:
    """Yields (index of a plain NUMBER token, token where its literal starts: a unary minus or itself)."""
    brackets: list[str] = []
    fstrings = 0
    for i, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            brackets.append("index" if token.string == "[" and _ends_value(tokens, _previous(tokens, i)) else "other")
        elif token.type == tokenize.OP and token.string in ")]}" and brackets:
            brackets.pop()
        elif _FSTRING_START is not None and token.type in (_FSTRING_START, _FSTRING_END):
            fstrings += 1 if token.type == _FSTRING_START else -1
        elif token.type == tokenize.NUMBER and not fstrings and not (brackets and brackets[-1] == "index"):
            # Subscript numbers are positions, not parameters: nudging them only breaks indexing.
            if _plain_number(token.string):
                yield i, _sign_start(tokens, i)


def _sign_start(tokens: Sequence[tokenize.TokenInfo], index: int) -> tokenize.TokenInfo:
    """Returns the unary minus before the number at index, or the number itself."""
    before = _previous(tokens, index)
    if before is not None and tokens[before].type == tokenize.OP and tokens[before].string == "-":
        if not _ends_value(tokens, _previous(tokens, before)):
            return tokens[before]
    return tokens[index]


def _previous(tokens: Sequence[tokenize.TokenInfo], index: int) -> int | None:
    """Returns the index of the nearest earlier token that is not a comment or a non-logical newline."""
    for i in range(index - 1, -1, -1):
        if tokens[i].type not in (tokenize.NL, tokenize.COMMENT):
            return i
    return None


def _ends_value(tokens: Sequence[tokenize.TokenInfo], index: int | None) -> bool:
    """Returns whether the token at index can end an operand (so a following `-` or `[` is binary or a subscript)."""
    if index is None:
        return False
    token = tokens[index]
    if token.type == tokenize.NAME:
        return token.string in _VALUE_END_KEYWORDS or not keyword.iskeyword(token.string)
    if token.type == tokenize.OP:
        return token.string in ")]}"
    return token.type in (tokenize.NUMBER, tokenize.STRING) or (
        _FSTRING_END is not None and token.type == _FSTRING_END
    )


def _plain_number(text: str) -> bool:
    """Returns whether a NUMBER token is a plain decimal int or float (no hex, underscores or imaginary part)."""
    lowered = text.lower()
    return "_" not in lowered and not lowered.endswith("j") and not lowered.startswith(("0x", "0o", "0b"))


def _value(text: str) -> int | float | None:
    """Returns the value of a literal's text, or None when it is not worth tuning (zero ints, inf)."""
    compact = "".join(text.split())
    if any(ch in compact for ch in ".eE"):
        number = float(compact)
        return number if math.isfinite(number) else None
    whole = int(compact)
    # A literal 0 int is nearly always an index or a start value; nudging it changes meaning.
    return whole if whole != 0 else None


def _line_offsets(text: str) -> list[int]:
    """Returns the character offset at which each newline-separated line starts."""
    offsets = [0]
    for line in text.split("\n"):
        offsets.append(offsets[-1] + len(line) + 1)
    return offsets


def _assigned_names(text: str) -> dict[tuple[int, int], str]:
    """Returns (line, character column) of each literal that is a whole assigned value -> the name it gets."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    lines = text.split("\n")
    names: dict[tuple[int, int], str] = {}
    for name, value in _named_values(tree):
        if _is_number(value):
            line = lines[value.lineno - 1].encode("utf-8")
            column = len(line[: value.col_offset].decode("utf-8", errors="ignore"))
            names[(value.lineno, column)] = name
    return names


def _named_values(tree: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    """Yields (name, value) for assignments, keyword arguments and parameter defaults."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, (ast.Name, ast.Attribute)):
                yield (target.id if isinstance(target, ast.Name) else target.attr), node.value
        elif isinstance(node, ast.keyword) and node.arg is not None:
            yield node.arg, node.value
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            yield from ((a.arg, d) for a, d in zip(positional[len(positional) - len(node.defaults):], node.defaults))
            yield from ((a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None)


def _is_number(node: ast.expr) -> bool:
    """Returns whether a node is a numeric constant, possibly negated."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


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
        return _perturb_int(value, rng)
    if value == 0:
        return rng.choice((-1.0, 1.0)) * 10 ** rng.uniform(-3.0, -1.0)
    return value * math.exp(rng.gauss(0.0, _LOG_SIGMA))


def _perturb_int(value: int, rng: random.Random) -> int:
    """Returns value moved by ±1..±max(1, 20% of |value|), staying on its side of zero."""
    step = rng.randint(1, max(1, int(abs(value) * 0.2)))
    moved = value + rng.choice((-1, 1)) * step
    if (moved > 0) != (value > 0) or moved == 0:
        # A step across zero would flip the sign (an empty range, a reversed loop): step away instead.
        moved = value + step if value > 0 else value - step
    return moved


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


def _label(literal: Literal, with_path: bool) -> str:
    """Returns the literal's label, prefixed by its file when several files hold literals."""
    return f"{literal.path} {literal.label}" if with_path else literal.label
