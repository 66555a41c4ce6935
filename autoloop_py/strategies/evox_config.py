"""EvoX tunables (strategies.md §3.3): the playbook's Settings table, overridden by `code/config.yaml`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError
from autoloop_py.playbook import Playbook

DIRECTIONS = ("higher", "lower")
SWITCH_RATIO = 0.1


@dataclass(frozen=True)
class EvoXConfig:
    """EvoX settings; defaults are the reference's (strategies.md §3.3).

    Attributes:
      num_context_programs: the context programs a strategy's `sample` is asked for.
      switch_interval: stagnant turns before the strategy is rewritten (None: 10 % of max_iterations, at least 1).
      max_iterations: the run's iteration budget (only the switch interval's default reads it).
      auto_generate_variation_operators: ask the guide LLM once for the DIVERGE/REFINE examples (else our defaults).
      improvement_threshold: a turn whose best rose by more than this resets the stagnation count.
      meta_attempts: the meta LLM's attempts at a valid rewrite, each fed the validator's reasons.
      max_attempts: the attempts of one iteration on the same parent and context (a failed one is retried).
      num_previous_attempts: the best earlier programs a solution prompt lists.
      random_seed: the seed of the meta step's reference draws, recorded in the state's rng_seed.
      diff_based_generation: ask for SEARCH/REPLACE edits (else a full rewrite).
      sandbox_seconds: the wall-clock limit of one sandboxed strategy run.
      sandbox_memory_mb: the address-space limit of the sandbox process.
      sandbox_cpu_seconds: the CPU-time limit of the sandbox process.
      direction: the program's metric direction, "higher" or "lower" (not a playbook setting).
      initial_code: the source of the strategy a run starts with (ours, shipped with the package).
    """

    num_context_programs: int = 4
    switch_interval: int | None = None
    max_iterations: int = 100
    auto_generate_variation_operators: bool = True
    improvement_threshold: float = 0.01
    meta_attempts: int = 3
    max_attempts: int = 3
    num_previous_attempts: int = 3
    random_seed: int = 42
    diff_based_generation: bool = True
    sandbox_seconds: float = 10.0
    sandbox_memory_mb: int = 512
    sandbox_cpu_seconds: int = 10
    direction: str = "higher"
    initial_code: str = ""

    @property
    def interval(self) -> int:
        """Returns the switch interval in force (the configured one, else the 10 % rule)."""
        return switch_interval(self.switch_interval, self.max_iterations)


def switch_interval(configured: int | None, max_iterations: int) -> int:
    """Returns the stagnant turns before a rewrite: configured, else max(1, ⌊0.1·max_iterations⌋) (E5)."""
    if configured is not None:
        return configured
    return max(1, math.floor(SWITCH_RATIO * max_iterations))


Convert = Callable[[Any], Any]
_NONE_WORDS = ("", "none", "null", "—", "–", "-", "~", "auto")


def _whole(minimum: int) -> Convert:
    def convert(value: Any) -> int:
        if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,15}\s*", value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"a whole number >= {minimum}")
        return value

    return convert


def _optional_whole(value: Any) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS):
        return None
    try:
        return int(_whole(1)(value))
    except ValueError:
        raise ValueError("a whole number >= 1, or `none` for 10 % of max_iterations") from None


def _positive(value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise ValueError("a positive number such as 0.01")
    return number


def _non_negative(value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise ValueError("a number >= 0 such as 0.01")
    return number


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("yes", "true", "on"):
        return True
    if word in ("no", "false", "off"):
        return False
    raise ValueError("true or false")


SETTINGS: dict[str, Convert] = {
    "num_context_programs": _whole(0),
    "switch_interval": _optional_whole,
    "max_iterations": _whole(1),
    "auto_generate_variation_operators": _flag,
    "improvement_threshold": _non_negative,
    "meta_attempts": _whole(1),
    "max_attempts": _whole(1),
    "num_previous_attempts": _whole(0),
    "random_seed": _whole(0),
    "diff_based_generation": _flag,
    "sandbox_seconds": _positive,
    "sandbox_memory_mb": _whole(64),
    "sandbox_cpu_seconds": _whole(1),
}


def parse_evox_config(
    playbook: Playbook, overrides: Mapping[str, Any] | None = None, direction: str = "higher"
) -> EvoXConfig:
    """Returns the settings of a customised EvoX playbook, with `code/config.yaml` overrides applied."""
    if direction not in DIRECTIONS:
        raise ValueError(f"metric direction must be 'higher' or 'lower', not {direction!r}")
    values = _table_settings(playbook.text, playbook.path)
    config_path = playbook.program_dir / "code" / "config.yaml"
    for key, value in (overrides or {}).items():
        if key in SETTINGS:
            values[key] = _converted(key, value, config_path, None)
    return replace(EvoXConfig(), direction=direction, **values)


def _table_settings(text: str, path: Path) -> dict[str, Any]:
    """Returns the values of the `| Setting | Value |` table's rows, converted and checked."""
    table = next((t for t in md.tables(text) if _is_settings_table(t)), None)
    if table is None:
        return {}
    column = next(i for i, cell in enumerate(table.header) if md.normalize_heading(cell) == "value")
    values: dict[str, Any] = {}
    for row in table.rows:
        key = _key(row.cells[0]) if row.cells else ""
        line = row.line + 1
        if key not in SETTINGS:
            raise ProgramError(f"unknown setting `{key}`; the settings are {', '.join(SETTINGS)}", path, line)
        if key in values:
            raise ProgramError(f"setting `{key}` appears twice; keep one row", path, line)
        cell = row.cells[column] if column < len(row.cells) else ""
        values[key] = _converted(key, cell, path, line)
    return values


def _is_settings_table(table: md.Table) -> bool:
    names = [md.normalize_heading(cell) for cell in table.header]
    return bool(names) and names[0] == "setting" and "value" in names


def _key(cell: str) -> str:
    return "_".join(cell.strip().strip("`").strip().lower().replace("-", " ").split())


def _converted(key: str, value: Any, path: Path, line: int | None) -> Any:
    """Returns a setting's value converted to its type; raises ProgramError naming the key and what it takes."""
    try:
        return SETTINGS[key](value.strip().strip("`").strip() if isinstance(value, str) else value)
    except ValueError as problem:
        raise ProgramError(f"`{key}` must be {problem}, got {value!r}", path, line) from None
