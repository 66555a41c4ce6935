"""Tests for proposers/novelty_calls.py through litellm against a loopback OpenAI-compatible server (no network)."""

from __future__ import annotations

import pytest

from autoloop_py.errors import ConfigurationError
from autoloop_py.program.models import ModelSpec
from autoloop_py.proposers.base import Usage
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError
from autoloop_py.proposers.novelty_calls import embed, judge_same
from tests.fake_openai import fake_openai

LIMITS = CallLimits(timeout=10, retries=0)


def test_texts_are_embedded_in_one_request_and_its_tokens_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    spent: list[Usage] = []
    spec = ModelSpec("openai/text-embedding-3-small", role="embedding", temperature=0.2)
    with fake_openai("reply", monkeypatch, tokens=9, embed=lambda text: [float(text.count("x")), 1.0]) as server:
        vectors = embed(spec, ["x = 1", "xx = x"], limits=LIMITS, spent=spent)
    assert vectors == [(1.0, 1.0), (3.0, 1.0)]
    assert server.requests == 1 and server.bodies[0]["input"] == ["x = 1", "xx = x"]
    assert server.bodies[0]["model"] == "text-embedding-3-small" and "temperature" not in server.bodies[0]
    assert len(spent) == 1 and (spent[0].model, spent[0].prompt_tokens, spent[0].completion_tokens) == (spec.name, 9, 0)
    assert spent[0].cost is not None and spent[0].cost > 0  # litellm's price list knows the model


def test_an_embedding_reply_without_vectors_is_a_model_call_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("reply", monkeypatch, embed=lambda text: []) as server:
        with pytest.raises(ModelCallError, match="not an embedding"):
            embed(ModelSpec("openai/e", role="embedding"), ["a"], limits=LIMITS)
    assert server.requests == 1


def test_a_refused_key_stops_as_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("bad-key", monkeypatch):
        with pytest.raises(ConfigurationError, match="refused the API key"):
            embed(ModelSpec("openai/e", role="embedding"), ["a"], limits=LIMITS)


@pytest.mark.parametrize(("reply", "same"), [("SAME\nOnly names differ.", True), ("DIFFERENT: a new loop", False)])
def test_the_judge_is_asked_about_both_programs(monkeypatch: pytest.MonkeyPatch, reply: str, same: bool) -> None:
    spent: list[Usage] = []
    with fake_openai("reply", monkeypatch, reply=reply, tokens=4) as server:
        found = judge_same(ModelSpec("openai/judge", role="judge"), "a = 1\n", "b = 1\n", "python", limits=LIMITS,
                           spent=spent)
    assert found == (same, reply.split("\n")[0])
    prompt = server.bodies[0]["messages"][-1]["content"]
    assert "```python\na = 1\n```" in prompt and "```python\nb = 1\n```" in prompt
    assert [(u.model, u.prompt_tokens, u.completion_tokens) for u in spent] == [("openai/judge", 4, 4)]
