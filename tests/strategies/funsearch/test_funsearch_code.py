"""Tests for strategies/funsearch_code.py: finding, versioning and implanting the evolved function with `ast`."""

from __future__ import annotations

import keyword

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.errors import EditError
from autoloop_py.strategies.funsearch.code import (
    function_length,
    function_source,
    header,
    implant,
    renamed,
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
