"""Model calls through litellm, answered as plain data: a completion's Reply, an embedding's Vectors, a model's
setup ModelCheck.

`autoloop run` makes its calls in the model worker process (model_worker.py), which imports litellm
while the run prepares; other commands call here, in-process (InProcess). Either way the caller gets the
same Reply and the same errors (llm_call's ModelCallError and ConfigurationError), never litellm's
response object, so a runner whose worker makes the calls never imports litellm itself.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from autoloop_py.errors import AutoloopError, error_line
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError, completion

logger = logging.getLogger(__name__)

# litellm is the `llm` extra: the workflow's plan and publish jobs, which call no model, go without it.
# No index serves autoloop-py yet, so the message names what installs it from where autoloop really came from.
LITELLM_MISSING = (
    "the llm proposer needs litellm: python3 -m pip install litellm"
    " (or, from your clone of autoloop_py: python3 -m pip install 'path/to/autoloop_py[llm]')"
)
NO_MESSAGE = "the model's server sent a reply that is not a chat completion (no message in it)"


@dataclass(frozen=True)
class Reply:
    """One model reply, without litellm's objects.

    Attributes:
      content: the first choice's message content ('' when it is not text).
      reasoning: the message's `reasoning_content` (reasoning models may leave `content` empty), '' when none.
      prompt_tokens: the tokens the provider counted in the request.
      completion_tokens: the tokens it counted in the reply.
      cost: dollars by litellm's price list, None when the model is not in it.
    """

    content: str = ""
    reasoning: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None


@dataclass(frozen=True)
class Vectors:
    """The embeddings of one request's texts, without litellm's objects.

    Attributes:
      vectors: one vector per text, in the request's order.
      prompt_tokens: the tokens the provider counted in the texts.
      cost: dollars by litellm's price list, None when the model is not in it.
    """

    vectors: tuple[tuple[float, ...], ...] = ()
    prompt_tokens: int = 0
    cost: float | None = None


@dataclass(frozen=True)
class ModelCheck:
    """What litellm says of a model before any request.

    Attributes:
      problem: why litellm cannot tell the model's provider (None when it can).
      missing: the API key variables the model needs and the environment lacks.
    """

    problem: str | None = None
    missing: tuple[str, ...] = ()


class ModelCalls(Protocol):
    """Where model calls are made: in this process, or in the model worker."""

    def completion(self, kwargs: dict[str, Any], limits: CallLimits) -> Reply:
        """Returns the reply to one request (litellm's arguments), within the limits."""

    def check(self, model: str) -> Callable[[], ModelCheck]:
        """Starts checking a model; returns the call that waits for the answer."""

    def embedding(self, kwargs: dict[str, Any], limits: CallLimits) -> Vectors:
        """Returns the vectors of one embedding request (litellm's arguments: model, input), within the limits."""


class InProcess:
    """Model calls made in this process: litellm is imported by the first one."""

    def completion(self, kwargs: dict[str, Any], limits: CallLimits) -> Reply:
        """Returns the reply to one request, within the limits (see llm_call.completion)."""
        return call(import_litellm(), kwargs, limits)

    def check(self, model: str) -> Callable[[], ModelCheck]:
        """Checks the model now; returns the call that hands the answer over."""
        answer = check_model(import_litellm(), model)
        return lambda: answer

    def embedding(self, kwargs: dict[str, Any], limits: CallLimits) -> Vectors:
        """Returns the vectors of one embedding request, within the limits."""
        return embed(import_litellm(), kwargs, limits)


def call(litellm: Any, kwargs: dict[str, Any], limits: CallLimits, first: Callable[[float], Any] | None = None
         ) -> Reply:
    """Returns litellm's reply to one request as a Reply; raises what llm_call.completion raises.

    first: sends the first attempt instead of litellm (see llm_call.completion); it may return a Reply read
    without litellm (openai_direct).
    """
    response = completion(litellm, kwargs, limits, first=first)
    return response if isinstance(response, Reply) else reply_of(litellm, response)


def embed(litellm: Any, kwargs: dict[str, Any], limits: CallLimits) -> Vectors:
    """Returns litellm's vectors for one embedding request; a response without them is a ModelCallError."""
    response = completion(litellm, kwargs, limits, method="embedding")
    items = sorted(getattr(response, "data", None) or (), key=lambda item: _field(item, "index") or 0)
    vectors = tuple(tuple(float(v) for v in _field(item, "embedding") or ()) for item in items)
    if len(vectors) != len(kwargs.get("input") or ()) or not all(vectors):
        raise ModelCallError("the model's server sent a reply that is not an embedding (no vector for every text)")
    usage = getattr(response, "usage", None)
    return Vectors(vectors, int(getattr(usage, "prompt_tokens", 0) or 0), _cost(litellm, response))


def _field(item: Any, name: str) -> Any:
    """Returns an embedding item's field: litellm gives dicts, or objects, depending on the provider."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def reply_of(litellm: Any, response: Any) -> Reply:
    """Returns a litellm response's text, tokens and cost; a response without a message is a ModelCallError."""
    choices = getattr(response, "choices", None) or ()
    message = getattr(choices[0], "message", None) if choices else None
    if message is None:
        raise ModelCallError(NO_MESSAGE)
    usage = getattr(response, "usage", None)
    content = message.content
    return Reply(
        content if isinstance(content, str) else "",
        str(getattr(message, "reasoning_content", None) or ""),
        int(getattr(usage, "prompt_tokens", 0) or 0),
        int(getattr(usage, "completion_tokens", 0) or 0),
        _cost(litellm, response),
    )


def check_model(litellm: Any, model: str) -> ModelCheck:
    """Returns whether litellm can place the model and which of its API key variables are unset."""
    try:
        litellm.get_llm_provider(model)
    except Exception as err:  # litellm.BadRequestError: the name has no provider litellm knows
        return ModelCheck(f"litellm cannot tell the provider of model '{model}' ({error_line(err)})")
    try:
        found = litellm.validate_environment(model)
    except Exception as err:  # litellm raises assorted errors for models it cannot place
        logger.debug("could not check the environment of %s: %s", model, err)
        return ModelCheck()
    # A missing *_API_BASE has a local default (ollama); only keys are required.
    return ModelCheck(None, tuple(key for key in found.get("missing_keys") or () if not key.endswith("_API_BASE")))


def import_litellm() -> Any:
    """Imports litellm, making it use its bundled price list instead of fetching one.

    Raises AutoloopError when it is not installed: jobs that never call a model install autoloop without it.
    """
    # Before the import: litellm reads it at import time, and otherwise fetches the list, with retries.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ModuleNotFoundError as err:
        if err.name != "litellm":
            raise
        raise AutoloopError(LITELLM_MISSING) from None

    litellm.suppress_debug_info = True
    return litellm


def _cost(litellm: Any, response: Any) -> float | None:
    """Returns the dollar cost of a response, or None when litellm does not know the model's price."""
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # litellm raises assorted errors for models missing from its price list
        return None
