"""Models: the frontmatter's `models:` list (litellm model strings with sampling controls) and `model-selection`.

A list item is a bare model string (`openai/gpt-4o-mini`) or a mapping with `model:` and optional settings.
An item with `role: guide` answers a strategy's own calls (AdaEvolve's guide, EvoX's meta call) instead of
proposing; without one, the guide calls go to the model the iteration drew. Under `novelty: embedding`, a
`role: embedding` entry embeds candidates and a `role: judge` entry confirms that a similar one is a repeat.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

SELECTIONS = ("weighted", "ucb", "thompson")
PROPOSE, GUIDE, EMBEDDING, JUDGE = "propose", "guide", "embedding", "judge"
ROLES = (PROPOSE, GUIDE, EMBEDDING, JUDGE)
# An API key's variable must end in _KEY: the redactor hides such values (redact.SECRET_PATTERNS), and a
# program cannot send the runner's other secrets (GITHUB_TOKEN…) to its api-base as a key.
_ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*_KEY")
_SCIENTIFIC_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+")  # 5e-07, 1E6, 2.5e+3
# frontmatter spelling -> (ModelSpec field, kind)
_FIELDS = {
    "model": ("name", "text"),
    "weight": ("weight", "number"),
    "temperature": ("temperature", "number"),
    "max-tokens": ("max_tokens", "count"),
    "top-p": ("top_p", "share"),
    "api-base": ("api_base", "text"),
    "api-key-env": ("api_key_env", "env"),
    "timeout": ("timeout", "positive"),
    "role": ("role", "role"),
    "input-cost-per-token": ("input_cost", "number"),
    "output-cost-per-token": ("output_cost", "number"),
}


@dataclass(frozen=True)
class ModelSpec:
    """One model of the program and how to call it.

    Attributes:
      name: the litellm model string (`openai/gpt-4o-mini`, `anthropic/claude-…`).
      weight: its share of the draw under `model-selection: weighted` (0: never drawn).
      temperature: sampling temperature sent with each request (None: the provider's default).
      max_tokens: the most tokens a reply may have (None: the provider's default).
      top_p: nucleus sampling share (None: the provider's default).
      api_base: the server to send requests to (None: litellm's for the provider).
      api_key_env: the environment variable holding the API key (None: litellm's for the provider).
      timeout: seconds one request may take, over `llm-timeout` (None: `llm-timeout`).
      role: `propose` (drawn for proposals), `guide` (a strategy's guide or meta calls), `embedding` or `judge`
        (the novelty filter's, under `novelty: embedding`).
      input_cost: dollars per prompt token, when litellm's price list does not know the model.
      output_cost: dollars per completion token, likewise.
    """

    name: str
    weight: float = 1.0
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    timeout: float | None = None
    role: str = PROPOSE
    input_cost: float | None = None
    output_cost: float | None = None

    def params(self) -> dict[str, Any]:
        """Returns the litellm arguments this entry sets (sampling controls and server), the key left out."""
        named = {"temperature": self.temperature, "max_tokens": self.max_tokens, "top_p": self.top_p,
                 "api_base": self.api_base}
        return {key: value for key, value in named.items() if value is not None}

    def priced(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Returns the dollars of a reply by this entry's own prices (None when it sets none)."""
        if self.input_cost is None and self.output_cost is None:
            return None
        return prompt_tokens * (self.input_cost or 0.0) + completion_tokens * (self.output_cost or 0.0)


def parse_models(value: Any) -> tuple[ModelSpec, ...]:
    """Returns the entries of a `models:` value; raises ValueError saying which item is wrong and how."""
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ValueError("must be a list of litellm model strings or `- model: …` mappings")
    specs = tuple(_entry(item, number) for number, item in enumerate(value, 1))
    names = [(spec.name, spec.role) for spec in specs]
    for spec in specs:
        if names.count((spec.name, spec.role)) > 1:
            raise ValueError(f"{spec.name} is listed twice with role {spec.role}; keep one entry")
    # The novelty filter's entries alone are fine: the proposer is then `tune`, an agent, or AUTOLOOP_MODEL.
    if all(spec.role == GUIDE for spec in specs):
        raise ValueError("every entry has `role: guide`: list at least one model that proposes")
    return specs


def proposers(specs: tuple[ModelSpec, ...]) -> tuple[ModelSpec, ...]:
    """Returns the entries drawn for proposals."""
    return tuple(spec for spec in specs if spec.role == PROPOSE)


def with_role(specs: tuple[ModelSpec, ...], role: str) -> ModelSpec | None:
    """Returns the first entry with the role (None: there is none)."""
    return next((spec for spec in specs if spec.role == role), None)


def _entry(item: Any, number: int) -> ModelSpec:
    where = f"item {number}"
    if isinstance(item, str):
        item = {"model": item}
    if not isinstance(item, dict):
        raise ValueError(f"{where} must be a model string or a mapping with `model:`, got {item!r}")
    named = item.get("model")
    if isinstance(named, str) and named.strip():
        where = f"{where} ({named.strip()})"
    values: dict[str, Any] = {}
    for key, raw in item.items():
        spelling = str(key).replace("_", "-")
        if spelling not in _FIELDS:
            raise ValueError(f"{where}: unknown setting `{key}`; use one of {', '.join(_FIELDS)}")
        name, kind = _FIELDS[spelling]
        try:
            values[name] = _value(kind, raw)
        except ValueError as err:
            raise ValueError(f"{where}: `{key}` {err}") from None
    if not values.get("name"):
        raise ValueError(f"{where} has no `model:` (a litellm model string such as openai/gpt-4o-mini)")
    return ModelSpec(**values)


def _value(kind: str, raw: Any) -> Any:
    if kind in ("text", "env", "role"):
        text = "" if raw is None else str(raw).strip()
        if kind == "text" and (not text or any(c.isspace() or c in "`|<>" for c in text)):
            raise ValueError(f"must be one word without `, |, < or >, got {raw!r}")
        if kind == "env" and not _ENV_RE.fullmatch(text):
            raise ValueError(
                f"must name an environment variable ending in _KEY (e.g. MY_PROVIDER_API_KEY), got {raw!r}"
            )
        if kind == "role" and text not in ROLES:
            raise ValueError(f"must be one of {', '.join(ROLES)}, got {raw!r}")
        return text
    number = _number(raw)
    if kind == "count":
        if number is None or not number.is_integer() or number < 1:
            raise ValueError(f"must be a whole number >= 1, got {raw!r}")
        return int(number)
    if number is None or number < 0:
        raise ValueError(f"must be a finite number >= 0, got {raw!r}")
    if kind == "share" and number > 1:
        raise ValueError(f"must be a share from 0 to 1, got {raw!r}")
    if kind == "positive" and number <= 0:
        raise ValueError(f"must be a number of seconds above 0, got {raw!r}")
    return number


def _number(raw: Any) -> float | None:
    """Returns the finite number raw is written as, None when it is none.

    PyYAML reads YAML 1.1, where `5e-07` (no dot in the mantissa) is a string, not a float: such a string
    counts as the number it spells, as `5.0e-07` would.
    """
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str) and _SCIENTIFIC_RE.fullmatch(raw.strip()):
        raw = float(raw)
    if not isinstance(raw, (int, float)) or not math.isfinite(raw):
        return None
    return float(raw)
