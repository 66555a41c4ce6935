"""A program's frontmatter: the settings it may set, read leniently where upstream autoloop is lenient."""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import yaml

from autoloop_py.errors import ProgramError
from autoloop_py.program.interval import parse_schedule
from autoloop_py.program.holdout import Holdout, parse_holdout, parse_tolerance
from autoloop_py.program.stages import Stage, parse_stages
from autoloop_py.program.models import EMBEDDING, JUDGE, SELECTIONS, ModelSpec, parse_models
from autoloop_py.program.runner import parse_container, parse_runs_on
from autoloop_py.program.objectives import (
    DIRECTIONS,
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
      models: the `models:` list (program/models.py); empty when only `model:` (or nothing) is set.
      model_selection: how a proposal's model is drawn from `models:`: weighted, ucb or thompson.
      prompt_selection: how a proposal's instruction variant is drawn from the state file's Prompts table (the same
        methods as model_selection).
      prompt_evolve_every: every this many iterations a guide model writes a new variant from the best and worst
        (0: never; a variant needs the llm proposer).
      evaluation_timeout: seconds one evaluation run may take (default: timeout_minutes, else 300).
      repeats: evaluations per candidate; the median counts.
      min_delta: the smallest improvement that counts as one.
      seed: base seed of every random choice for this program.
      novelty_filter: skip repeats and mostly-recycled candidates, and show recently deleted lines in prompts.
      novelty: `exact` (repeats and recycled lines only) or `embedding` (also candidates too similar to an
        evaluated one, by a `role: embedding` model's vectors or, without one, local code vectors).
      novelty_threshold: under `exact`, the share of re-added deleted lines at which a candidate counts as
        recycled (None: novelty.DEFAULT_THRESHOLD; the paper measures about 0.3 for a typical edit); under
        `embedding`, the cosine similarity above which a candidate is skipped (None: novelty.DEFAULT_SIMILARITY).
      isolation: how evaluations and agents are confined: auto (bubblewrap when it works), bwrap, none.
      evaluation_network: let the evaluation use the network (inside bubblewrap it has none by default).
      agent_network: what an outside agent's network reaches: `host` (the host's own network, its loopback
        services and abstract UNIX sockets included) or `outside-only` (a namespace of its own whose only way
        out is slirp4netns, with the host's loopback cut off; needs bubblewrap and slirp4netns).
      llm_timeout: seconds one model request may take (`llm-timeout`).
      llm_retries: further requests after a timed-out or failed one (`llm-retries`).
      budget_usd: dollars the program may spend on model calls in all (None: no cap).
      budget_usd_per_day: dollars per UTC day.
      budget_tokens: model tokens in all.
      budget_tokens_per_day: model tokens per UTC day.
      max_file_bytes: the largest Target file a candidate may write; a larger one is rejected before evaluation.
      max_memory: bytes of address space each evaluation process may map (RLIMIT_AS, `max-memory`, e.g. `4GiB`);
        None: half the machine's memory, at least 4 GiB and at most 32 GiB.
      max_disk: bytes an evaluation's copy may hold when it ends (`max-disk`, e.g. `2GiB`); over it is an error.
      parallel: the slots each tick runs at once (k parallel iterations of this program, 1 to 64); None: unset
        (one, or in Actions the workflow's `autoloop init --parallel`).
      runs_on: the runner labels of the program's propose job in GitHub Actions (`runs-on:`); (): the workflow's
        default (`autoloop init --runs-on`, else ubuntu-latest).
      container: the job container of its propose job (`container:`): an image, or a mapping with `image:`.
      evaluation_report: where a run's report is read: `file` (the file AUTOLOOP_RESULT names, read once the
        command exited), `stdout` (upstream's last JSON object printed), or `auto` (file when the evaluation
        command or a file it names mentions AUTOLOOP_RESULT, else stdout).
      feedback_bytes: the most bytes of an evaluation's feedback one prompt shows per candidate.
      evaluation_stages: the cascade of evaluations, cheap first (`evaluation-stages`; () runs the one command).
      evaluation_holdout: the held-out evaluation run only for a candidate about to become the best, never shown
        to the model (`evaluation-holdout`; None: none).
      holdout_must_not_drop: how much worse than the incumbent's a candidate's held-out value may be before it is
        refused (`holdout-must-not-drop`: true is 0; None: never refused for it).
      objectives: the metrics the search trades off, with directions (`objectives:`); empty: the one metric.
      objective_scalarisation: ranks many objectives by a weighted sum instead of Pareto dominance.
      objective_targets: `target-metric` given per objective ({accuracy: 0.95, latency_ms: 20}): the program
        completes once one kept candidate reaches every one.
      tracking: where `run` sends each recorded candidate as it goes (`tracking: csv:runs.csv`, `mlflow:mlruns`,
        `wandb:wandb`): (destination, where) with `where` relative to the repository; None: nowhere.
      extra: frontmatter keys kept as written: those other modules read (PASSTHROUGH_KEYS) and unknown ones
        (each of which `check` warns about, with the nearest known key).
    """

    schedule: str | None = None
    target_metric: float | None = None
    metric_direction: str | None = None
    timeout_minutes: float | None = None
    proposer: str | None = None
    model: str | None = None
    models: tuple[ModelSpec, ...] = ()
    model_selection: str = "weighted"
    prompt_selection: str = "weighted"
    prompt_evolve_every: int = 0
    evaluation_timeout: float = 300.0
    repeats: int = 1
    min_delta: float = 0.0
    seed: int = 0
    novelty_filter: bool = True
    novelty: str = "exact"
    novelty_threshold: float | None = None
    isolation: str = "auto"
    evaluation_network: bool = False
    agent_network: str = "host"
    llm_timeout: float = 120.0
    llm_retries: int = 2
    budget_usd: float | None = None
    budget_usd_per_day: float | None = None
    budget_tokens: float | None = None
    budget_tokens_per_day: float | None = None
    max_file_bytes: int = 1 << 20
    max_memory: int | None = None
    max_disk: int = 2 << 30
    parallel: int | None = None
    runs_on: tuple[str, ...] = ()
    container: str | dict[str, Any] | None = None
    evaluation_report: str = "auto"
    feedback_bytes: int = 4096
    evaluation_stages: tuple[Stage, ...] = ()
    evaluation_holdout: Holdout | None = None
    holdout_must_not_drop: float | None = None
    objectives: tuple[Objective, ...] = ()
    objective_scalarisation: Scalarisation | None = None
    objective_targets: tuple[tuple[str, float], ...] = ()
    tracking: tuple[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# Keys upstream autoloop reads leniently (a bad value is a warning there): what we assume instead.
_LENIENT = {
    "metric_direction": (None, "assuming what the Evaluation prose says, else `higher` (as upstream autoloop)"),
    "target_metric": (None, "ignoring it: the program never completes on its own"),
    "timeout_minutes": (None, "ignoring it"),
}
_FRONTMATTER_RE = re.compile(r"\A((?:\s*<!--.*?-->\s*\n)*)---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)

# Every setting's frontmatter key, spelled with `_` or `-` (`evaluation-timeout`); per-objective targets are read
# from `target-metric`.
_KEYS = {spelling: item.name for item in fields(ProgramConfig) if item.name not in ("objective_targets", "extra")
         for spelling in (item.name, item.name.replace("_", "-"))}
# Keys kept in `extra` for the modules that read them (program.requirements, loop.ci_gate): known, not warned about.
PASSTHROUGH_KEYS = ("requirements", "ci-gate", "ci_gate")
PROPOSERS = ("tune", "llm", "agent")  # proposers.get_proposer's names
TRACKERS = ("csv", "mlflow", "wandb")  # analysis/tracking.py sends to these


def parse_frontmatter(text: str, rel: Path, problems: list[ProgramError], warnings: list[str]) -> ProgramConfig:
    match = _FRONTMATTER_RE.match(text)
    if not match:
        return ProgramConfig()
    first_line = match.group(1).count("\n") + 2
    try:
        data = yaml.safe_load(match.group(2)) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problems.append(ProgramError(f"invalid YAML frontmatter: {getattr(err, 'problem', err)}", rel, line))
        return ProgramConfig()
    if not isinstance(data, dict):
        problems.append(ProgramError("frontmatter must be a mapping of `key: value` lines", rel, first_line))
        return ProgramConfig()
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        rows = enumerate(match.group(2).splitlines())
        line = first_line + next((i for i, row in rows if row.strip().startswith(f"{key}:")), 0)
        field_name = _KEYS.get(str(key))
        if field_name is None:
            extra[str(key)] = value
            if str(key) not in PASSTHROUGH_KEYS:
                warnings.append(f"{rel}:{line}: unknown frontmatter key `{key}`, ignored{_nearest_hint(str(key))}")
            continue
        if field_name == "target_metric" and isinstance(value, dict):
            field_name = "objective_targets"  # one target per objective
        try:
            values[field_name] = _coerce(field_name, value)
        except ValueError as err:
            if field_name not in _LENIENT:
                at = _item_line(match.group(2), line - first_line, str(err)) if field_name == "models" else 0
                problems.append(ProgramError(f"frontmatter `{key}`: {err}", rel, line + at))
                continue
            assumed, what = _LENIENT[field_name]
            values[field_name] = assumed
            warnings.append(f"{rel}:{line}: frontmatter `{key}`: {err}; {what}")
    if values.get("model") and values.get("models"):
        problems.append(ProgramError("set `model:` or `models:`, not both (list the one model under `models:`)",
                                     rel, key_line(text, "model")))
    unused = [s for s in values.get("models") or () if s.role in (EMBEDDING, JUDGE)]
    if unused and values.get("novelty") != "embedding":
        warnings.append(f"{rel}:{key_line(text, 'models')}: frontmatter `models`: the `role: {unused[0].role}` entry "
                        f"({unused[0].name}) is not used without `novelty: embedding`")
    if values.get("novelty") == "embedding" and values.get("novelty_filter") is False:
        warnings.append(f"{rel}:{key_line(text, 'novelty')}: frontmatter `novelty: embedding` does nothing with "
                        "`novelty-filter: false`")
    if values.get("timeout_minutes") is not None and values.get("evaluation_timeout") is None:
        # Upstream's programs set only `timeout-minutes`, and evaluate for most of it (autoresearch: 6 minutes).
        values["evaluation_timeout"] = values["timeout_minutes"] * 60
    if values.get("holdout_must_not_drop") is not None and values.get("evaluation_holdout") is None:
        key = next(k for k in data if _KEYS.get(str(k)) == "holdout_must_not_drop")
        problems.append(ProgramError(f"frontmatter `{key}` needs an `evaluation-holdout:` command to compare with",
                                     rel, key_line(text, "holdout_must_not_drop")))
        values.pop("holdout_must_not_drop")
    for field_name, spelled, what in (("objective_scalarisation", "objective_scalarisation", "weigh"),
                                      ("objective_targets", "target_metric", "set targets for")):
        named = values.get(field_name)
        unknown = unknown_metrics(named, values.get("objectives") or ()) if named else []
        if unknown:
            key = next(k for k in data if _KEYS.get(str(k)) == spelled)
            problems.append(ProgramError(f"frontmatter `{key}`: `{unknown[0]}` is not one of the `objectives`; "
                                         f"{what} only declared objectives", rel, key_line(text, spelled)))
            values.pop(field_name)
    return ProgramConfig(**values, extra=extra)


def _item_line(block: str, key_line: int, message: str) -> int:
    """Returns how far below its key the `models:` item an error names (`item 3 (m): `top-p` …`) is (0: the key).

    The line is the setting's own when the message names one and the item spells it on a line of its own.
    """
    found = re.match(r"item (\d+)(?: \([^)]*\))?(?:: (?:unknown setting )?`([^`]+)`)?", message)
    if found is None:
        return 0
    lines = block.splitlines()[key_line + 1:]
    items = [i for i, line in enumerate(lines, 1) if line.lstrip().startswith("- ")]
    number = int(found.group(1))
    if number > len(items):
        return 0
    start, end = items[number - 1], items[number] if number < len(items) else len(lines) + 1
    setting = found.group(2)
    for i in range(start, end):
        if setting and lines[i - 1].lstrip(" -").startswith(f"{setting}:"):
            return i
    return start


def _nearest_hint(key: str) -> str:
    """Returns `; did you mean `x`?` naming the known key nearest to an unknown one ('' when none is near)."""
    known = [*_KEYS, *PASSTHROUGH_KEYS]
    folded = key.strip().lower()
    near = [k for k in known if k == folded] or difflib.get_close_matches(folded, known, n=1, cutoff=0.6)
    return f"; did you mean `{near[0]}`?" if near else f" (known keys: {', '.join(sorted(set(_KEYS.values())))})"


def key_line(text: str, field_name: str) -> int | None:
    """Returns the 1-based line of program.md's frontmatter key for field_name, in any spelling (None: not set)."""
    match = _FRONTMATTER_RE.match(text)
    if not match:
        return None
    spellings = tuple(f"{key}:" for key, name in _KEYS.items() if name == field_name)
    found = next((i for i, line in enumerate(match.group(2).splitlines()) if line.strip().startswith(spellings)), None)
    return None if found is None else match.group(1).count("\n") + 2 + found


_CHOICES = {
    "isolation": ("auto", "bwrap", "none"),
    "evaluation_report": ("auto", "file", "stdout"),  # loop/evaluation_report.CHANNELS
    "agent_network": ("host", "outside-only"),  # sandbox/policy.AGENT_NETWORKS
    "novelty": ("exact", "embedding"),
    "model_selection": SELECTIONS,
    "prompt_selection": SELECTIONS,
    "proposer": PROPOSERS,
}
# Settings read by a parser of their own, an empty value included (its ValueError says what is wrong).
_READ_EVEN_EMPTY: dict[str, Callable[[Any], Any]] = {
    "objectives": parse_objectives, "objective_scalarisation": parse_scalarisation, "objective_targets": parse_targets,
    "evaluation_holdout": parse_holdout, "holdout_must_not_drop": parse_tolerance,
}
# Zero or less would mean "no time at all" (and `.inf` no limit at all), so these must be positive and finite.
_POSITIVE = ("evaluation_timeout", "timeout_minutes")
_LEAST = {
    "repeats": 1, "llm_retries": 0, "prompt_evolve_every": 0, "max_file_bytes": 1, "parallel": 1, "feedback_bytes": 0,
}
_TYPES = {item.name: item.type for item in fields(ProgramConfig)}  # annotations as written (`int | None`)
MAX_PARALLEL = 64  # strategies.slots.MAX_SLOTS: a tick's slots are Actions matrix jobs


def _coerce(field_name: str, value: Any) -> Any:
    if field_name in _READ_EVEN_EMPTY:
        return _READ_EVEN_EMPTY[field_name](value)
    if value is None:
        return getattr(ProgramConfig(), field_name)  # an empty value is the default (None where there is none)
    if field_name in _CHOICES:
        if str(value).strip().lower() not in _CHOICES[field_name]:
            raise ValueError(f"must be one of {', '.join(_CHOICES[field_name])}, got {value!r}")
        return str(value).strip().lower()
    if field_name in _PARSERS:
        return _PARSERS[field_name](value)
    if _TYPES[field_name] == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return value
    if field_name == "metric_direction":
        direction = str(value).strip().strip("'\"").lower()
        if direction not in DIRECTIONS:
            raise ValueError(f"must be `higher` or `lower`, got {value!r}")
        return direction
    if _TYPES[field_name] in ("int", "int | None"):
        least = _LEAST.get(field_name)
        if isinstance(value, bool) or not isinstance(value, int) or (least is not None and value < least):
            raise ValueError(f"must be a whole number{'' if least is None else f' >= {least}'}, got {value!r}")
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


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000**2, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1000**3, "gib": 1 << 30, "t": 1 << 40, "tb": 1000**4, "tib": 1 << 40}  # fmt: skip
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")
MIN_SIZE = 1 << 20


def parse_size(value: Any) -> int:
    """Returns the bytes a size names (`4GiB`, `512 MiB`, `2G`, `1000000`).

    Raises ValueError for an unreadable size or one below 1 MiB.
    """
    match = _SIZE_RE.fullmatch(str(value)) if not isinstance(value, bool) else None
    unit = _UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ValueError(f"must be a size such as `4GiB`, `512MiB` or a number of bytes, got {value!r}")
    size = int(float(match.group(1)) * unit)
    if size < MIN_SIZE:
        raise ValueError(f"must be at least 1 MiB, got {value!r}")
    return size


def parse_tracking(value: Any) -> tuple[str, str]:
    """Returns (destination, where) of a `tracking:` value such as `csv:runs.csv` or `mlflow:http://host:5000`."""
    to, _, where = str(value).partition(":")
    if to.strip().lower() not in TRACKERS or not where.strip():
        raise ValueError(f"must be DESTINATION:WHERE with a destination of {', '.join(TRACKERS)} "
                         f"(e.g. `csv:runs.csv`, `mlflow:mlruns`), got {value!r}")
    return to.strip().lower(), where.strip()


def _schedule(text: str) -> str:
    """Returns the schedule when it reads as an interval above zero; raises ValueError saying why not."""
    if text:
        parse_schedule(text)
    return text


# Settings read by a parser of their own once set (the others of _READ_EVEN_EMPTY).
_PARSERS: dict[str, Callable[[Any], Any]] = {
    "schedule": lambda value: _schedule(str(value).strip()), "max_memory": parse_size, "max_disk": parse_size,
    "evaluation_stages": parse_stages, "runs_on": parse_runs_on, "container": parse_container, "models": parse_models,
    "tracking": parse_tracking, "model": lambda value: str(value).strip(),
}
