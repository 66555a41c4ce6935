"""Tests for proposers/llm_call.py: bounded requests, retries within the deadline, plain sentences."""

from __future__ import annotations

import json
from typing import Any

import pytest

from autoloop_py.errors import ConfigurationError
from autoloop_py.proposers.llm import complete
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError, completion, limits_for
from tests.fake_openai import fake_openai


class Timeout(Exception):
    """Named as litellm's timeout class is."""


class RateLimitError(Exception):
    pass


class AuthenticationError(Exception):
    pass


class NotFoundError(Exception):
    pass


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class _Litellm:
    """Fails with the given errors in turn (each timeout costs its timeout on the clock), then answers."""

    def __init__(self, clock: _Clock, *errors: Exception) -> None:
        self.clock, self.errors, self.calls = clock, list(errors), []

    def completion(self, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        if not self.errors:
            return "reply"
        error = self.errors.pop(0)
        if isinstance(error, Timeout):
            self.clock.now += kwargs["timeout"]
        raise error


def _call(fake: _Litellm, clock: _Clock, limits: CallLimits) -> Any:
    return completion(fake, {"model": "m"}, limits, clock=clock, sleep=clock.sleep)


def test_each_request_gets_the_timeout_and_no_retries_of_litellms_own() -> None:
    clock = _Clock()
    fake = _Litellm(clock)
    assert _call(fake, clock, CallLimits(timeout=7, retries=2)) == "reply"
    assert fake.calls == [{"model": "m", "timeout": 7, "max_retries": 0, "num_retries": 0}]


def test_timeouts_are_retried_then_said_plainly() -> None:
    clock = _Clock()
    fake = _Litellm(clock, Timeout("x"), Timeout("x"), Timeout("x"))
    with pytest.raises(ModelCallError, match=r"^the model did not answer within 1 s \(3 attempts\)$"):
        _call(fake, clock, CallLimits(timeout=1, retries=2))
    assert len(fake.calls) == 3 and clock.now == 3


def test_the_deadline_cuts_the_last_request_and_stops_the_next() -> None:
    clock = _Clock()
    fake = _Litellm(clock, Timeout("x"), Timeout("x"), Timeout("x"))
    with pytest.raises(ModelCallError, match="all the time left before the job's deadline"):
        _call(fake, clock, CallLimits(timeout=10, retries=5, deadline=15))
    assert [c["timeout"] for c in fake.calls] == [10, 5] and clock.now == 15


def test_no_request_when_no_time_is_left() -> None:
    clock = _Clock()
    clock.now = 100
    fake = _Litellm(clock)
    with pytest.raises(ModelCallError, match="no time was left for a model call before the job's deadline"):
        _call(fake, clock, CallLimits(deadline=100.2))
    assert fake.calls == []


def test_a_first_sender_that_answers_is_the_only_request() -> None:
    clock = _Clock()
    fake = _Litellm(clock)
    sent: list[float] = []
    first = lambda timeout: sent.append(timeout) or "early"  # noqa: E731
    reply = completion(fake, {"model": "m"}, CallLimits(timeout=7), clock=clock, first=first)
    assert (reply, sent, fake.calls) == ("early", [7], [])


def test_a_first_sender_that_times_out_uses_up_its_attempt() -> None:
    clock = _Clock()
    fake = _Litellm(clock, Timeout("x"))

    def hangs(timeout: float) -> str:
        clock.now += timeout
        raise TimeoutError("timed out")

    with pytest.raises(ModelCallError, match=r"^the model did not answer within 2 s \(2 attempts\)$"):
        completion(fake, {"model": "m"}, CallLimits(timeout=2, retries=1), clock=clock, first=hangs)
    assert len(fake.calls) == 1 and clock.now == 4


def test_a_first_sender_that_fails_otherwise_is_sent_again_by_litellm_within_the_deadline() -> None:
    clock = _Clock()
    fake = _Litellm(clock, AuthenticationError("litellm.AuthenticationError: refused"))

    def refused(timeout: float) -> str:
        clock.now += 3
        raise ValueError("HTTP Error 401: Unauthorized")

    with pytest.raises(ConfigurationError, match="refused the API key"):
        completion(fake, {"model": "openai/m"}, CallLimits(timeout=10, deadline=8), clock=clock, first=refused)
    assert [c["timeout"] for c in fake.calls] == [5]  # litellm's error, in what time was left


def test_rate_limits_back_off_within_the_attempts() -> None:
    clock = _Clock()
    fake = _Litellm(clock, RateLimitError("litellm.RateLimitError: RateLimitError: slow down"))
    assert _call(fake, clock, CallLimits(retries=1)) == "reply" and clock.now == 1


def test_a_refused_key_is_not_retried_and_names_the_variable() -> None:
    clock = _Clock()
    fake = _Litellm(clock, AuthenticationError("litellm.AuthenticationError: bad key\nTraceback ..."))
    with pytest.raises(ConfigurationError, match="refused the API key .*; check OPENAI_API_KEY"):
        _call(fake, clock, CallLimits())
    assert len(fake.calls) == 1


def test_a_404_is_not_retried_and_names_the_model_setting_or_the_url_setting() -> None:
    clock = _Clock()
    fake = _Litellm(clock, NotFoundError("litellm.NotFoundError: NotFoundError: OpenAIException - The model `m` "
                                         "does not exist or you do not have access to it."))
    with pytest.raises(ConfigurationError, match=r"^model 'm': the server says the model does not exist \(The model "
                       r"`m` does not exist .*\); set `model:` in the program's frontmatter, AUTOLOOP_MODEL or --model"):
        _call(fake, clock, CallLimits())
    assert len(fake.calls) == 1
    fake = _Litellm(clock, NotFoundError("litellm.NotFoundError: NotFoundError: OpenAIException - 404 page not found"))
    with pytest.raises(ConfigurationError, match=r"answered 404 not found \(404 page not found\); set OPENAI_API_BASE"):
        _call(fake, clock, CallLimits())


def test_a_model_the_server_does_not_serve_is_a_setting_naming_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("no-model", monkeypatch) as server:
        with pytest.raises(ConfigurationError) as caught:
            complete("openai/gpt-nope", "hello", limits=CallLimits(timeout=5, retries=2))
    assert str(caught.value) == (
        f"model 'openai/gpt-nope': the server at {server.base_url}/chat/completions says the model does not exist "
        "(The model `gpt-nope` does not exist or you do not have access to it.); set `model:` in the program's "
        "frontmatter, AUTOLOOP_MODEL or --model to a model it serves"
    )
    assert server.requests == 1  # not retried: the next request would get the same answer


def test_limits_end_before_the_job_deadline_with_room_to_evaluate() -> None:
    limits = limits_for(None, None, job_deadline=1000.0, reserve=300.0)
    assert (limits.timeout, limits.retries, limits.deadline) == (120.0, 2, 640.0)
    assert limits_for(5, 0).deadline is None


def test_a_reply_that_is_not_json_is_one_plain_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("garbage", monkeypatch) as server:
        with pytest.raises(ModelCallError) as caught:
            complete("openai/test", "hello", limits=CallLimits(timeout=5, retries=2))
    assert str(caught.value) == (
        "the model's server sent a reply that is not a chat completion (not JSON, or no choices in it)"
    )
    assert server.requests == 1  # a malformed reply is not retried


def test_a_real_reply_comes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("reply", monkeypatch, reply=json.dumps({"ok": True})) as server:
        assert complete("openai/test", "hello", limits=CallLimits(timeout=5)) == '{"ok": true}'
    assert server.requests == 1
