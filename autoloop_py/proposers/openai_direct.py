"""Requests to an OpenAI-compatible server sent while litellm is still being imported, read back through litellm.

`import litellm` takes seconds; the standard library's HTTP client is there at once. Until litellm is loaded,
the model worker sends an `openai/…` model's request itself, as litellm would (the same URL, key and body),
when litellm would pass its arguments on unchanged. The reply is then read through litellm (its response
object, its price list for the cost), so its text, tokens and cost are litellm's own. A failure other than a
timeout is sent again through litellm, so its error reads as litellm's.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping

from autoloop_py.proposers.model_calls import ModelCheck

PREFIX = "openai/"
SAMPLING = ("temperature", "top_p", "max_tokens")
PLAIN = frozenset({"model", "messages", "api_base", "api_key", *SAMPLING})
# litellm maps these models' sampling arguments (max_tokens becomes max_completion_tokens, temperature is dropped).
_REASONING = re.compile(r"(o\d|gpt-5|codex)")


def direct_sender(litellm: Any, kwargs: Mapping[str, Any], environ: Mapping[str, str] = os.environ
                  ) -> Callable[[float], Any] | None:
    """Returns the call that sends the request itself within a timeout and returns litellm's response to it, or
    None when litellm would change the request (another provider, other arguments, no key)."""
    request = _request(kwargs, environ)
    if request is None:
        return None

    def send(timeout: float) -> Any:
        return litellm_response(litellm, str(kwargs["model"]), _post(request, timeout))

    return send


def quick_check(model: str, environ: Mapping[str, str] = os.environ) -> ModelCheck | None:
    """Returns litellm's setup check of an `openai/…` model without litellm (None for any other model)."""
    if not model.startswith(PREFIX) or model == PREFIX:
        return None
    return ModelCheck(None, () if "OPENAI_API_KEY" in environ else ("OPENAI_API_KEY",))


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
