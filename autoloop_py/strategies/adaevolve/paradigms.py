"""AdaEvolve's paradigm tracker (level 3): the improvement window, rotation of ideas, and the guide reply (§2.2).

The guide call itself is an effect left to the runner; this module says when to make it
(`wants_paradigms`), validates its JSON reply (`parse_paradigms`) and installs the ideas.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from typing import Any, Sequence

from autoloop_py.errors import EditError
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.state import NEG_INF, AdaEvolveState, Paradigm, TriedParadigm
from autoloop_py.strategies.backoff import backoff_wait

logger = logging.getLogger(__name__)

SUCCESS_MARGIN = 0.001
REQUIRED = ("idea", "description", "approach_type")
_FENCE_RE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_QUOTE_CHARS = 160
_JSON_KINDS = {str: "string", int: "number", float: "number", list: "array", bool: "boolean", type(None): "null"}


class GuideReplyError(EditError):
    """The guide LLM's paradigm reply is not the JSON asked for; the message says what is wrong."""


# ---------------------------------------------------------------- the window and the ideas


def tick(state: AdaEvolveState, new_best: bool, config: AdaEvolveConfig) -> AdaEvolveState:
    """Returns the state with a window tick (1 for a new global best), keeping the last W."""
    window = (*state.window, 1 if new_best else 0)
    return replace(state, window=window[max(0, len(window) - config.paradigm_window_size):])


def active_paradigm(state: AdaEvolveState, config: AdaEvolveConfig) -> int | None:
    """Returns the index of the idea to apply: cur, or the next usable one cyclically; None when exhausted."""
    count = len(state.paradigms)
    for step in range(count):
        index = (state.current_paradigm + step) % count
        if usable(state.paradigms[index], config):
            return index
    return None


def usable(paradigm: Paradigm, config: AdaEvolveConfig) -> bool:
    """Returns whether the idea may still be applied: not retired, and used fewer than paradigm_max_uses times."""
    return not paradigm.retired and paradigm.uses < config.paradigm_max_uses


def use_paradigm(state: AdaEvolveState, index: int, config: AdaEvolveConfig) -> AdaEvolveState:
    """Returns the state after one use of an idea; cur moves to the next usable idea cyclically (A7)."""
    ideas = list(state.paradigms)
    ideas[index] = replace(ideas[index], uses=ideas[index].uses + 1)
    after = replace(state, paradigms=tuple(ideas), current_paradigm=(index + 1) % len(ideas))
    found = active_paradigm(after, config)
    return replace(after, current_paradigm=index if found is None else found)


def wants_paradigms(state: AdaEvolveState, config: AdaEvolveConfig) -> bool:
    """Returns whether the next iteration starts with a guide call: a full, stagnant window and no active idea (A6).

    After guide replies without a valid idea it waits paradigm_retry_cooldown iterations, doubling with each such
    reply in a row (a cooldown of 0 re-asks at once, as the reference).
    """
    window, size = state.window, config.paradigm_window_size
    if not config.use_paradigm_breakthrough or len(window) != size or active_paradigm(state, config) is not None:
        return False
    failed = state.guide_failed_at
    wait = backoff_wait(max(1, state.guide_failures), config.paradigm_retry_cooldown)
    waited = failed is None or state.iteration + 1 - failed > wait
    return waited and sum(window) / size < config.paradigm_improvement_threshold


def install_paradigms(state: AdaEvolveState, ideas: Sequence[Paradigm], config: AdaEvolveConfig) -> AdaEvolveState:
    """Returns the state with new ideas installed and the used old ones archived; no idea marks a failed call."""
    if not ideas:
        return replace(state, guide_failed_at=state.iteration + 1, guide_failures=state.guide_failures + 1)
    both = state.best_during != NEG_INF and state.best_at_gen != NEG_INF
    gain = state.best_during - state.best_at_gen if both else 0.0
    outcome = "SUCCESS" if gain > SUCCESS_MARGIN else "FAILED"
    used = tuple(TriedParadigm(p.idea, p.approach_type, outcome, round(gain, 4)) for p in state.paradigms if p.uses)
    tried = (*state.tried, *used)
    keep = config.paradigm_max_tried
    fresh = tuple(replace(p, uses=0, retired=False) for p in ideas[: config.paradigm_num_to_generate])
    return replace(
        state, paradigms=fresh, current_paradigm=0, best_at_gen=state.global_best, best_during=state.global_best,
        tried=tried[len(tried) - keep :] if keep else (), guide_failed_at=None, guide_failures=0,
    )


