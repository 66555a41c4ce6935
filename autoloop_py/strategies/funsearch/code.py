"""FunSearch code: find the evolved function with `ast`, show it as numbered versions, put a new version back.

Edits are made on the source text at the positions `ast` reports, so comments and layout survive;
`ast` column offsets count UTF-8 bytes, hence the byte splicing in `_splice`.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from typing import Sequence, Union

from autoloop_py.errors import EditError

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)


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
    text = "".join(lines[_first_line(node) - 1 : node.end_lineno])
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
        edits.append(_docstring_edit(function, node, _literal(docstring)))
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


def implant(reply: str, current: str, name: str, version: int) -> str:
    """Returns current with its function `name` replaced by the reply's `name_v{version}` renamed back (§4.2 step 8).

    The reply may hold the whole function or only its body, fenced or not; it is trimmed to the
    longest prefix that parses. The function keeps its decorators and docstring from current.
    """
    target = _find(_parse(current), name) if _parse(current) is not None else None
    if target is None:
        raise EditError(f"the Target has no function `{name}`; restore it or fix `function_to_evolve`")
    wanted = version_name(name, version)
    code = _reply_code(reply, wanted)
    found = _generated_function(code, wanted, _target_header(current, target, wanted))
    _refuse_ancestor_calls(found, name, wanted)
    new = _with_docstring_of(renamed(found, wanted, name), name, current, target)
    # The Target's decorators stay; the reply's (if any) are dropped with the lines above its def.
    new = "".join(_lines(new)[_only_function(new, name).lineno - 1 :])
    lines = _lines(current)
    indent = _indent(lines[target.lineno - 1])
    body = textwrap.indent(new, indent) if indent else new
    return "".join(lines[: target.lineno - 1]) + body + "".join(lines[target.end_lineno :])


# ---------------------------------------------------------------- reading replies


def _reply_code(reply: str, wanted: str) -> str:
    """Returns the fenced block that defines wanted, else the last fenced block, else the whole reply."""
    blocks = [m.group(2) for m in _FENCE_RE.finditer(reply)]
    defining = [b for b in blocks if re.search(rf"\bdef\s+{re.escape(wanted)}\b", b)]
    if defining:
        return defining[-1]
    return blocks[-1] if blocks else reply


def _generated_function(code: str, wanted: str, header_text: str) -> str:
    """Returns the source of wanted from code: a full definition, else code taken as the body after the header."""
    found = _longest_parsing_function(code, wanted)
    if found is None and not _starts_with_definition(code):
        body = textwrap.indent(textwrap.dedent(code), "    ")
        found = _longest_parsing_function(header_text + body, wanted)
        # Trimming may leave only the header: a body must keep at least one statement of its own.
        if found is not None and len(_only_function(found, wanted).body) < 2:
            found = None
    if found is None:
        raise EditError(f"the reply holds no function `{wanted}` that parses; reply with the complete function")
    return found


def _starts_with_definition(code: str) -> bool:
    """Returns whether code's first statement line defines something (so it is not a bare body)."""
    lines = [line for line in textwrap.dedent(code).splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return bool(lines) and re.match(r"(@|def\s|async\s+def\s|class\s)", lines[0]) is not None


def _longest_parsing_function(code: str, wanted: str) -> str | None:
    """Returns wanted's source from the longest prefix of code's lines that parses (Ref trims the same way)."""
    lines = _lines(textwrap.dedent(code))
    while lines:
        text = "".join(lines)
        try:
            tree = ast.parse(text)
        except SyntaxError as error:
            cut = (error.lineno or len(lines)) - 1
            lines = lines[: min(cut, len(lines) - 1)]
            continue
        node = _find(tree, wanted)
        return function_source(text, wanted) if node is not None else None
    return None


def _target_header(current: str, target: FunctionNode, wanted: str) -> str:
    """Returns the Target function's header renamed to wanted, with a placeholder docstring."""
    source = function_source(current, target.name)
    assert source is not None
    return header(renamed(source, target.name, wanted, "Generated body."))


def _refuse_ancestor_calls(function: str, name: str, wanted: str) -> None:
    """Raises EditError when the function calls an earlier numbered version (Ref rejects those samples)."""
    pattern = re.compile(rf"{re.escape(name)}_v\d+")
    node = _only_function(function, wanted)
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
            called = call.func.id
            if pattern.fullmatch(called) and called != wanted:
                raise EditError(
                    f"`{wanted}` calls the earlier version `{called}`; write it without calling earlier versions"
                )


def _with_docstring_of(function: str, name: str, current: str, target: FunctionNode) -> str:
    """Returns function with the Target function's docstring source (unchanged when the Target has none)."""
    if not target.body or not _is_docstring(target.body[0]):
        return function
    literal = ast.get_source_segment(current, target.body[0]) or '""""""'
    indent = _indent(_lines(current)[target.lineno - 1])
    # Continuation lines lose the Target's indent here and get it back when the function is re-indented.
    first, *rest = literal.split("\n")
    literal = "\n".join([first, *(line[len(indent) :] if line.startswith(indent) else line for line in rest)])
    return _splice(function, [_docstring_edit(function, _only_function(function, name), literal)])


# ---------------------------------------------------------------- ast helpers


def _lines(text: str) -> list[str]:
    """Returns text's lines with their endings, split on newlines only (as ast counts lines)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


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


def _first_line(node: FunctionNode) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _literal(docstring: str) -> str:
    return '"""' + docstring.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '"""'


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
