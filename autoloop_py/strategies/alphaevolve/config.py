"""AlphaEvolve tunables: parsed from the customised playbook, overridden by `code/config.yaml`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError
from autoloop_py.program.playbook import Playbook
from autoloop_py.strategies import settings
from autoloop_py.strategies.alphaevolve.features import ISLANDS, LINES, FeatureDimension, parse_dimensions

DEFAULT_WEIGHTS = (
    ("exploitation", Fraction("0.50")),
    ("exploration", Fraction("0.30")),
    ("crossover", Fraction("0.15")),
    ("migration", Fraction("0.05")),
)
DEFAULT_DIMENSIONS = ("approach_family", "code_complexity")
DEFAULT_THRESHOLDS = (40, 100)
DEFAULT_FEATURES = (FeatureDimension("approach_family", ISLANDS), FeatureDimension("code_complexity", LINES))


@dataclass(frozen=True)
class Island:
    """An island: a distinct family of approaches.

    Attributes:
      index: 0-based island number.
      name: the family name (also the default feature-dimension-1 bucket).
      description: one line on the family.
    """

    index: int
    name: str
    description: str = ""


@dataclass(frozen=True)
class AlphaEvolveConfig:
    """AlphaEvolve settings (strategies.md §1.3).

    Attributes:
      operator_weights: (operator, weight) in table order; weights are exact fractions summing to 1.
      islands: the playbook's 3–6 islands (`num_islands` in config.yaml may keep only the first N).
      population_size: the population cap.
      archive_size: the top-K elites never evicted.
      feature_dimensions: names of the two MAP-Elites dimensions.
      complexity_thresholds: (small_below, large_above) line counts: L < 40 small, 40..100 medium, > 100 large.
      diff_style: "full_rewrite" or "minimal_diff".
      validity_checks: the playbook's cheap invariants, shown in the prompt.
      dimensions: the two dimensions: the island, the line count, or an evaluator metric binned by its running range.
      weights_note: the playbook's note on its operator weights (the parentheses after "using these weights").
      islands_note: the playbook's note on its islands (the parentheses after "**Islands** for this program").
    """

    islands: tuple[Island, ...]
    operator_weights: tuple[tuple[str, Fraction], ...] = DEFAULT_WEIGHTS
    population_size: int = 40
    archive_size: int = 10
    feature_dimensions: tuple[str, str] = DEFAULT_DIMENSIONS
    complexity_thresholds: tuple[int, int] = DEFAULT_THRESHOLDS
    diff_style: str = "full_rewrite"
    validity_checks: tuple[str, ...] = field(default_factory=tuple)
    dimensions: tuple[FeatureDimension, FeatureDimension] = DEFAULT_FEATURES
    weights_note: str = ""
    islands_note: str = ""


# --- parsing the customised playbook -----------------------------------------------------------

OPERATOR_NAMES = tuple(name for name, _ in DEFAULT_WEIGHTS)
DIFF_STYLES = ("full_rewrite", "minimal_diff")
MIN_ISLANDS, MAX_ISLANDS = 3, 6
_RATIO_KEYS = {f"{name}_ratio": name for name in OPERATOR_NAMES}
_OVERRIDES = {"num_islands": settings.whole(1), "population_size": settings.whole(1),
              "archive_size": settings.whole(0), "diff_style": settings.choice(DIFF_STYLES)}
_ISLAND_RE = re.compile(r"^Island\s+(\d+)\s*[—–-]+\s*(.+?)\s*:\s*(.*)$", re.DOTALL)
_INT_RE = re.compile(r"\d+")
_WEIGHTS_NOTE_RE = re.compile(r"using these weights\s*\(", re.IGNORECASE)
_ISLANDS_NOTE_RE = re.compile(r"\*\*Islands\*\*[^(\n]*\(")


def parse_alphaevolve_config(playbook: Playbook, overrides: Mapping[str, Any] | None = None) -> AlphaEvolveConfig:
    """Returns the tunables of a customised AlphaEvolve playbook, with `code/config.yaml` overrides applied."""
    text, path = playbook.text, playbook.path
    items = md.list_items(text, code_spans=True)
    population, population_line = _bullet_int(items, "population cap", 40, path)
    archive, archive_line = _bullet_int(items, "elite archive", 10, path)
    dimensions, thresholds = parse_dimensions(text, items, path, DEFAULT_THRESHOLDS)
    config = AlphaEvolveConfig(
        islands=_islands(items, path),
        operator_weights=_weights(text, path),
        population_size=population,
        archive_size=archive,
        feature_dimensions=(dimensions[0].name, dimensions[1].name),
        complexity_thresholds=thresholds,
        dimensions=dimensions,
        diff_style=_diff_style(text),
        validity_checks=_validity_checks(text),
        weights_note=_note_after(text, _WEIGHTS_NOTE_RE),
        islands_note=_note_after(text, _ISLANDS_NOTE_RE),
    )
    config_path = settings.config_path(playbook)
    config = apply_overrides(config, overrides or {}, config_path)
    touched = {"population_size", "archive_size"} & set(overrides or {})
    if config.archive_size > config.population_size:
        where = (config_path, None) if touched else (path, archive_line or population_line)
        raise ProgramError(
            f"the elite archive ({config.archive_size}) is larger than the population cap "
            f"({config.population_size}); lower the archive or raise the cap",
            *where,
        )
    return config


def _weights(text: str, path: Path) -> tuple[tuple[str, Fraction], ...]:
    """Returns the operator weight table's (operator, weight) pairs; they must name each operator once and sum to 1."""
    table = next((t for t in md.tables(text) if _is_weight_table(t)), None)
    if table is None:
        return DEFAULT_WEIGHTS
    column = next(i for i, cell in enumerate(table.header) if "weight" in cell.lower())
    weights: dict[str, Fraction] = {}
    for row in table.rows:
        name = row.cells[0].strip().lower()
        if name not in OPERATOR_NAMES or name in weights:
            problem = "appears twice" if name in weights else "is not an operator"
            raise ProgramError(
                f"`{row.cells[0]}` {problem}; the rows are {', '.join(OPERATOR_NAMES)} once each", path, row.line + 1
            )
        cell = row.cells[column] if column < len(row.cells) else ""
        weights[name] = _fraction(cell, ProgramError(f"weight `{cell}` is not a number like 0.30", path, row.line + 1))
    missing = [name for name in OPERATOR_NAMES if name not in weights]
    if missing:
        raise ProgramError(f"the operator table has no {', '.join(missing)} row; add it (weight 0 disables it)",
                           path, table.start + 1)
    total = sum(weights.values(), Fraction(0))
    if total != 1:
        raise ProgramError(f"operator weights sum to {_show(total)}, not 1; adjust the `Default weight` column",
                           path, table.start + 1)
    return tuple(weights.items())


