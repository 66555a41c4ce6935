"""Tests of code vectors: renaming and layout leave them unchanged, real edits do not, cosine and nearest."""

from __future__ import annotations

import base64
import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.analysis import code_vector
from autoloop_py.analysis.code_vector import cosine, nearest, tokens, unit, vector

PROGRAM = '''"""Anneals."""
import math

step = 0.5


def search(rng, start):
    """Returns the best point."""
    best = start
    for _ in range(60):
        point = best + rng.uniform(-step, step)  # a move
        if math.cos(point) < math.cos(best):
            best = point
    return best
'''

RENAMED = '''"""Anneals a point: another docstring."""
import math

stride = 0.5


def find(generator, origin):
    """Returns it."""
    champion = origin
    for _ in range(60):
        candidate = champion + generator.uniform(-stride, stride)
        if math.cos(candidate) < math.cos(champion):

            champion = candidate   # kept
    return champion
'''


def test_renaming_variables_and_changing_comments_docstrings_and_layout_leave_the_vector_unchanged() -> None:
    assert tokens(RENAMED) == tokens(PROGRAM)
    assert math.isclose(cosine(vector(PROGRAM), vector(RENAMED)), 1.0)


def test_calling_another_function_or_changing_a_number_lowers_the_similarity() -> None:
    other_call = PROGRAM.replace("math.cos(point) < math.cos(best)", "math.sin(point) < math.sin(best)")
    other_number = PROGRAM.replace("step = 0.5", "step = 0.7")
    rewritten = PROGRAM.replace("        point = best + rng.uniform(-step, step)  # a move\n",
                                "        point = rng.gauss(best, step / 2)\n        point = min(point, 10.0)\n")
    base = vector(PROGRAM)
    similar = [cosine(base, vector(text)) for text in (other_number, other_call, rewritten)]
    assert all(s < 0.999 for s in similar), similar
    assert similar[2] < similar[0]  # a rewritten line moves it further than one number does


def test_a_name_the_program_does_not_bind_is_kept() -> None:
    found = tokens("import math\nx = math.cos(y)\n")
    assert "math" in found and "cos" in found and "y" in found and "x" not in found


def test_other_languages_and_unparsable_python_are_split_into_words() -> None:
    assert tokens("fn main() { let x = 1; }", "rust") == ["fn", "main", "(", ")", "{", "let", "x", "=", "1", ";", "}"]
    assert tokens("def (:", "python") == ["def", "(", ":"]


def test_nearest_is_the_most_similar_and_the_first_on_ties() -> None:
    assert nearest((1.0, 0.0), {}) is None
    found = nearest((1.0, 0.0), {"a": (0.0, 1.0), "b": (2.0, 0.1), "c": (1.0, 0.05)})
    assert found == ("b", cosine((1.0, 0.0), (2.0, 0.1)))
    assert nearest((1.0, 0.0), {"a": (3.0, 0.0), "b": (1.0, 0.0)}) == ("a", 1.0)


def test_cosine_of_vectors_of_other_lengths_or_zeros_is_zero() -> None:
    assert cosine((1.0, 0.0), (1.0, 0.0, 0.0)) == 0.0
    assert cosine((0.0, 0.0), (1.0, 0.0)) == 0.0
    assert vector("") == tuple([0.0] * len(vector("x = 1\n")))


@settings(max_examples=25, deadline=None)
@given(st.text(max_size=300))
def test_any_text_has_a_unit_or_zero_vector_and_is_its_own_nearest(text: str) -> None:
    found = vector(text)
    length = math.sqrt(sum(v * v for v in found))
    assert length == 0.0 or math.isclose(length, 1.0)
    assert unit(found) == found or math.isclose(sum(a * b for a, b in zip(unit(found), found)), 1.0)
    if length:
        assert math.isclose(cosine(found, vector(text)), 1.0)


def test_packed_vectors_read_back_and_a_forged_one_is_not_read() -> None:
    local = code_vector.vector(PROGRAM)
    again = code_vector.unpack(code_vector.pack(local))
    assert again is not None and len(again) == len(local) and code_vector.cosine(again, local) == pytest.approx(1.0)
    assert code_vector.unpack(code_vector.pack([0.5, 0.0, -2.0])) == (0.5, 0.0, -2.0)
    assert code_vector.pack([1.0] * (code_vector.MAX_PACKED + 1)) is None
    packed = code_vector.pack([0.5, 1.0])
    assert packed is not None
    for forged in (None, 3, "not base64!", packed[:-4], base64.b64encode(struct.pack("<HHHf", 1, 1, 5, 1.0)).decode(),
                   base64.b64encode(struct.pack("<HHHf", 2, 1, 0, float("nan"))).decode()):
        assert code_vector.unpack(forged) is None
