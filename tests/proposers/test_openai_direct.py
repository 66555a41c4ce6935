"""Tests for proposers/openai_direct.py: the request sent before litellm is loaded is litellm's, and so is its reply.

Each test sends the same request through litellm and without it, to the suite's loopback server (tests/fake_openai.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from autoloop_py.errors import AutoloopError
from autoloop_py.proposers.llm_call import CallLimits
from autoloop_py.proposers.model_calls import call, check_model, import_litellm, reply_of
from autoloop_py.proposers.openai_direct import direct_sender, listed, litellm_response, quick_check, read_reply
from tests.fake_openai import fake_openai

MESSAGES = [{"role": "user", "content": "hi"}]


def _both(kwargs: dict[str, Any], limits: CallLimits = CallLimits(timeout=30, retries=0)) -> list[Any]:
    """Returns the outcome (Reply, or error type and text) through litellm, then through the direct request first."""
    litellm = import_litellm()
    outcomes: list[Any] = []
    for first in (None, direct_sender(litellm, kwargs)):
        try:
            outcomes.append(call(litellm, dict(kwargs), limits, first))
        except AutoloopError as err:
            outcomes.append((type(err), str(err)))
    return outcomes


def test_the_request_its_reply_tokens_reasoning_and_cost_are_litellms(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("reply", monkeypatch, "<think>first</think>the answer", tokens=1000) as server:
        kwargs = {"model": "openai/gpt-4o-mini", "messages": MESSAGES, "temperature": 0.3, "max_tokens": 50}
        through_litellm, direct = _both(kwargs)
    assert direct == through_litellm
    assert (direct.content, direct.reasoning, direct.prompt_tokens) == ("the answer", "first", 1000)
    assert direct.cost is not None and direct.cost > 0  # priced by litellm's list, as the model it was asked for
    assert server.requests == 2 and server.bodies[0] == server.bodies[1] and server.keys[0] == server.keys[1]


def test_a_model_missing_from_the_price_list_has_no_cost_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("reply", monkeypatch, "ok") as server:
        through_litellm, direct = _both({"model": "openai/mock", "messages": MESSAGES, "api_base": server.base_url})
    assert direct == through_litellm and direct.cost is None


@pytest.mark.parametrize("mode", ["bad-key", "no-model", "garbage", "server-error"])
def test_a_failure_is_sent_again_by_litellm_and_reads_as_its_error(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    with fake_openai(mode, monkeypatch) as server:
        through_litellm, direct = _both({"model": "openai/test", "messages": MESSAGES})
    assert direct == through_litellm and isinstance(direct, tuple)
    assert server.requests == 3  # litellm's; the direct one, then litellm's again


def test_a_hung_server_times_out_with_the_same_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("hang", monkeypatch) as server:
        limits = CallLimits(timeout=0.3, retries=1)
        through_litellm, direct = _both({"model": "openai/test", "messages": MESSAGES}, limits)
    assert direct == through_litellm
    assert direct[1] == "the model did not answer within 0.3 s (2 attempts)" and server.requests == 4


def test_the_server_url_is_read_in_litellms_order(monkeypatch: pytest.MonkeyPatch) -> None:
    litellm = import_litellm()
    with fake_openai("reply", monkeypatch, "ok") as server:
        environ = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_BASE": "http://127.0.0.1:9/v1",
                   "OPENAI_API_KEY": "k"}
        send = direct_sender(litellm, {"model": "openai/x", "messages": MESSAGES}, environ)
        assert send is not None
        assert send(30).content == "ok"
    assert server.keys == ["k"] and server.bodies == [{"model": "x", "messages": MESSAGES}]


@pytest.mark.parametrize("kwargs", [
    {"model": "anthropic/claude-3-5-sonnet-20240620"},  # another provider
    {"model": "gpt-4o-mini"},  # litellm places it; only litellm knows where
    {"model": "openai/gpt-4o-mini", "mock_response": "x"},  # answered by litellm itself
    {"model": "openai/gpt-4o-mini", "stream": True},
    {"model": "openai/o3-mini", "max_tokens": 10},  # litellm renames it
    {"model": "openai/gpt-4o-mini", "api_key": ""},  # no key: litellm's client refuses it in its words
])
def test_requests_litellm_would_change_wait_for_it(kwargs: dict[str, Any]) -> None:
    assert direct_sender(object(), {"messages": MESSAGES, **kwargs}, {}) is None


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "openai/my-local-model"])
@pytest.mark.parametrize("key", [True, False])
def test_the_quick_check_is_litellms(monkeypatch: pytest.MonkeyPatch, model: str, key: bool) -> None:
    if key:
        monkeypatch.setenv("OPENAI_API_KEY", "k")
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert quick_check(model) == check_model(import_litellm(), model)
    assert quick_check("anthropic/claude-3-5-sonnet-20240620") is None and quick_check("gpt-4o") is None


def _completion(model: str | None, message: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    data = {"id": "x", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}
    return {key: value for key, value in data.items() if value is not None}


USAGE = {"prompt_tokens": 300_000, "completion_tokens": 20, "total_tokens": 300_020}
MESSAGES_READ = [
    {"role": "assistant", "content": "plain"},
    {"role": "assistant", "content": "<think>inline</think>after"},
    {"role": "assistant", "content": "<thinking>a\nb</thinking>"},
    {"role": "assistant", "content": None, "reasoning_content": "only reasoning"},
    {"role": "assistant", "content": "x", "reasoning": "a reasoning field", "tool_calls": [], "refusal": None},
    {"role": "assistant", "content": [{"type": "text", "text": "parts"}]},
]


@pytest.mark.parametrize("message", MESSAGES_READ)
@pytest.mark.parametrize("usage", [USAGE, {"prompt_tokens": 5, "completion_tokens": None}, None, {**USAGE, "cost": 1}])
@pytest.mark.parametrize(("asked", "named"), [
    ("openai/mock", "mock"), ("openai/test", None), ("openai/my-local-model", "gpt-4o"), ("openai/gpt-4o", "x"),
])
def test_a_reply_read_without_litellm_is_litellms(message: dict[str, Any], usage: dict[str, Any] | None,
                                                   asked: str, named: str | None) -> None:
    litellm = import_litellm()
    data = _completion(named, message, usage)
    direct = read_reply(data, asked)
    if direct is not None:
        assert direct == reply_of(litellm, litellm_response(litellm, asked, data))
    plain = usage is USAGE and "gpt-4o" not in (asked.removeprefix("openai/"), named) and not isinstance(message["content"], list)
    assert (direct is not None) == plain  # litellm reads the rest (no usage, odd counts, a cost, a priced model)


# Names a local server gives its models, and names close to listed ones: none litellm prices may be called unlisted.
NAMES = ["mock", "test", "my-local-model", "Qwen/Qwen2.5-7B-Instruct", "llama3.1:8b", "ft:gpt-4o-mini:org::x",
         "gpt-4o-2099-01-01", "GPT-4o", "gpt-4o-mini-custom", "deepseek-chat-local", "claude-3-5-sonnet-latest",
         "text-embedding-3-small", "openai/gpt-4o", "gpt-4.1-nano", "o3-mini", "mistral-7b-instruct",
         "accounts/fireworks/models/llama-v3p1-8b-instruct", "gemini-1.5-pro-002", "gpt-4o-mini-2024-07-18-ft"]


@pytest.mark.parametrize("name", NAMES)
def test_a_model_called_unlisted_is_one_litellm_cannot_price(name: str) -> None:
    litellm = import_litellm()
    response = litellm_response(litellm, f"openai/{name}", _completion(name, {"content": "x"}, USAGE))
    try:
        cost: float | None = litellm.completion_cost(completion_response=response)
    except Exception:  # noqa: BLE001 - how litellm says it has no price
        cost = None
    assert listed(name) or cost is None
    assert not listed(name) or name not in {"mock", "test", "my-local-model"}  # a local model's reply needs no litellm