def _is_weight_table(table: md.Table) -> bool:
    return bool(table.header) and table.header[0].strip().lower() == "operator" and any(
        "weight" in cell.lower() for cell in table.header
    )


def _fraction(value: Any, error: ProgramError) -> Fraction:
    """Returns an exact fraction from a number or a string like `0.15`, `3/20` or `15%`."""
    if isinstance(value, bool) or value is None:
        raise error
    text = repr(value) if isinstance(value, float) else str(value).strip()
    scale = Fraction(1, 100) if text.endswith("%") else Fraction(1)
    try:
        number = Fraction(text.rstrip("%").strip()) * scale
    except (ValueError, ZeroDivisionError):
        raise error from None
    if number < 0:
        raise error
    return number


def _show(number: Fraction) -> str:
    return f"{float(number):g}"


def _islands(items: list[tuple[str, int]], path: Path) -> tuple[Island, ...]:
    """Returns the `- **Island N — name**: description` bullets: 3–6 of them, numbered 0..n-1 in order."""
    found = [(match, line) for text, line in items if (match := _ISLAND_RE.match(text))]
    if not found:
        raise ProgramError(
            "no `- **Island N — family**: description` bullets; define 3–6 islands in Step 3", path
        )
    islands: list[Island] = []
    for position, (match, line) in enumerate(found):
        if int(match.group(1)) != position:
            raise ProgramError(
                f"Island {match.group(1)} is out of place: islands are numbered 0..n-1 in order, "
                f"so this one should be Island {position}", path, line + 1,
            )
        if position == MAX_ISLANDS:
            raise ProgramError(f"{len(found)} islands listed; AlphaEvolve takes 3–6, merge or remove some",
                               path, line + 1)
        islands.append(Island(position, " ".join(match.group(2).split()), match.group(3).strip()))
    if len(islands) < MIN_ISLANDS:
        raise ProgramError(f"only {len(islands)} islands listed; AlphaEvolve takes 3–6, add distinct families",
                           path, found[0][1] + 1)
    return tuple(islands)


def _bullet_int(items: list[tuple[str, int]], label: str, default: int, path: Path) -> tuple[int, int | None]:
    """Returns (first whole number of the bullet starting with label, its 0-based line) or the default."""
    for text, line in items:
        if text.lower().startswith(label):
            number = _INT_RE.search(text[len(label) :])
            if number is None:
                raise ProgramError(f"the `{label.capitalize()}` bullet gives no number; write e.g. `40`",
                                   path, line + 1)
            return int(number.group()), line + 1
    return default, None


def _note_after(text: str, pattern: re.Pattern[str]) -> str:
    """Returns the parenthesized note that follows pattern's match, whitespace collapsed ('' without one)."""
    found = pattern.search(text)
    if found is None:
        return ""
    note = " ".join(_parenthesized(text[found.end() - 1 :]).split())
    return "" if "<CUSTOMIZE" in note else note


def _diff_style(text: str) -> str:
    """Returns the diff style Step 5 names (the first of "full rewrite" / "minimal diff" after "diff style")."""
    section = next((s for s in md.split_sections(text, level=3) if s.key.startswith("step 5")), None)
    body = " ".join((section.body if section else text).lower().split())
    at = body.find("diff style")
    body = body[at:] if at != -1 else body
    places = {style: body.find(style.replace("_", " ")) for style in DIFF_STYLES}
    present = {style: index for style, index in places.items() if index != -1}
    return min(present, key=lambda style: present[style]) if present else DIFF_STYLES[0]


