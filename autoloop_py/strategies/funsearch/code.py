"""FunSearch code: find the evolved function with `ast` and show it as numbered versions.

Edits are made on the source text at the positions `ast` reports, so comments and layout survive;
`ast` column offsets count UTF-8 bytes, hence the byte splicing in `_splice`.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from typing import Sequence, Union


FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]


@dataclass(frozen=True)
class _Edit:
    """Replace the bytes from (line, start) to (end_line, end) with text; lines are 1-based, an empty span inserts."""

    line: int
    start: int
    end_line: int
    end: int
    text: str


def version_name(name: str, version: int) -> str:
    """Returns the name of a numbered version: priority, 2 → priority_v2."""
    return f"{name}_v{version}"


def improved_docstring(name: str, version: int) -> str:
    """Returns the docstring of version `version` (≥ 1): Improved version of `name_v{version-1}`."""
    return f"Improved version of `{version_name(name, version - 1)}`."


def function_source(code: str, name: str) -> str | None:
    """Returns the source of the first function called name (decorators included, dedented), or None."""
    tree = _parse(code)
    node = _find(tree, name) if tree is not None else None
    if node is None:
        return None
    lines = _lines(code)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    text = "".join(lines[first - 1 : node.end_lineno])
    return textwrap.dedent(text if text.endswith("\n") else text + "\n")


def function_length(code: str | None, name: str) -> int:
    """Returns len() of the function's source (ℓ of §4.2 step 5); the whole code's length when it has none."""
    if code is None:
        return 0
    source = function_source(code, name)
    return len(source if source is not None else code)


def versioned_code(functions: Sequence[str], name: str) -> str:
    """Returns functions (ascending score) as name_v0…name_v{k−1} and the header of name_vk (§4.2 step 6).

    From v1 on a docstring reads "Improved version of `name_v{i−1}`."; recursive calls follow each
    rename. The header is the last (best) function's signature with the docstring of name_vk.
    """
    if not functions:
        raise ValueError("a FunSearch prompt needs at least one earlier version")
    parts = []
    for version, text in enumerate(functions):
        docstring = improved_docstring(name, version) if version else None
        parts.append(renamed(text, name, version_name(name, version), docstring))
    k = len(functions)
    parts.append(header(renamed(functions[-1], name, version_name(name, k), improved_docstring(name, k))))
    return "\n\n".join(part.rstrip("\n") + "\n" for part in parts)


def renamed(function: str, name: str, new_name: str, docstring: str | None = None) -> str:
    """Returns a function's source with its name and recursive calls changed, and its docstring when given."""
    node = _only_function(function, name)
    edits = [_name_edit(function, node, new_name), *_call_edits(node, name, new_name)]
    if docstring is not None:
        literal = '"""' + docstring.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '"""'
        edits.append(_docstring_edit(function, node, literal))
    return _splice(function, edits)


def header(function: str) -> str:
    """Returns a function's source up to the end of its docstring (the function is expected to have one)."""
    node = _only_function(function, None)
    first = node.body[0]
    if not _is_docstring(first):
        raise ValueError("the header needs a function with a docstring")
    end = first.end_lineno or first.lineno
    lines = _lines(function)
    last = lines[end - 1].encode("utf-8")[: first.end_col_offset].decode("utf-8")
    return "".join(lines[: end - 1]) + last + "\n"


# ---------------------------------------------------------------- ast helpers


def _lines(text: str) -> list[str]:
    """Returns text's lines with their endings, split on newlines only (as ast counts lines)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _find(tree: ast.AST | None, name: str) -> FunctionNode | None:
    """Returns the first function called name, breadth first (so a top-level one wins)."""
    if tree is None:
        return None
    return next(
        (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
        None,
    )


def _only_function(text: str, name: str | None) -> FunctionNode:
    """Returns the function a single-function source defines (of that name, when given)."""
    tree = _parse(text)
    node = tree.body[0] if tree is not None and tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (name is not None and node.name != name):
        raise ValueError(f"expected the source of one function{f' called {name}' if name else ''}")
    return node


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _name_edit(text: str, node: FunctionNode, new_name: str) -> _Edit:
    line = _lines(text)[node.lineno - 1].encode("utf-8")
    found = re.search(rb"\bdef\s+(" + re.escape(node.name.encode("utf-8")) + rb")\b", line)
    assert found is not None, "ast reported a def on this line"
    return _Edit(node.lineno, found.start(1), node.lineno, found.end(1), new_name)


def _call_edits(node: FunctionNode, name: str, new_name: str) -> list[_Edit]:
    return [
        _Edit(call.func.lineno, call.func.col_offset, call.func.lineno, call.func.end_col_offset or 0, new_name)
        for call in ast.walk(node)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == name
    ]


def _docstring_edit(text: str, node: FunctionNode, literal: str) -> _Edit:
    """Returns the edit that sets the docstring: replace the existing one or insert one before the body."""
    first = node.body[0]
    if _is_docstring(first):
        end_line = first.end_lineno or first.lineno
        return _Edit(first.lineno, first.col_offset, end_line, first.end_col_offset or 0, literal)
    line = _lines(text)[first.lineno - 1].encode("utf-8")
    if line[: first.col_offset].strip():
        # A one-line def (`def f(x): return x`): the docstring joins the line as its first statement.
        return _Edit(first.lineno, first.col_offset, first.lineno, first.col_offset, literal + "; ")
    indent = line[: first.col_offset].decode("utf-8")
    return _Edit(first.lineno, first.col_offset, first.lineno, first.col_offset, literal + "\n" + indent)


def _splice(text: str, edits: list[_Edit]) -> str:
    """Returns text with the edits applied, last first so earlier positions stay valid."""
    lines = [line.encode("utf-8") for line in _lines(text)]
    for edit in sorted(edits, key=lambda e: (e.line, e.start), reverse=True):
        joined = lines[edit.line - 1][: edit.start] + edit.text.encode("utf-8") + lines[edit.end_line - 1][edit.end :]
        lines[edit.line - 1 : edit.end_line] = [joined]
    return b"".join(lines).decode("utf-8")
