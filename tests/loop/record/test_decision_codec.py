"""Tests for decision_codec.py: strategy decisions round-trip through JSON; nothing but allowed dataclasses comes back."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.loop.record.decision_codec import DecisionCodecError, decode, encode
from autoloop_py.state.population_model import Candidate
from autoloop_py.strategies.base import Decision

PARENT = Candidate(3, 1, 0.5, 2, "exploit", parents=(1, 2), cell=("a", "b"), code="x = 1\n", extra=(("k", "v"),))
DECISION = Decision("crossover", "u=0.42 < 0.5", (PARENT,), 1, False, ("note",), (0.42, float("inf")), {"a": "b"})


def through_json(value: object) -> object:
    return decode(json.loads(json.dumps(encode(value), allow_nan=False)))


def test_a_decision_round_trips() -> None:
    assert through_json(DECISION) == DECISION
    assert through_json({1: (2, [3])}) == {1: (2, [3])}


@pytest.mark.parametrize(
    "name",
    [
        "os:system",
        "builtins:eval",
        "subprocess:Popen",
        "autoloop_py.git.command:GitResult",
        "autoloop_py.strategies.runner:load_runner",  # allowed module, not a dataclass
        "autoloop_py.strategies.evox.sandbox:_Problem",  # private
        "autoloop_py.strategies.base:Decision.__init__",
        "autoloop_py.strategies.nope:Decision",
        "autoloop_py.strategies.base.x:Decision",
    ],
)
def test_only_autoloops_strategy_and_population_dataclasses_are_built(name: str) -> None:
    with pytest.raises(DecisionCodecError):
        decode({"$dataclass": name, "fields": {}})


def test_unknown_fields_and_bad_tags_are_refused() -> None:
    forged = encode(DECISION)
    forged["fields"]["command"] = "rm -rf /"
    with pytest.raises(DecisionCodecError, match="has no fields"):
        decode(forged)
    for bad in ({"$tuple": 1}, {"$map": [[1]]}, {"$float": "1e9"}, {"$set": []}, {"a": 1}, {"$map": [[[], 1]]}):
        with pytest.raises(DecisionCodecError):
            decode(bad)


def test_what_json_cannot_carry_is_refused() -> None:
    with pytest.raises(DecisionCodecError, match="set cannot be carried"):
        encode({1, 2})
    with pytest.raises(DecisionCodecError, match="is not a type a decision may hold"):
        encode(dataclasses.make_dataclass("Forged", [("x", int)])(1))  # a dataclass from elsewhere


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["$tuple", "$map", "$float",
                  "$dataclass", "fields", "x"]), inner, max_size=2),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_any_json_decodes_or_raises_the_codec_error(value: object) -> None:
    try:
        decode(value)
    except DecisionCodecError:
        pass
