"""The llm proposer: asks a model (through litellm) for edit blocks and retries with the failures shown.

litellm is imported only when a proposal is made, so importing autoloop never pays for it
and never makes it reach for the network. The calls go through a ModelCalls: in this process, or
in `autoloop run`'s model worker process, which imports litellm while the run prepares.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import random
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from autoloop_py.errors import AutoloopError, ConfigurationError, EditError, error_line
from autoloop_py.program.edits import EditFailure, apply_reply, check_paths
from autoloop_py.program.model import Program
from autoloop_py.program.models import ModelSpec, proposers
from autoloop_py.program.reply import parse_reply, reply_field
from autoloop_py.proposers.base import Proposal, ProposalRequest, Usage
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError, describe
from autoloop_py.proposers.model_calls import LITELLM_MISSING, InProcess, ModelCalls, Reply
from autoloop_py.strategies.prompt import render_retry_prompt

logger = logging.getLogger(__name__)

NO_MODEL = "no model configured: set `model:` in program.md frontmatter or AUTOLOOP_MODEL"
MODEL_ENV = "AUTOLOOP_MODEL"
MOCK_ENV = "AUTOLOOP_MOCK_RESPONSE"
NO_CHANGE = "the edits leave every file unchanged; propose a change that alters the code"


@dataclass(frozen=True)
class Attempt:
    """The outcome of applying one model reply.

    Attributes:
      summary: the reply's SUMMARY line.
      lesson: the reply's LESSON line, if any.
      kept: files whose new content was accepted from this reply.
      failures: what could not be applied.
      parse_error: the parse error when the reply could not be read at all.
    """

    summary: str = ""
    lesson: str | None = None
    kept: Mapping[str, str] = field(default_factory=dict)
    failures: tuple[EditFailure, ...] = ()
    parse_error: str | None = None


class _Conversation:
    """The messages exchanged with the model, with the usage of every reply."""

    def __init__(self, spec: ModelSpec, prompt: str) -> None:
        self.spec = spec
        self.transcript: list[tuple[str, str]] = [("user", prompt)]
        self.usages: list[Usage] = []

    def messages(self) -> list[dict[str, str]]:
        """Returns the transcript as litellm's messages."""
        return [{"role": role, "content": text} for role, text in self.transcript]

    def usage(self) -> Usage:
        """Returns the usage so far, summed over every reply."""
        costs = [usage.cost for usage in self.usages if usage.cost is not None]
        prompt_tokens = sum(usage.prompt_tokens for usage in self.usages)
        completion_tokens = sum(usage.completion_tokens for usage in self.usages)
        return Usage(prompt_tokens, completion_tokens, sum(costs) if costs else None, self.spec.name)

    def proposal(self, files: Mapping[str, str | None], summary: str, lesson: str | None = None,
                 failure: str | None = None) -> Proposal:
        """Returns a proposal carrying this conversation's usage, transcript and the last reply's APPROACH."""
        replies = [text for role, text in self.transcript if role == "assistant"]
        approach = next((a for a in map(lambda t: reply_field(t, "approach"), reversed(replies)) if a), None)
        return Proposal(files, summary, lesson, self.usage(), failure, tuple(self.transcript), approach)


class LLMProposer:
    """Proposes candidates by asking a litellm model for SEARCH/REPLACE edits."""

    name = "llm"

    def __init__(
        self, model: str | None = None, max_retries: int = 2, mock_responses: Sequence[str] = (),
        limits: CallLimits = CallLimits(), models: ModelCalls | None = None,
    ) -> None:
        self.model = model
        self.max_retries = max_retries
        self.limits = limits  # per request: llm-timeout, llm-retries, and the iteration's deadline
        self.models: ModelCalls = models or InProcess()  # where the calls are made (the run's model worker)
        # Canned replies passed to litellm's `mock_response` (reply i answers call i; the last repeats).
        self.mock_responses = tuple(mock_responses)

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        """Returns the model's candidate, retrying with the failures shown, or a failure.

        Raises ConfigurationError when the model's settings keep it from answering at all (see llm_call).
        """
        model = request.model.name if request.model else resolve_model(request.program, self.model)
        if model is None:
            return Proposal({}, "llm: no model", failure=NO_MODEL)
        conversation = _Conversation(request.model or ModelSpec(model), request.prompt)
        working = dict(request.files)
        summary, lesson, problem = "", None, ""
        for call in range(self.max_retries + 1):
            try:
                text = self._complete(conversation, call)
            except ConfigurationError:
                raise  # a setting, not the candidate: the run stops before it records this iteration
            except Exception as err:  # litellm raises provider-specific types; any of them ends the proposal
                why = str(err) if isinstance(err, ModelCallError) else describe(err)
                return conversation.proposal({}, summary or "llm: no reply", failure=f"{model}: {why}")
            attempt = _apply(text, working, request)
            working.update(attempt.kept)
            summary, lesson = attempt.summary or summary, attempt.lesson or lesson
            changed = {p: c for p, c in working.items() if request.files.get(p) != c}
            failures = attempt.failures or (() if changed or attempt.parse_error else (EditFailure(None, NO_CHANGE),))
            if not failures and attempt.parse_error is None:
                return conversation.proposal(changed, summary or "llm: changed " + ", ".join(sorted(changed)), lesson)
            problem = attempt.parse_error or failures[0].reason
            if call < self.max_retries:
                retry = render_retry_prompt(failures, list(attempt.kept), attempt.parse_error)
                conversation.transcript.append(("user", retry))
        tries = self.max_retries + 1
        reason = f"no applicable edit after {tries} {'reply' if tries == 1 else 'replies'}: {error_line(problem)}"
        return conversation.proposal({}, summary or "llm: no valid edit", failure=reason)

    def _complete(self, conversation: _Conversation, call: int) -> str:
        """Sends the conversation to the model, records the reply and its usage, and returns its text."""
        kwargs = request_kwargs(conversation.spec, conversation.messages())
        mock = self.mock_responses[min(call, len(self.mock_responses) - 1)] if self.mock_responses else None
        mock = mock if mock is not None else os.environ.get(MOCK_ENV)
        if mock is not None:
            kwargs["mock_response"] = mock
        logger.debug("llm: asking %s (call %d)", conversation.spec.name, call + 1)
        reply = self.models.completion(kwargs, spec_limits(conversation.spec, self.limits))
        conversation.usages.append(usage_of(reply, conversation.spec))
        conversation.transcript.append(("assistant", reply.content))
        return reply.content


