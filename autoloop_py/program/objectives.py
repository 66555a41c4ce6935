"""A program's objectives: the metrics it trades off, each with a direction, and an optional scalarisation.

Frontmatter shapes (YAML):

    objectives: [{accuracy: higher}, {latency_ms: lower}]     # a list of one-key mappings, in order
    objectives: {accuracy: higher, latency_ms: lower}         # or one mapping (its order is kept)
    objective-scalarisation: {accuracy: 1, latency_ms: -0.01} # weighted sum of the raw metrics
    target-metric: {accuracy: 0.95, latency_ms: 20}           # complete once one kept candidate meets them all

Parsing raises ValueError with the expected shape; frontmatter.py adds the file and line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

DIRECTIONS = ("higher", "lower")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_SHAPE = "a list such as [{accuracy: higher}, {latency_ms: lower}]"


@dataclass(frozen=True)
class Objective:
    """One metric the search trades off.

    Attributes:
      name: the metric's name as the evaluation prints it.
      direction: "higher" or "lower" (which way is better).
    """

    name: str
    direction: str


@dataclass(frozen=True)
class Scalarisation:
    """A weighted sum of raw metric values that ranks candidates instead of Pareto dominance.

    Attributes:
      weights: (metric, weight) in the order written; a lower-is-better metric takes a negative weight.
    """

    weights: tuple[tuple[str, float], ...]

    def describe(self) -> str:
        """Returns the scalarisation as written: `weighted {accuracy: 1, latency_ms: -0.01}`."""
        return "weighted {" + ", ".join(f"{name}: {weight:g}" for name, weight in self.weights) + "}"


def parse_objectives(value: Any) -> tuple[Objective, ...]:
    """Returns the objectives a frontmatter value declares; raises ValueError naming the expected shape."""
    if value is None:
        return ()
    pairs = _pairs(value)
    objectives: list[Objective] = []
    for name, direction in pairs:
        name = _name(name)
        word = str(direction).strip().lower() if not isinstance(direction, bool) else ""
        if word not in DIRECTIONS:
            raise ValueError(f"objective `{name}` must be `higher` or `lower`, got {direction!r}")
        if any(o.name == name for o in objectives):
            raise ValueError(f"objective `{name}` appears twice; keep one")
        objectives.append(Objective(name, word))
    return tuple(objectives)


def _pairs(value: Any) -> list[tuple[Any, Any]]:
    if isinstance(value, Mapping):
        return list(value.items())
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be {_SHAPE}, got {value!r}")
    pairs: list[tuple[Any, Any]] = []
    for item in value:
        if not isinstance(item, Mapping) or len(item) != 1:
            raise ValueError(f"each objective must be one `name: higher|lower` mapping as in {_SHAPE}, got {item!r}")
        pairs.extend(item.items())
    return pairs


def _name(value: Any) -> str:
    name = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if not _NAME_RE.match(name):
        raise ValueError(f"objective name {value!r} must be a metric name such as `latency_ms`")
    return name


def parse_scalarisation(value: Any) -> Scalarisation | None:
    """Returns the scalarisation a frontmatter value names (`{metric: weight, ...}`, or `{weighted: {...}}`)."""
    if value is None:
        return None
    if isinstance(value, Mapping) and list(value) == ["weighted"]:
        value = value["weighted"]
    if not isinstance(value, Mapping) or not value:
        raise ValueError("must be a mapping of metric to weight such as {accuracy: 1, latency_ms: -0.01}, "
                         f"got {value!r}")
    weights: list[tuple[str, float]] = []
    for name, weight in value.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise ValueError(f"the weight of `{name}` must be a finite number, got {weight!r}")
        weights.append((_name(name), float(weight)))
    if all(weight == 0 for _, weight in weights):
        raise ValueError("at least one weight must be non-zero")
    return Scalarisation(tuple(weights))


def parse_targets(value: Any) -> tuple[tuple[str, float], ...]:
    """Returns the per-objective targets of a `target-metric:` mapping; raises ValueError naming the shape."""
    if not isinstance(value, Mapping) or not value:
        raise ValueError("must be a number, or a mapping of objective to target such as {accuracy: 0.95}, "
                         f"got {value!r}")
    targets = []
    for name, target in value.items():
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not math.isfinite(target):
            raise ValueError(f"the target of `{name}` must be a finite number, got {target!r}")
        targets.append((_name(name), float(target)))
    return tuple(targets)


def targets_met(metrics: Mapping[str, Any], targets: Sequence[tuple[str, float]], objectives: Sequence[Objective]
                ) -> bool:
    """Returns whether the metrics reach every target, each in its objective's direction (higher unless lower)."""
    lower = {o.name for o in objectives if o.direction == "lower"}
    for name, target in targets:
        value = metric_value(metrics, name)
        if value is None or (value > target if name in lower else value < target):
            return False
    return bool(targets)


def unknown_metrics(weights: Scalarisation | Sequence[tuple[str, float]], objectives: Sequence[Objective]) -> list[str]:
    """Returns the named metrics that are not declared objectives (none when no objective is declared)."""
    names = {o.name for o in objectives}
    pairs = weights.weights if isinstance(weights, Scalarisation) else weights
    return [name for name, _ in pairs if names and name not in names]


def metric_value(metrics: Mapping[str, Any], name: str) -> float | None:
    """Returns a metric as a finite float, or None when it is missing, not a number, a bool or not finite."""
    value = metrics.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None
