"""The source side of tuning: numeric literals with their exact spans, and the PARAMS block that exposes knobs.

`parametrize` replaces each knob's literal by `PARAMS["name"]` and inserts the `PARAMS = {...}`
block after the shebang, encoding line, module docstring and `from __future__` imports (found
with `ast`, so the block never lands inside a docstring or above a future import); every other
byte stays as it was. `with_values` rewrites only the values inside that block.
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

from autoloop_py.render import render

PARAMS_NAME = "PARAMS"
MAX_KNOBS = 8
SCALES = ("linear", "log")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")
_PIN = re.compile(r"#\s*autoloop:\s*fixed\b", re.IGNORECASE)


@dataclass(frozen=True)
class Knob:
    """One numeric literal exposed to BO, with its place in the source and its search range.

    Attributes:
        name: a unique snake_case identifier, the key in the PARAMS block.
        line: 1-based line of the literal.
        col: 0-based character column where the literal starts (its unary minus included).
        end_col: 0-based character column one past its end, on the same line.
        text: the literal's exact source text (e.g. "1e-6", "-0.5").
        value: its value; int or float as the literal was written.
        kind: "int" or "float".
        low: the lower search bound (the value lies in [low, high]).
        high: the upper search bound.
        scale: "linear" or "log" (log-uniform prior; only when low > 0).
        family: the paper's parameter family the range came from ("default" when none fits; "llm").
        rationale: why it is a knob (the model's sentence; '' for the literal finder).
    """

    name: str
    line: int
    col: int
    end_col: int
    text: str
    value: int | float
    kind: str
    low: int | float
    high: int | float
    scale: str
    family: str = "default"
    rationale: str = ""


@dataclass(frozen=True)
class Literal:
    """A numeric literal of the module as `ast` sees it, before the knob rules.

    Attributes:
        node: the Constant, or the UnaryOp holding a sign and a Constant.
        value: its value (negative under a unary minus).
        line: 1-based line.
        col: 0-based character column of its first character.
        end_col: 0-based character column one past its end.
        text: its exact source text.
    """

    node: ast.expr
    value: int | float
    line: int
    col: int
    end_col: int
    text: str


def parametrize(source: str, knobs: Sequence[Knob], name: str = PARAMS_NAME) -> str:
    """Returns the source with each knob replaced by `name["knob"]` and the `name = {...}` block inserted."""
    lines = split_lines(source)
    first = prelude_lines(source) + 1
    for knob in sorted(knobs, key=lambda k: (k.line, k.col), reverse=True):
        if knob.line < first or knob.line > len(lines):
            raise ValueError(f"knob {knob.name!r} on line {knob.line} lies before the {name} block or past the end")
        line = lines[knob.line - 1]
        if line[knob.col:knob.end_col] != knob.text:
            raise ValueError(f"line {knob.line} does not hold {knob.text!r} at column {knob.col}")
        # `return-0.5` is valid Python; `returnPARAMS["x"]` would not be.
        gap = " " if knob.col and (line[knob.col - 1].isalnum() or line[knob.col - 1] == "_") else ""
        lines[knob.line - 1] = f'{line[:knob.col]}{gap}{name}["{knob.name}"]{line[knob.end_col:]}'
    found = re.search(r"\r\n|\r|\n", source)
    newline = found.group(0) if found else "\n"
    block = render("tune_params_block.py.j2", name=name, knobs=list(knobs)).replace("\n", newline)
    head = lines[: first - 1]
    if head and not head[-1].endswith(("\n", "\r")):
        head[-1] += newline
    return "".join(head) + (newline if head else "") + block + "".join(lines[first - 1:])


def with_values(source: str, values: Mapping[str, int | float], name: str = PARAMS_NAME) -> str:
    """Returns the parametrized source with the given entries of its `name = {...}` block set to new values."""
    entries = params_entries(source, name)
    unknown = sorted(set(values) - set(entries))
    if unknown:
        raise ValueError(f"the {name} block has no entr{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}")
    lines = split_lines(source)
    for key in sorted(values, key=lambda k: entries[k], reverse=True):
        line, col, end_col = entries[key]
        text = lines[line - 1]
        lines[line - 1] = text[:col] + format_value(values[key]) + text[end_col:]
    return "".join(lines)


def params_entries(source: str, name: str = PARAMS_NAME) -> dict[str, tuple[int, int, int]]:
    """Returns {key: (line, col, end_col)} of each numeric value in the module's top-level `name = {...}` block."""
    tree = ast.parse(source)
    lines = split_lines(source)
    for statement in tree.body:
        if _assigns(statement, name) and isinstance(statement.value, ast.Dict):  # type: ignore[attr-defined]
            return _entry_spans(statement.value, lines)  # type: ignore[attr-defined]
    raise ValueError(f"the source has no top-level `{name} = {{...}}` block; parametrize it first")


def _entry_spans(block: ast.Dict, lines: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    spans: dict[str, tuple[int, int, int]] = {}
    for key, value in zip(block.keys, block.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or number_of(value) is None:
            continue
        if value.lineno != value.end_lineno:
            continue
        line = lines[value.lineno - 1]
        spans[key.value] = (value.lineno, _char_col(line, value.col_offset), _char_col(line, value.end_col_offset or 0))
    return spans


def format_value(value: int | float) -> str:
    """Returns source text for a value: ints as written, floats by repr (which reads back exactly)."""
    item = getattr(value, "item", None)
    plain = item() if callable(item) else value  # numpy scalars from skopt
    if isinstance(plain, bool) or not isinstance(plain, (int, float)):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(plain, int):
        return str(plain)
    if not math.isfinite(plain):
        raise ValueError(f"{plain!r} is not a finite number")
    return repr(float(plain))


def free_name(source: str, base: str = PARAMS_NAME) -> str:
    """Returns `base`, or `base_2`, `base_3`... when the module already uses that name."""
    used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))
    name, number = base, 1
    while name in used:
        number += 1
        name = f"{base}_{number}"
    return name


def prelude_lines(source: str, tree: ast.Module | None = None) -> int:
    """Returns how many leading lines must stay above a PARAMS block: shebang, coding line, docstring, __future__."""
    tree = ast.parse(source) if tree is None else tree
    lines = split_lines(source)
    keep = 1 if lines and lines[0].startswith("#!") else 0
    for index in range(min(2, len(lines))):
        if _CODING.match(lines[index]) and all(line.strip()[:1] in ("", "#") for line in lines[:index]):
            keep = max(keep, index + 1)
    body = tree.body
    position = 0 if ast.get_docstring(tree, clean=False) is None else 1
    while position < len(body) and _future_import(body[position]):
        position += 1
    end = body[position - 1].end_lineno if position else 0
    return max(keep, end or 0)


def pinned_lines(source: str) -> frozenset[int]:
    """Returns the 1-based lines holding a `# autoloop: fixed` comment: no number on them is ever varied."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return frozenset()
    return frozenset(t.start[0] for t in tokens if t.type == tokenize.COMMENT and _PIN.match(t.string))


def split_lines(source: str) -> list[str]:
    """Returns the source's lines with their terminators, split as Python's tokenizer does (\\n, \\r\\n, \\r)."""
    return _LINE.findall(source)


def numeric_literals(
    tree: ast.Module, source: str, parents: Mapping[ast.AST, ast.AST], operands: bool = False
) -> Iterator[Literal]:
    """Yields each numeric literal on one line outside f-strings, a unary sign included (also without, if operands)."""
    lines = split_lines(source)
    for node in ast.walk(tree):
        value = number_of(node)
        if value is None or (not operands and number_of(parents.get(node, tree)) is not None):
            continue
        if any(isinstance(a, ast.JoinedStr) for a in ancestors(node, parents)):
            continue  # before 3.12 the positions inside f-strings are not real
        assert isinstance(node, ast.expr)
        if node.lineno != node.end_lineno:
            continue
        line = lines[node.lineno - 1]
        col, end = _char_col(line, node.col_offset), _char_col(line, node.end_col_offset or 0)
        yield Literal(node, value, node.lineno, col, end, line[col:end])


def number_of(node: ast.AST) -> int | float | None:
    """Returns the value of an int/float literal, or of one under a single unary minus or plus; else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = number_of(node.operand) if isinstance(node.operand, ast.Constant) else None
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value  # type: ignore[return-value]
    return None


def parents_of(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def ancestors(node: ast.AST, parents: Mapping[ast.AST, ast.AST]) -> Iterator[ast.AST]:
    while node in parents:
        node = parents[node]
        yield node


def snake_case(name: str) -> str:
    """Returns name as a snake_case identifier ('' when nothing usable is left)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    snake = re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_")
    return f"k_{snake}" if snake[:1].isdigit() else snake


def _char_col(line: str, byte_col: int) -> int:
    """Returns the character column of an `ast` column, which counts UTF-8 bytes."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


def _assigns(statement: ast.stmt, name: str) -> bool:
    if isinstance(statement, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in statement.targets)
    target = statement.target if isinstance(statement, ast.AnnAssign) else None
    return isinstance(target, ast.Name) and target.id == name


def _future_import(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.ImportFrom) and statement.module == "__future__"
