"""One bounded model call through litellm: a timeout per request, a few retries, a deadline, one plain sentence on
failure.

litellm's own defaults wait 600 s per request and retry inside the provider's client, so a hung
server cost half an hour. Here litellm gets `timeout=` for each request and no retries of its own
(`max_retries=0`, `num_retries=0`); the retries happen in this module, where the deadline holds
across providers: no request starts after it, and none is given more time than is left before it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from autoloop_py.errors import AutoloopError, ConfigurationError, error_line

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 120.0
DEFAULT_RETRIES = 2
# Time kept back from the job's deadline for what follows the model's reply: applying it and recording.
RECORD_MARGIN = 60.0
_TRANSIENT = ("APIConnectionError", "RateLimitError", "InternalServerError", "ServiceUnavailableError")
_MALFORMED_SIGNS = ("Expecting value", "JSONDecodeError", "no 'choices'", "Invalid control character")
# Anywhere in an error's causes: no connection could be made at all (refused, or a host name that does not resolve).
_UNREACHABLE = ("ConnectionRefusedError", "ConnectError", "gaierror")


@dataclass(frozen=True)
class CallLimits:
    """How long model calls may take.

    Attributes:
      timeout: seconds one request may take (`llm-timeout`).
      retries: further requests after a timed-out or failed one (`llm-retries`).
      deadline: a time.monotonic() value by which every call must have ended (None: no deadline).
    """

    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    deadline: float | None = None


class ModelCallError(AutoloopError):
    """A model call that produced no reply, said in one plain sentence."""


def limits_for(
    timeout: float | None, retries: int | None, job_deadline: float | None = None, reserve: float = 0.0
) -> CallLimits:
    """Returns the limits: the given timeout and retries (defaults when None), ending `reserve` s before the job's
    deadline."""
    deadline = None if job_deadline is None else job_deadline - reserve - RECORD_MARGIN
    return CallLimits(
        DEFAULT_TIMEOUT if timeout is None else timeout, DEFAULT_RETRIES if retries is None else retries, deadline
    )


def completion(
    litellm: Any,
    kwargs: dict[str, Any],
    limits: CallLimits,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    method: str = "completion",
    first: Callable[[float], Any] | None = None,
) -> Any:
    """Returns litellm's response to one completion request, trying at most `retries + 1` times within the limits.

    method: the litellm function that makes the request (`embedding` for the novelty filter's vectors).
    first: sends the first attempt instead of litellm, given its timeout (openai_direct's, while litellm loads);
    when it fails other than by a timeout, litellm sends that attempt again, so the error is litellm's.
    Raises ModelCallError with a plain sentence when no usable response came, and ConfigurationError when
    the reason is a setting (the provider refused the key or knows no such model, or no attempt could connect
    to the server's URL). A server that hangs stays a ModelCallError: it may answer next time.
    """
    waited: list[float] = []  # per failed attempt: its timeout, or -1 for another transient failure
    last: BaseException | None = None
    unreachable: list[str] = []  # the URL of each attempt that could not connect
    for attempt in range(limits.retries + 1):
        budget = _request_budget(limits, clock())
        if budget is None:
            break
        try:
            if attempt == 0 and first is not None:
                response = _first(first, budget)
                if response is not None:
                    return response
                budget = _request_budget(limits, clock())
                if budget is None:
                    break
            return getattr(litellm, method)(**kwargs, timeout=budget, max_retries=0, num_retries=0)
        except Exception as err:  # litellm raises provider-specific types; each is classified below
            kind = classify(err)
            logger.info("model call %d failed (%s): %s", attempt + 1, kind, error_line(err, None))
            if kind == "timeout":
                waited.append(budget)
            elif kind == "authentication":
                raise ConfigurationError(_refused_key(litellm, str(kwargs.get("model", "")))) from None
            elif kind == "not-found":
                raise ConfigurationError(_not_found(litellm, str(kwargs.get("model", "")), err)) from None
            elif kind != "transient":
                raise ModelCallError(describe(err, kind)) from None
            else:
                url = unreachable_url(err)
                if url is not None:
                    unreachable.append(url)
                waited.append(-1.0)
                last = err
                pause = min(2.0 ** attempt, max(0.0, _left(limits, clock())))
                if attempt < limits.retries and pause > 0:
                    sleep(pause)
    if unreachable and len(unreachable) == len(waited):
        raise ConfigurationError(_unreachable(litellm, str(kwargs.get("model", "")), unreachable[-1], len(waited)))
    raise ModelCallError(_gave_up(waited, limits, last))


def _first(send: Callable[[float], Any], budget: float) -> Any:
    """Returns the first sender's response, None when it failed other than by a timeout (which it raises)."""
    try:
        return send(budget)
    except Exception as err:  # noqa: BLE001 - litellm sends the attempt again and says what went wrong
        if classify(err) == "timeout":
            raise
        why = error_line(err, None)
        logger.debug("the request sent before litellm was loaded failed (%s); litellm sends it again", why)
        return None


def classify(err: BaseException) -> str:
    """Returns what went wrong: timeout, authentication, not-found (HTTP 404), malformed (no chat completion),
    transient or fatal."""
    names = {cls.__name__ for cls in type(err).__mro__}
    if "Timeout" in names or "APITimeoutError" in names or isinstance(err, TimeoutError):
        return "timeout"
    if "AuthenticationError" in names:
        return "authentication"
    if "NotFoundError" in names:
        return "not-found"
    if unreachable_url(err) is not None:
        return "transient"  # litellm may wrap a refused connection as an InternalServerError
    text = str(err)
    if isinstance(err.__cause__, json.JSONDecodeError) or any(sign in text for sign in _MALFORMED_SIGNS):
        return "malformed"
    return "transient" if names & set(_TRANSIENT) else "fatal"


def describe(err: BaseException, kind: str | None = None) -> str:
    """Returns one plain sentence saying why a call failed (no library exception dump)."""
    kind = kind or classify(err)
    if kind == "malformed":
        return "the model's server sent a reply that is not a chat completion (not JSON, or no choices in it)"
    if kind == "timeout":
        return "the model did not answer in time"
    names = {cls.__name__ for cls in type(err).__mro__}
    if "AuthenticationError" in names:
        return "the model's provider refused the API key (authentication failed); check the key's secret"
    if "APIConnectionError" in names:
        return f"the model's server could not be reached: {_plain(err)}"
    return _plain(err)


def unreachable_url(err: BaseException) -> str | None:
    """Returns the URL a request could not connect to ('' when unknown), None when the error is not that."""
    causes: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and cause not in causes and len(causes) < 20:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    if not any(cls.__name__ in _UNREACHABLE for c in causes for cls in type(c).__mro__):
        return None
    # The innermost request is the one sent: litellm's own wrapper names the provider's default URL.
    urls = [str(url) for c in causes if (url := getattr(getattr(c, "request", None), "url", None))]
    return urls[-1] if urls else ""


def _setting(litellm: Any, model: str, suffix: str) -> str:
    """Returns the environment variable of the model's provider ending in suffix (OPENAI_API_BASE…)."""
    try:
        provider = str(litellm.get_llm_provider(model)[1])
    except Exception:  # litellm.BadRequestError: no provider (the call itself would have said so)
        provider = model.split("/", 1)[0] if "/" in model else "openai"
    return f"{provider.upper()}_{suffix}"


def _unreachable(litellm: Any, model: str, url: str, attempts: int) -> str:
    """Returns the sentence for a server no attempt could connect to, naming the URL tried and its setting."""
    where = f"at {url}" if url else "(no URL known)"
    tries = f" ({attempts} attempts)" if attempts > 1 else ""
    return (f"model '{model}': could not connect to the model's server {where}{tries}; start it, or set "
            f"{_setting(litellm, model, 'API_BASE')} to the server's URL")


def _refused_key(litellm: Any, model: str) -> str:
    """Returns the sentence for a key the provider refused, naming the variable that holds it."""
    variable = _setting(litellm, model, "API_KEY")
    return f"model '{model}': the provider refused the API key (authentication failed); check {variable}"


def _not_found(litellm: Any, model: str, err: BaseException) -> str:
    """Returns the sentence for a 404: no such model (the model setting), or no such endpoint (the base URL)."""
    url = getattr(getattr(err, "request", None), "url", None)
    where = f" at {url}" if url else ""
    said = _plain(err)
    if "model" in said.lower():
        return (f"model '{model}': the server{where} says the model does not exist ({said}); set `model:` in the "
                "program's frontmatter, AUTOLOOP_MODEL or --model to a model it serves")
    return (f"model '{model}': the server{where} answered 404 not found ({said}); set "
            f"{_setting(litellm, model, 'API_BASE')} to the server's OpenAI-compatible URL (often ending in /v1)")


def _request_budget(limits: CallLimits, now: float) -> float | None:
    """Returns the timeout of the next request: the configured one, cut to what is left (None: nothing is left)."""
    left = _left(limits, now)
    if left <= 0.5:  # not worth a request: it could not get an answer
        return None
    return min(limits.timeout, left)


def _left(limits: CallLimits, now: float) -> float:
    return float("inf") if limits.deadline is None else limits.deadline - now


def _gave_up(waited: list[float], limits: CallLimits, last: BaseException | None) -> str:
    """Returns the sentence for a call that used up its attempts or its time."""
    timeouts = [w for w in waited if w >= 0]
    if not waited:
        return "no time was left for a model call before the job's deadline (AUTOLOOP_JOB_TIMEOUT_MINUTES)"
    if timeouts and len(timeouts) == len(waited):
        tries = f" ({len(timeouts)} attempts)" if len(timeouts) > 1 else ""
        cut = "" if min(timeouts) >= limits.timeout else ", all the time left before the job's deadline"
        longest = max(timeouts)
        seconds = f"{longest:g}" if longest < 10 else f"{longest:.0f}"
        return f"the model did not answer within {seconds} s{tries}{cut}"
    why = describe(last, "transient") if last is not None else "the model's server failed"
    return f"{why} ({len(waited)} attempts)"


def _plain(err: BaseException) -> str:
    """Returns an error's first line without litellm's `litellm.XError: XError: OpenAIException -` prefixes."""
    line = error_line(err, None)
    while True:
        head, sep, rest = line.partition(": ")
        if not sep or " " in head.strip() or not rest:
            break
        line = rest
    line = line.removeprefix("OpenAIException - ").strip()
    return line if len(line) <= 300 else line[:297] + "..."
