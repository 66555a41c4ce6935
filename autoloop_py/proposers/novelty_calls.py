"""The novelty filter's model calls: a `role: embedding` entry's vectors, and a `role: judge` entry's verdict."""

from __future__ import annotations

import re
from typing import Sequence

from autoloop_py.program.models import ModelSpec
from autoloop_py.proposers import llm
from autoloop_py.proposers.base import Usage
from autoloop_py.proposers.llm_call import CallLimits
from autoloop_py.proposers.model_calls import InProcess, ModelCalls
from autoloop_py.render import render
from autoloop_py.strategies.prompt import fence_for

_VERDICT_RE = re.compile(r"\b(DIFFERENT|SAME)\b", re.IGNORECASE)


def embed(
    spec: ModelSpec, texts: Sequence[str], *, limits: CallLimits, spent: list[Usage] | None = None,
    models: ModelCalls | None = None,
) -> list[tuple[float, ...]]:
    """Returns the entry's vector of each text, in one request (its usage appended to spent)."""
    kwargs = llm.request_kwargs(spec, [])
    kwargs.pop("messages")
    for sampling in ("temperature", "max_tokens", "top_p"):  # an embedding request takes none of them
        kwargs.pop(sampling, None)
    found = (models or InProcess()).embedding({**kwargs, "input": list(texts)}, llm.spec_limits(spec, limits))
    if spent is not None:
        cost = spec.priced(found.prompt_tokens, 0)
        spent.append(Usage(found.prompt_tokens, 0, found.cost if cost is None else cost, spec.name))
    return list(found.vectors)


def judge_same(
    spec: ModelSpec, candidate: str, evaluated: str, language: str, *, limits: CallLimits,
    spent: list[Usage] | None = None, models: ModelCalls | None = None,
) -> tuple[bool, str]:
    """Returns (whether the judge calls the candidate the same as the evaluated program, its first line).

    A reply that says neither DIFFERENT nor SAME counts as different: the candidate is evaluated.
    """
    fence = fence_for(candidate + evaluated)
    prompt = render("novelty_judge_prompt.md.j2", candidate=_ended(candidate), evaluated=_ended(evaluated),
                    language=language, fence=fence)
    reply = llm.complete(spec, prompt, limits=limits, spent=spent, models=models).strip()
    line = next((part.strip() for part in reply.splitlines() if part.strip()), "")
    word = _VERDICT_RE.search(line)
    return (word is not None and word.group(1).upper() == "SAME"), line[:200]


def _ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
