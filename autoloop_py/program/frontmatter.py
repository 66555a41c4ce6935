"""A program's frontmatter: the settings it may set, read leniently where upstream autoloop is lenient."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autoloop_py.errors import ProgramError
from autoloop_py.program.interval import parse_schedule
from autoloop_py.program.objectives import (
    Objective,
    Scalarisation,
    parse_objectives,
    parse_scalarisation,
    parse_targets,
    unknown_metrics,
)


@dataclass(frozen=True)
class ProgramConfig:
    """Frontmatter settings of a program.

    Attributes:
      schedule: upstream schedule string (`every 6h`, `daily`...), or None for always due.
      target_metric: stop (complete) once the best metric reaches this value.
      metric_direction: "higher" or "lower"; None when neither frontmatter nor prose says.
      timeout_minutes: the CI job's time limit (upstream key); the evaluation's too when evaluation_timeout is unset.
      proposer: default proposer for this program (tune, llm, agent).
      model: litellm model name for the llm proposer.
      evaluation_timeout: seconds one evaluation run may take (default: timeout_minutes, else 300).
      repeats: evaluations per candidate; the median counts.
      min_delta: the smallest improvement that counts as one.
      seed: base seed of every random choice for this program.
      novelty_filter: skip repeats and mostly-recycled candidates, and show recently deleted lines in prompts.
      novelty_threshold: the share of re-added deleted lines at which a candidate counts as recycled
        (novelty.DEFAULT_THRESHOLD; the paper measures about 0.3 for a typical edit).
      isolation: how evaluations and agents are confined: auto (bubblewrap when it works), bwrap, none.
      evaluation_network: let the evaluation use the network (inside bubblewrap it has none by default).
      llm_timeout: seconds one model request may take (`llm-timeout`).
      llm_retries: further requests after a timed-out or failed one (`llm-retries`).
      budget_usd: dollars the program may spend on model calls in all (None: no cap).
      budget_usd_per_day: dollars per UTC day.
      budget_tokens: model tokens in all.
      budget_tokens_per_day: model tokens per UTC day.
      max_file_bytes: the largest Target file a candidate may write; a larger one is rejected before evaluation.
      parallel: the slots each tick runs at once (k parallel iterations of this program, 1 to 64); None: unset
        (one, or in Actions the workflow's `autoloop init --parallel`).
      objectives: the metrics the search trades off, with directions (`objectives:`); empty: the one metric.
      objective_scalarisation: ranks many objectives by a weighted sum instead of Pareto dominance.
      objective_targets: `target-metric` given per objective ({accuracy: 0.95, latency_ms: 20}): the program
        completes once one kept candidate reaches every one.
      extra: frontmatter keys this version does not know, kept for strategies.
    """

    schedule: str | None = None
    target_metric: float | None = None
    metric_direction: str | None = None
    timeout_minutes: float | None = None
    proposer: str | None = None
    model: str | None = None
    evaluation_timeout: float = 300.0
    repeats: int = 1
    min_delta: float = 0.0
    seed: int = 0
    novelty_filter: bool = True
    novelty_threshold: float = 0.8
    isolation: str = "auto"
    evaluation_network: bool = False
    llm_timeout: float = 120.0
    llm_retries: int = 2
    budget_usd: float | None = None
    budget_usd_per_day: float | None = None
    budget_tokens: float | None = None
    budget_tokens_per_day: float | None = None
    max_file_bytes: int = 1 << 20
    parallel: int | None = None
    objectives: tuple[Objective, ...] = ()
    objective_scalarisation: Scalarisation | None = None
    objective_targets: tuple[tuple[str, float], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


# Keys upstream autoloop reads leniently (a bad value is a warning there): what we assume instead.
_LENIENT = {
    "metric_direction": (None, "assuming what the Evaluation prose says, else `higher` (as upstream autoloop)"),
    "target_metric": (None, "ignoring it: the program never completes on its own"),
    "timeout_minutes": (None, "ignoring it"),
}
_FRONTMATTER_RE = re.compile(r"\A((?:\s*<!--.*?-->\s*\n)*)---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)

_KEYS = {
    "schedule": "schedule",
    "target-metric": "target_metric",
    "target_metric": "target_metric",
    "metric-direction": "metric_direction",
    "metric_direction": "metric_direction",
    "timeout-minutes": "timeout_minutes",
    "timeout_minutes": "timeout_minutes",
    "proposer": "proposer",
    "model": "model",
    "evaluation-timeout": "evaluation_timeout",
    "evaluation_timeout": "evaluation_timeout",
    "repeats": "repeats",
    "min-delta": "min_delta",
    "min_delta": "min_delta",
    "seed": "seed",
    "novelty-filter": "novelty_filter",
    "novelty_filter": "novelty_filter",
    "novelty-threshold": "novelty_threshold",
    "novelty_threshold": "novelty_threshold",
    "isolation": "isolation",
    "evaluation-network": "evaluation_network",
    "evaluation_network": "evaluation_network",
    "llm-timeout": "llm_timeout",
    "llm_timeout": "llm_timeout",
    "llm-retries": "llm_retries",
    "llm_retries": "llm_retries",
    **{spelling: name for name in ("budget_usd", "budget_usd_per_day", "budget_tokens", "budget_tokens_per_day")
       for spelling in (name, name.replace("_", "-"))},
    "max-file-bytes": "max_file_bytes",
    "max_file_bytes": "max_file_bytes",
    "parallel": "parallel",
    "objectives": "objectives",
    "objective-scalarisation": "objective_scalarisation",
    "objective_scalarisation": "objective_scalarisation",
}


def parse_frontmatter(
    text: str, rel: Path, problems: list[ProgramError], warnings: list[str]
) -> tuple[ProgramConfig, int]:
    match = _FRONTMATTER_RE.match(text)
    if not match:
        return ProgramConfig(), 0
    first_line = match.group(1).count("\n") + 2
    try:
        data = yaml.safe_load(match.group(2)) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problems.append(ProgramError(f"invalid YAML frontmatter: {getattr(err, 'problem', err)}", rel, line))
        return ProgramConfig(), match.end()
    if not isinstance(data, dict):
        problems.append(ProgramError("frontmatter must be a mapping of `key: value` lines", rel, first_line))
        return ProgramConfig(), match.end()
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        line = first_line + _key_line(match.group(2), str(key))
        field_name = _KEYS.get(str(key))
        if field_name is None:
            extra[str(key)] = value
            continue
        if field_name == "target_metric" and isinstance(value, dict):
            field_name = "objective_targets"  # one target per objective
        try:
            values[field_name] = _coerce(field_name, value)
        except ValueError as err:
            if field_name not in _LENIENT:
                problems.append(ProgramError(f"frontmatter `{key}`: {err}", rel, line))
                continue
            assumed, what = _LENIENT[field_name]
            values[field_name] = assumed
            warnings.append(f"{rel}:{line}: frontmatter `{key}`: {err}; {what}")
    if values.get("timeout_minutes") is not None and values.get("evaluation_timeout") is None:
        # Upstream's programs set only `timeout-minutes`, and evaluate for most of it (autoresearch: 6 minutes).
        values["evaluation_timeout"] = values["timeout_minutes"] * 60
    for field_name, spelled, what in (("objective_scalarisation", "objective_scalarisation", "weigh"),
                                      ("objective_targets", "target_metric", "set targets for")):
        named = values.get(field_name)
        unknown = unknown_metrics(named, values.get("objectives") or ()) if named else []
        if unknown:
            key = next(k for k in data if _KEYS.get(str(k)) == spelled)
            problems.append(ProgramError(f"frontmatter `{key}`: `{unknown[0]}` is not one of the `objectives`; "
                                         f"{what} only declared objectives", rel,
                                         first_line + _key_line(match.group(2), str(key))))
            values.pop(field_name)
    return ProgramConfig(**values, extra=extra), match.end()


def _key_line(block: str, key: str) -> int:
    for i, line in enumerate(block.splitlines()):
        if line.strip().startswith(f"{key}:"):
            return i
    return 0


_DEFAULTED = (
    "evaluation_timeout", "repeats", "min_delta", "seed", "novelty_filter", "novelty_threshold", "llm_timeout",
    "llm_retries", "max_file_bytes", "isolation", "evaluation_network",
)
_ISOLATIONS = ("auto", "bwrap", "none")
# Zero or less would mean "no time at all" (and `.inf` no limit at all), so these must be positive and finite.
_POSITIVE = ("evaluation_timeout", "timeout_minutes")
_LEAST = {"repeats": 1, "llm_retries": 0, "max_file_bytes": 1, "parallel": 1}
MAX_PARALLEL = 64  # strategies.slots.MAX_SLOTS: a tick's slots are Actions matrix jobs


def _coerce(field_name: str, value: Any) -> Any:
    if field_name == "objectives":
        return parse_objectives(value)
    if field_name == "objective_scalarisation":
        return parse_scalarisation(value)
    if field_name == "objective_targets":
        return parse_targets(value)
    if value is None:
        return None if field_name not in _DEFAULTED else _default(field_name)
    if field_name == "isolation":
        if str(value).strip().lower() not in _ISOLATIONS:
            raise ValueError(f"must be one of {', '.join(_ISOLATIONS)}, got {value!r}")
        return str(value).strip().lower()
    if field_name in ("novelty_filter", "evaluation_network"):
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return value
    if field_name == "schedule":
        return _schedule(str(value).strip())
    if field_name in ("proposer", "model"):
        return str(value).strip()
    if field_name == "metric_direction":
        direction = str(value).strip().strip("'\"").lower()
        if direction not in ("higher", "lower"):
            raise ValueError(f"must be `higher` or `lower`, got {value!r}")
        return direction
    if field_name in ("repeats", "seed", "llm_retries", "max_file_bytes", "parallel"):
        if isinstance(value, bool) or not isinstance(value, int) or (field_name != "seed" and value < _LEAST[field_name]):
            least = f" >= {_LEAST[field_name]}" if field_name != "seed" else ""
            raise ValueError(f"must be a whole number{least}, got {value!r}")
        if field_name == "parallel" and value > MAX_PARALLEL:
            raise ValueError(f"must be at most {MAX_PARALLEL} slots per tick, got {value!r}")
        return value
    if isinstance(value, bool):
        raise ValueError(f"must be a number, got {value!r}")
    try:
        number = float(str(value).strip().strip("'\""))
    except ValueError:
        raise ValueError(f"must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"must be a finite number, got {value!r}")
    if field_name in _POSITIVE and number <= 0:
        raise ValueError(f"must be a number above 0, got {value!r}")
    if field_name != "target_metric" and number < 0:
        raise ValueError(f"must be a non-negative number, got {value!r}")
    if field_name == "llm_timeout" and number <= 0:
        raise ValueError(f"must be a number of seconds above 0, got {value!r}")
    if field_name == "novelty_threshold" and not 0 < number <= 1:
        raise ValueError(f"must be a share above 0 and at most 1 (e.g. 0.8), got {value!r}")
    return number


def _schedule(text: str) -> str:
    """Returns the schedule when it reads as an interval above zero; raises ValueError saying why not."""
    if text:
        parse_schedule(text)
    return text


def _default(field_name: str) -> Any:
    return getattr(ProgramConfig(), field_name)
