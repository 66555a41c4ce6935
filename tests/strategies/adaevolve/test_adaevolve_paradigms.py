"""Tests for strategies/adaevolve_paradigms.py: validating the guide LLM's JSON reply (§2.4).

The tracker itself (window, trigger, rotation, install) is covered by vectors A6–A7 in test_adaevolve.py.
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.errors import EditError
from autoloop_py.strategies.adaevolve.paradigms import GuideReplyError, parse_paradigms
from autoloop_py.strategies.adaevolve.state import Paradigm

GOOD = """{"ideas": [
  {"idea": "Basin hopping from the best point", "description": "Wrap the local search in basin hopping.\\nKeep the step adaptive.",
   "what_to_optimize": "value", "cautions": ["bound the iterations", "seed the RNG"],
   "approach_type": "scipy.optimize.basinhopping"},
  {"idea": "Quasi-Newton polish", "description": "Finish with BFGS.", "approach_type": "`scipy.optimize.minimize`"}
]}"""


def test_a_plain_json_reply_gives_its_ideas() -> None:
    assert parse_paradigms(GOOD) == [
        Paradigm("Basin hopping from the best point", "Wrap the local search in basin hopping. Keep the step adaptive.",
                 "scipy.optimize.basinhopping", "value", "bound the iterations; seed the RNG"),
        Paradigm("Quasi-Newton polish", "Finish with BFGS.", "scipy.optimize.minimize"),
    ]


def test_a_fenced_reply_with_prose_around_it_parses() -> None:
    reply = f"Here are my ideas.\n\n```json\n{GOOD}\n```\n\nGood luck! {{not json}}"
    assert [p.approach_type for p in parse_paradigms(reply)] == ["scipy.optimize.basinhopping", "scipy.optimize.minimize"]


def test_json_after_a_brace_in_prose_is_still_found() -> None:
    reply = 'I considered {a, b} first.\n{"ideas": [{"idea": "i", "description": "d", "approach_type": "a.b"}]}'
    assert parse_paradigms(reply) == [Paradigm("i", "d", "a.b")]


def test_invalid_items_are_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    reply = '{"ideas": [{"idea": "no tool", "description": "d"}, "text", {"idea": "ok", "description": "d", ' \
            '"approach_type": "numpy.fft.rfft"}, {"idea": "OK", "description": "again", "approach_type": "numpy.fft.rfft"}]}'
    with caplog.at_level(logging.WARNING):
        found = parse_paradigms(reply)
    assert found == [Paradigm("ok", "d", "numpy.fft.rfft")]
    assert "idea 1 has no `approach_type` text; skipped" in caplog.text
    assert "idea 2 is not an object (it is a JSON string); skipped" in caplog.text


def test_an_approach_type_cannot_carry_the_list_separator() -> None:
    reply = '{"ideas": [{"idea": "x", "description": "d", "approach_type": "numpy — fft"}]}'
    assert parse_paradigms(reply)[0].approach_type == "numpy - fft"


@pytest.mark.parametrize(("reply", "message"), [
    ("I have no ideas today.", 'the reply holds no JSON object (it reads "I have no ideas today."); send {"ideas": [...]}'),
    ('{"ideas": [1, 2,]}', "the reply's JSON does not parse: Expecting value at line 1 column 17; send one valid JSON object"),
    ('{"paradigms": []}', 'the JSON object has no "ideas" list (its keys: "paradigms")'),
    ('{"ideas": []}', 'the "ideas" list is empty; give at least one idea'),
    ('{"ideas": [{"idea": "", "description": 3}, 7]}',
     "no valid idea: idea 1 has no `idea`, `description`, `approach_type` text; idea 2 is not an object (it is a JSON number)"),
    ("[1, 2]", 'the reply holds no JSON object (it reads "[1, 2]")'),
])
def test_bad_replies_say_what_is_wrong(reply: str, message: str) -> None:
    with pytest.raises(GuideReplyError) as caught:
        parse_paradigms(reply)
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, EditError)


@given(st.text(max_size=200))
def test_any_text_gives_ideas_or_a_guide_reply_error(text: str) -> None:
    try:
        ideas = parse_paradigms(text)
    except GuideReplyError:
        return
    assert ideas and all(p.idea and p.description and p.approach_type for p in ideas)