def _validity_checks(text: str) -> tuple[str, ...]:
    """Returns the Step 4 validity pre-check items: nested bullets, else the text split on `;`."""
    item = _find_item(md.parse_blocks(text), "validity pre-check")
    if item is None:
        return ()
    nested = [c for c in item.get("children", []) if c["type"] == "list"]
    if nested:
        return tuple(md.item_text(sub, code_spans=True) for sub in nested[0].get("children", []))
    rest = md.item_text(item, code_spans=True)[len("validity pre-check") :].strip()
    listed = _parenthesized(rest) if rest.startswith("(") else rest.lstrip(":").strip()
    return tuple(part.strip().rstrip(".") for part in listed.split(";") if part.strip())


def _find_item(tokens: list[md.Token], label: str) -> md.Token | None:
    """Returns the first list item (at any depth) whose own text starts with label."""
    for token in tokens:
        if token.get("type") == "list_item" and md.item_text(token).lower().startswith(label):
            return token
        found = _find_item(token.get("children", []) or [], label) if isinstance(token.get("children"), list) else None
        if found is not None:
            return found
    return None


def _parenthesized(text: str) -> str:
    """Returns the content of the balanced parentheses text starts with."""
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return text[1:index]
    return text[1:]


# --- overrides from code/config.yaml -------------------------------------------------------------


def apply_overrides(config: AlphaEvolveConfig, overrides: Mapping[str, Any], path: Path) -> AlphaEvolveConfig:
    """Returns config with the recognised `code/config.yaml` keys applied; other keys are left to the program."""
    changes: dict[str, Any] = {}
    weights = _override_weights(config.operator_weights, overrides, path)
    if weights is not None:
        changes["operator_weights"] = weights
    if "num_islands" in overrides:
        count = settings.converted(_OVERRIDES, "num_islands", overrides["num_islands"], path, None)
        if count > len(config.islands):
            raise ProgramError(f"num_islands is {count} but the playbook lists {len(config.islands)} islands; "
                               "lower it or add islands to the playbook", path)
        changes["islands"] = config.islands[:count]
    for key in ("population_size", "archive_size", "diff_style"):
        if key in overrides:
            changes[key] = settings.converted(_OVERRIDES, key, overrides[key], path, None)
    if "complexity_thresholds" in overrides:
        changes["complexity_thresholds"] = _override_thresholds(overrides["complexity_thresholds"], path)
    return replace(config, **changes)


def _override_weights(
    current: tuple[tuple[str, Fraction], ...], overrides: Mapping[str, Any], path: Path
) -> tuple[tuple[str, Fraction], ...] | None:
    """Returns the weights with overridden operators fixed and the others rescaled to fill the rest of 1."""
    given = _given_weights(overrides, path)
    if not given:
        return None
    fixed_total = sum(given.values(), Fraction(0))
    rest = [name for name, _ in current if name not in given]
    rest_total = sum((w for name, w in current if name in rest), Fraction(0))
    if fixed_total > 1 or (not rest_total and fixed_total != 1):
        listed = ", ".join(f"{name} {_show(w)}" for name, w in given.items())
        raise ProgramError(f"operator weights ({listed}) cannot be completed to sum to 1; "
                           "make them sum to at most 1 and leave an operator with weight to rescale", path)
    scale = (1 - fixed_total) / rest_total if rest_total else Fraction(0)
    return tuple((name, given[name] if name in given else weight * scale) for name, weight in current)


def _given_weights(overrides: Mapping[str, Any], path: Path) -> dict[str, Fraction]:
    """Returns the operator weights config.yaml sets, from `*_ratio` keys or an `operator_weights` mapping."""
    ratios = {_RATIO_KEYS[key]: overrides[key] for key in _RATIO_KEYS if key in overrides}
    mapping = overrides.get("operator_weights")
    if mapping is not None and ratios:
        raise ProgramError("set either `operator_weights` or the `*_ratio` keys, not both", path)
    if mapping is not None:
        if not isinstance(mapping, Mapping):
            raise ProgramError("`operator_weights` must map operators to weights (e.g. `crossover: 0.2`)", path)
        ratios = {str(name).strip().lower(): value for name, value in mapping.items()}
    unknown = [name for name in ratios if name not in OPERATOR_NAMES]
    if unknown:
        raise ProgramError(f"`operator_weights` names unknown operator {unknown[0]!r}; "
                           f"use {', '.join(OPERATOR_NAMES)}", path)
    return {name: _fraction(value, ProgramError(f"the {name} weight {value!r} is not a number between 0 and 1", path))
            for name, value in ratios.items()}


def _override_thresholds(value: Any, path: Path) -> tuple[int, int]:
    error = ProgramError(f"`complexity_thresholds` must be two line counts like [40, 100], got {value!r}", path)
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise error
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value) or value[0] > value[1]:
        raise error
    return int(value[0]), int(value[1])
