"""Requests to an OpenAI-compatible server sent, and their replies read, without importing litellm.

`import litellm` takes seconds and ~200 MB; the standard library's HTTP client is there at once. Until litellm
is loaded, the model worker sends an `openai/…` model's request itself, as litellm would (the same URL, key and
body), when litellm would pass its arguments on unchanged. A plain chat completion of a model that is not in the
price list litellm ships (and loads, with LITELLM_LOCAL_MODEL_COST_MAP) is read as litellm reads it, without a
cost as litellm gives none; any other reply is read through litellm, so text, tokens and cost are litellm's. A
failure other than a timeout is sent again through litellm, so its error reads as litellm's.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping

from autoloop_py.proposers.model_calls import ModelCheck, Reply

PREFIX = "openai/"
SAMPLING = ("temperature", "top_p", "max_tokens")
PLAIN = frozenset({"model", "messages", "api_base", "api_key", *SAMPLING})
# litellm maps these models' sampling arguments (max_tokens becomes max_completion_tokens, temperature is dropped).
_REASONING = re.compile(r"(o\d|gpt-5|codex)")
# A message's fields read here (any other field, when set, is litellm's to read), and usage's (`cost` is not).
_MESSAGE = frozenset({"role", "content", "reasoning_content", "reasoning"})
_USAGE = frozenset({"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
                    "completion_tokens_details"})
# litellm's split of a reply whose reasoning is inline (litellm_core_utils/prompt_templates/reasoning_utils.py).
_THINKING = re.compile(r"<(?:think|thinking|budget:thinking)>(.*?)</(?:think|thinking|budget:thinking)>(.*)", re.DOTALL)


def direct_sender(litellm: Any, kwargs: Mapping[str, Any], environ: Mapping[str, str] = os.environ
                  ) -> Callable[[float], Any] | None:
    """Returns the call that sends the request itself within a timeout and returns its Reply (or litellm's response,
    when litellm must read it: see read_reply), or None when litellm would change the request (another provider,
    other arguments, no key)."""
    request = _request(kwargs, environ)
    if request is None:
        return None

    def send(timeout: float) -> Any:
        data = _post(request, timeout)
        return read_reply(data, str(kwargs["model"])) or litellm_response(litellm, str(kwargs["model"]), data)

    return send


def quick_check(model: str, environ: Mapping[str, str] = os.environ) -> ModelCheck | None:
    """Returns litellm's setup check of an `openai/…` model without litellm (None for any other model)."""
    if not model.startswith(PREFIX) or model == PREFIX:
        return None
    return ModelCheck(None, () if "OPENAI_API_KEY" in environ else ("OPENAI_API_KEY",))


def read_reply(data: dict[str, Any], model: str) -> Reply | None:
    """Returns the chat completion `data` (the server's JSON) as litellm reads it, None when litellm must read it:
    a model it may price, a message or usage with fields not read here."""
    choice, usage = data["choices"][0], data.get("usage")
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict) or not isinstance(usage, dict) or set(usage) - _USAGE:
        return None
    tokens = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    texts = [message.get(key) for key in ("content", "reasoning_content", "reasoning")]  # litellm refuses non-text
    plain = all(type(count) is int for count in tokens) and all(t is None or isinstance(t, str) for t in texts)
    if not plain or any(message[key] for key in set(message) - _MESSAGE) or listed(data.get("model")):
        return None
    if listed(model.removeprefix(PREFIX)):
        return None
    content, reasoning = texts[0], message.get("reasoning_content", texts[2])
    if "reasoning_content" not in message and "reasoning" not in message and content:
        found = _THINKING.match(content)
        reasoning, content = (found.group(1), found.group(2)) if found else (None, content)
    return Reply(content or "", reasoning or "", tokens[0], tokens[1], None)


def listed(name: object) -> bool:
    """Returns whether litellm may price a model of this name by its bundled price list (no name: False).

    Cautious, as litellm strips dates, versions and providers before it looks a name up: a name counts when one of
    its `/` parts begins with a listed name, when it has a `:` (litellm prices `ft:` models by their base), and
    every name counts when the list cannot be read.
    """
    if not isinstance(name, str) or not name:
        return False
    names = price_list_names()
    parts = name.lower().split("/")
    return ":" in name or not names or any(part[:end] in names for part in parts for end in range(1, len(part) + 1))


@functools.cache
def price_list_names() -> frozenset[str]:
    """Returns the model names of litellm's bundled price list, each also without its provider (empty: unreadable)."""
    spec = importlib.util.find_spec("litellm")  # finds the package without importing it
    try:
        folder = (spec.submodule_search_locations or [])[0] if spec is not None else ""
        with open(os.path.join(folder, "model_prices_and_context_window_backup.json"), "rb") as listing:
            keys = json.load(listing, object_pairs_hook=lambda pairs: [key for key, _ in pairs])
    except (OSError, IndexError, ValueError):
        return frozenset()
    return frozenset(name.lower() for key in keys for name in (key, key.rsplit("/", 1)[-1]))


def litellm_response(litellm: Any, model: str, data: dict[str, Any]) -> Any:
    """Returns the chat completion `data` (the server's JSON) as litellm's response to a request for `model`."""
    empty = litellm.ModelResponse()  # first: waits until litellm is loaded
    from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (  # type: ignore[import]
        convert_to_model_response_object,
    )

    hidden = {"custom_llm_provider": "openai", "litellm_model_name": model}  # what litellm prices the reply by
    return convert_to_model_response_object(response_object=data, model_response_object=empty,
                                            hidden_params=hidden)


def _request(kwargs: Mapping[str, Any], environ: Mapping[str, str]) -> urllib.request.Request | None:
    """Returns the HTTP request litellm would send for these arguments, None when it would send another."""
    model = str(kwargs.get("model", ""))
    name = model.removeprefix(PREFIX)
    sampling = {key: kwargs[key] for key in SAMPLING if key in kwargs}
    if name == model or not name or set(kwargs) - PLAIN or (sampling and _REASONING.match(name)):
        return None
    # litellm's order: the argument, then OPENAI_BASE_URL, OPENAI_API_BASE, OpenAI's own URL
    base = (kwargs.get("api_base") or environ.get("OPENAI_BASE_URL") or environ.get("OPENAI_API_BASE")
            or "https://api.openai.com/v1")
    key = kwargs.get("api_key") or environ.get("OPENAI_API_KEY")
    if not key:
        return None  # litellm's client refuses it, in its own words
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    if environ.get("OPENAI_ORGANIZATION"):
        headers["OpenAI-Organization"] = environ["OPENAI_ORGANIZATION"]
    body = json.dumps({"model": name, "messages": kwargs["messages"], **sampling}).encode()
    return urllib.request.Request(f"{str(base).rstrip('/')}/chat/completions", body, headers, method="POST")


def _post(request: urllib.request.Request, timeout: float) -> dict[str, Any]:
    """Returns the server's JSON answer; a timeout raises TimeoutError, any other failure its own error."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            data = json.loads(answer.read())
    except urllib.error.URLError as err:
        if isinstance(err.reason, TimeoutError):
            raise err.reason from None  # a connect that timed out: the attempt's timeout
        raise
    if not isinstance(data, dict) or not data.get("choices"):
        raise ValueError("not a chat completion")
    return data