def complete(
    model: str | ModelSpec, prompt: str, *, system: str = "", limits: CallLimits = CallLimits(),
    spent: list[Usage] | None = None, models: ModelCalls | None = None, **params: Any,
) -> str:
    """Returns a model's reply to one prompt (AUTOLOOP_MOCK_RESPONSE, when set, answers instead of the model).

    model: a litellm model string, or a `models:` entry with its sampling controls; system: an optional
    system message; limits: timeout, retries and deadline; spent: gets the reply's Usage appended (so the
    caller counts it in spend and budgets); models: where the call is made (None: in this process);
    params: extra litellm arguments (temperature, max_tokens…), over the entry's. Raises ModelCallError
    when no reply came.
    """
    spec = model if isinstance(model, ModelSpec) else ModelSpec(model)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    kwargs = {**request_kwargs(spec, messages), **params}
    mock = os.environ.get(MOCK_ENV)
    if mock is not None:
        kwargs["mock_response"] = mock
    reply = (models or InProcess()).completion(kwargs, spec_limits(spec, limits))
    if spent is not None:
        spent.append(usage_of(reply, spec))
    # Reasoning models may leave `content` empty and put the answer in `reasoning_content`.
    return reply.content or reply.reasoning


def resolve_model(program: Program, fallback: str | None) -> str | None:
    """Returns the model: `model:` (or the first proposing `models:` entry), else AUTOLOOP_MODEL, else the fallback."""
    listed = proposers(program.config.models)
    first = listed[0].name if listed else None
    return program.config.model or first or os.environ.get(MODEL_ENV) or fallback or None


def resolve_models(program: Program, fallback: str | None) -> tuple[ModelSpec, ...]:
    """Returns the models a proposal may be drawn from: the `models:` list's proposers, else the one resolved model."""
    model = resolve_model(program, fallback)
    return proposers(program.config.models) or ((ModelSpec(model),) if model else ())


def _apply(text: str, working: Mapping[str, str], request: ProposalRequest) -> Attempt:
    """Parses and applies one reply against the working files; disallowed paths become failures."""
    try:
        reply = parse_reply(text)
    except EditError as err:
        return Attempt(parse_error=str(err))
    default = next(iter(request.files)) if len(request.files) == 1 else None
    changed, failures = apply_reply(reply, working, default)
    kept: dict[str, str] = {}
    for path, content in changed.items():
        reasons = check_paths([path], request.program.target.allows, request.files.keys())
        if reasons:
            failures.append(EditFailure(path, f"changes to {path} were discarded: {reasons[0]}"))
        else:
            kept[path] = content
    return Attempt(reply.summary, reply.lesson, kept, tuple(failures))


def require_litellm() -> None:
    """Raises AutoloopError, saying how to install it, when litellm is not installed (it is an extra)."""
    if importlib.util.find_spec("litellm") is None:
        raise AutoloopError(LITELLM_MISSING)


def request_kwargs(spec: ModelSpec, messages: list[dict[str, str]]) -> dict[str, Any]:
    """Returns litellm's arguments for a request to a `models:` entry: its sampling controls, server and key."""
    kwargs: dict[str, Any] = {"model": spec.name, "messages": messages, **spec.params()}
    if spec.api_key_env:
        if not os.environ.get(spec.api_key_env):
            raise ModelCallError(f"its api-key-env {spec.api_key_env} is not set in the environment; set it")
        kwargs["api_key"] = os.environ[spec.api_key_env]
    return kwargs


def spec_limits(spec: ModelSpec, limits: CallLimits) -> CallLimits:
    """Returns the limits with the entry's own `timeout` per request, when it sets one."""
    return limits if spec.timeout is None else replace(limits, timeout=spec.timeout)


def usage_of(reply: Reply, spec: ModelSpec) -> Usage:
    """Returns a reply's tokens and dollars (by the entry's own prices when set, else litellm's price list)."""
    cost = spec.priced(reply.prompt_tokens, reply.completion_tokens)
    return Usage(reply.prompt_tokens, reply.completion_tokens, reply.cost if cost is None else cost, spec.name)