# ---------------------------------------------------------------- the guide reply


def parse_paradigms(reply_text: str) -> list[Paradigm]:
    """Returns the valid ideas of a guide reply `{"ideas": [...]}`; raises GuideReplyError saying what is wrong."""
    data = _json_object(reply_text)
    ideas = data.get("ideas")
    if not isinstance(ideas, list):
        keys = ", ".join(f'"{k}"' for k in data) or "none"
        raise GuideReplyError(f'the JSON object has no "ideas" list (its keys: {keys}); '
                              'reply with {"ideas": [{"idea": ..., "description": ..., "approach_type": ...}]}')
    if not ideas:
        raise GuideReplyError('the "ideas" list is empty; give at least one idea')
    found: dict[tuple[str, str], Paradigm] = {}
    problems: list[str] = []
    for number, item in enumerate(ideas, start=1):
        paradigm, problem = _paradigm(item)
        if problem:
            problems.append(f"idea {number} {problem}")
        elif paradigm is not None:  # a repeat (same idea and approach, any case) keeps the first
            found.setdefault((paradigm.idea.casefold(), paradigm.approach_type.casefold()), paradigm)
    if not found:
        raise GuideReplyError("no valid idea: " + "; ".join(problems))
    for problem in problems:
        logger.warning("guide reply: %s; skipped", problem)
    return list(found.values())


def _json_object(text: str) -> dict[str, Any]:
    """Returns the first JSON object of a reply: a fenced block first, else the first `{` that parses."""
    decoder = json.JSONDecoder()
    first_error: json.JSONDecodeError | None = None
    candidates = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    for chunk in candidates:
        for start in (i for i, char in enumerate(chunk) if char == "{"):
            try:
                value, _ = decoder.raw_decode(chunk, start)
            except json.JSONDecodeError as error:
                first_error = first_error or error
                continue
            if isinstance(value, dict):
                return value
    if first_error is not None:
        raise GuideReplyError(f"the reply's JSON does not parse: {first_error.msg} at line {first_error.lineno} "
                              f"column {first_error.colno}; send one valid JSON object")
    quoted = " ".join(text.split())[:_QUOTE_CHARS]
    raise GuideReplyError(f'the reply holds no JSON object (it reads "{quoted}"); send {{"ideas": [...]}}')


def _paradigm(item: Any) -> tuple[Paradigm | None, str]:
    """Returns (the idea, '') or (None, what is wrong with it)."""
    if not isinstance(item, dict):
        return None, f"is not an object (it is a JSON {_JSON_KINDS.get(type(item), 'value')})"
    missing = [key for key in REQUIRED if not isinstance(item.get(key), str) or not item[key].strip()]
    if missing:
        return None, "has no " + ", ".join(f"`{key}`" for key in missing) + " text"
    cautions = item.get("cautions", "")
    if isinstance(cautions, list):
        cautions = "; ".join(str(part) for part in cautions)
    target = item.get("what_to_optimize")
    return Paradigm(
        idea=_line(item["idea"]),
        description=_line(item["description"]),
        approach_type=_line(item["approach_type"]).strip("`").replace(" — ", " - ").strip(),
        what_to_optimize=_line(target) if isinstance(target, str) and target.strip() else "score",
        cautions=_line(str(cautions)) if cautions else "",
    ), ""


def _line(text: str) -> str:
    return " ".join(text.split())
