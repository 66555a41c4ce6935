"""Tests for strategies/funsearch/code.py: finding and versioning the evolved function with `ast`.

`implant` (§4.2 step 8, putting a reply's new version back) lives here: the runner takes the whole EVOLVE-BLOCK
back in the standard reply format instead, so only these tests keep the reference's implanting step.
"""

from __future__ import annotations

import ast
import keyword
import re
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.errors import EditError
from autoloop_py.strategies.funsearch.code import (
    FunctionNode,
    _docstring_edit,
    _find,
    _is_docstring,
    _lines,
    _only_function,
    _parse,
    _splice,
    function_length,
    function_source,
    header,
    renamed,
    version_name,
    versioned_code,
)

TARGET = '''\
"""Cap sets."""
import numpy as np

# EVOLVE-BLOCK-START
@functools.cache
def priority(el: tuple[int, ...], n: int) -> float:
    """Returns the priority of `el` in a cap set of dimension n."""
    # keep it simple
    return 0.0
# EVOLVE-BLOCK-END


def solve(n):
    return priority((0,) * n, n)
'''
WORSE = '''\
def priority(el, n):
    """Returns the priority of `el` in a cap set of dimension n."""
    return float(sum(el))
'''
BETTER = '''\
def priority(el, n):
    """A docstring the prompt replaces."""
    if n == 0:
        return 1.0
    return priority(el, n - 1) / 2  # halve per level
'''


def test_function_source_finds_the_function_with_its_decorators() -> None:
    source = function_source(TARGET, "priority")
    assert source == TARGET[TARGET.index("@functools") : TARGET.index("# EVOLVE-BLOCK-END")]
    assert function_length(TARGET, "priority") == len(source)


def test_function_source_dedents_a_method_and_reports_what_is_missing() -> None:
    method = "class A:\n    def priority(self):\n        return 1\n"
    assert function_source(method, "priority") == "def priority(self):\n    return 1\n"
    assert function_source(TARGET, "missing") is None
    assert function_source("def priority(:\n", "priority") is None
    assert function_length("x = 1\n", "priority") == 6 and function_length(None, "priority") == 0


def test_versions_are_renamed_and_say_what_they_improve() -> None:
    text = versioned_code([WORSE, BETTER], "priority")
    assert text == (
        'def priority_v0(el, n):\n'
        '    """Returns the priority of `el` in a cap set of dimension n."""\n'
        '    return float(sum(el))\n'
        '\n\n'
        'def priority_v1(el, n):\n'
        '    """Improved version of `priority_v0`."""\n'
        '    if n == 0:\n'
        '        return 1.0\n'
        '    return priority_v1(el, n - 1) / 2  # halve per level\n'
        '\n\n'
        'def priority_v2(el, n):\n'
        '    """Improved version of `priority_v1`."""\n'
    )


def test_a_function_without_a_docstring_gets_one() -> None:
    assert renamed("def f(x):\n    return f(x)\n", "f", "f_v1", "Improved.") == (
        'def f_v1(x):\n    """Improved."""\n    return f_v1(x)\n'
    )
    assert renamed("def f(x): return x\n", "f", "f_v1", "Improved.") == 'def f_v1(x): """Improved."""; return x\n'


def test_multi_line_docstrings_and_wide_characters_are_replaced_in_place() -> None:
    source = 'def f(x):\n    """Line one.\n\n    Line two.\n    """\n    y = "π→" + f(x)\n    return y\n'
    expected = 'def f_v2(x):\n    """New."""\n    y = "π→" + f_v2(x)\n    return y\n'
    assert renamed(source, "f", "f_v2", "New.") == expected


def test_a_header_ends_with_its_docstring() -> None:
    signature = 'def g(a,\n      b) -> int:\n    """Doc."""\n'
    assert header(signature + "    return a\n") == signature
    with pytest.raises(ValueError, match="docstring"):
        header("def g():\n    return 1\n")


def test_versioned_code_needs_a_version() -> None:
    with pytest.raises(ValueError, match="at least one"):
        versioned_code([], "priority")


_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)


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


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]



def test_implant_puts_the_new_version_in_place_of_the_function() -> None:
    reply = (
        "SUMMARY: weight coordinates\n\n```python\n"
        "def priority_v2(el: tuple[int, ...], n: int) -> float:\n"
        '    """Improved version of `priority_v1`."""\n'
        "    if n == 0:\n        return 1.0\n"
        "    return sum(el) / n + priority_v2(el, n - 1)\n```\n"
    )
    assert implant(reply, TARGET, "priority", 2) == TARGET.replace(
        "    # keep it simple\n    return 0.0\n",
        "    if n == 0:\n        return 1.0\n    return sum(el) / n + priority(el, n - 1)\n",
    )


def test_implant_takes_a_body_and_trims_what_does_not_parse() -> None:
    reply = "```python\n    total = sum(el)\n    return total / 3\n```\nAnd then I would also\n"
    expected = TARGET.replace("    # keep it simple\n    return 0.0\n", "    total = sum(el)\n    return total / 3\n")
    assert implant(reply, TARGET, "priority", 1) == expected
    unfenced = "def priority_v1(el, n):\n    return 2.0\nThis version returns a constant.\n"
    changed = TARGET.replace("def priority(el: tuple[int, ...], n: int) -> float:", "def priority(el, n):")
    body = "    # keep it simple\n    return 0.0\n"
    assert implant(unfenced, TARGET, "priority", 1) == changed.replace(body, "    return 2.0\n")


def test_implant_keeps_a_methods_indent_and_docstring() -> None:
    current = 'class A:\n    def priority(self):\n        """Doc.\n\n        More."""\n        return 0\n'
    reply = '```python\ndef priority_v1(self):\n    """Improved version of `priority_v0`."""\n    return 1\n```'
    assert implant(reply, current, "priority", 1) == current.replace("return 0", "return 1")


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            "```python\ndef priority_v2(el, n):\n    return priority_v0(el, n)\n```",
            "`priority_v2` calls the earlier version `priority_v0`",
        ),
        ("```python\ndef other(el, n):\n    return 1\n```", "the reply holds no function `priority_v2` that parses"),
        ("I could not do it.", "the reply holds no function `priority_v2` that parses"),
    ],
)
def test_implant_refuses_unusable_replies(reply: str, message: str) -> None:
    with pytest.raises(EditError, match=message):
        implant(reply, TARGET, "priority", 2)


def test_implant_needs_the_function_in_the_target() -> None:
    with pytest.raises(EditError, match="the Target has no function `priority`; restore it"):
        implant("def priority_v1():\n    return 1\n", "x = 1\n", "priority", 1)


names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))
pieces = st.lists(st.sampled_from(["x", "F(x)", "g(F(x), 2)", "'π→F('", "F  (x)", "[F(i) for i in x]"]), max_size=5)


@settings(max_examples=150, deadline=None)
@given(names, pieces, st.booleans())
def test_renaming_there_and_back_restores_the_function(name: str, items: list[str], documented: bool) -> None:
    doc = '    """Doc of F."""\n' if documented else ""
    source = f"def {name}(x):\n{doc}    y = [{', '.join(items)}]\n    return y\n".replace("F", name)
    there = renamed(source, name, f"{name}_v3")
    assert function_source(there, f"{name}_v3") == there
    assert renamed(there, f"{name}_v3", name) == source
