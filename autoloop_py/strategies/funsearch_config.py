"""FunSearch tunables: the playbook's Settings table, overridden by `code/config.yaml` (strategies.md §4.3)."""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError
from autoloop_py.playbook import Playbook

SKELETON_FILE = "skeleton.md"
SCORE_REDUCTIONS = ("last", "average", "metric")
CLUSTER_SAMPLINGS = ("without_replacement", "with_replacement")
LENGTH_NORMALIZATIONS = ("range", "max")
DIRECTIONS = ("higher", "lower")


@dataclass(frozen=True)
class FunSearchConfig:
    """FunSearch settings (strategies.md §4.3: Ref defaults, AL reset counter, Fork features per §5.6).

    Attributes:
      function_to_evolve: the name of the one function the search rewrites (e.g. priority).
      num_islands: islands founded by the seed (Ref 10); later edits of the state's Islands table win.
      functions_per_prompt: k, the earlier versions shown in a prompt (Ref 2).
      cluster_sampling_temperature_init: T_init of the cyclic cluster temperature (Ref 0.1).
      cluster_sampling_temperature_period: P, registrations per island over which T falls (Ref 30000).
      reset_every_registrations: registrations after which the weaker half of the islands resets (AL 1200).
      score_reduction: a cluster's score from per-test scores: `last` (Ref: the last test the
        evaluator lists), `average`, or `metric` (the evaluator's primary metric).
      cluster_sampling: `without_replacement` among clusters with p > 1e-6 (Fork), or
        `with_replacement`, i.i.d. draws (Ref).
      length_normalization: `range` divides by max − min + 1e-6 (Fork), `max` by max + 1e-6 (Ref).
      deduplicate: discard a program whose output hash is already on its island (Fork; only when the
        evaluator reports an `output_hash`).
      max_population: the Population entries kept in the state file (AL; the spec has no cap): past it the
        entries outside every cluster go first, then the weakest cluster members, never an island's
        best nor the newest entry; their code stays on the memory branch.
      direction: the program's metric direction; scores are oriented with it (not a playbook setting).
    """

    function_to_evolve: str
    num_islands: int = 10
    functions_per_prompt: int = 2
    cluster_sampling_temperature_init: float = 0.1
    cluster_sampling_temperature_period: int = 30000
    reset_every_registrations: int = 1200
    score_reduction: str = "last"
    cluster_sampling: str = "without_replacement"
    length_normalization: str = "range"
    deduplicate: bool = True
    max_population: int = 20
    direction: str = "higher"

    def temperature(self, num_programs: int) -> float:
        """Returns T = T_init·(1 − (n mod P)/P) for an island holding n registered programs."""
        period = self.cluster_sampling_temperature_period
        # (P − n mod P)/P equals 1 − (n mod P)/P but keeps the floor exactly T_init/P.
        return self.cluster_sampling_temperature_init * (period - num_programs % period) / period


Convert = Callable[[Any], Any]


def _whole(minimum: int) -> Convert:
    def convert(value: Any) -> int:
        number = int(value) if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,15}\s*", value) else value
        if isinstance(number, bool) or not isinstance(number, int) or number < minimum:
            raise ValueError(f"a whole number >= {minimum}")
        return number

    return convert


def _positive(value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise ValueError("a positive number such as 0.1")
    return number


def _choice(options: tuple[str, ...]) -> Convert:
    def convert(value: Any) -> str:
        word = "_".join(str(value).strip().lower().replace("-", " ").split())
        if word not in options:
            raise ValueError(" or ".join(f"`{option}`" for option in options))
        return word

    return convert


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("yes", "true", "on"):
        return True
    if word in ("no", "false", "off"):
        return False
    raise ValueError("yes or no")


def _identifier(value: Any) -> str:
    name = str(value).strip().strip("`").strip()
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError("the name of a Python function, such as `priority`")
    return name


SETTINGS: dict[str, Convert] = {
    "function_to_evolve": _identifier,
    "num_islands": _whole(1),
    "functions_per_prompt": _whole(1),
    "cluster_sampling_temperature_init": _positive,
    "cluster_sampling_temperature_period": _whole(1),
    "reset_every_registrations": _whole(1),
    "score_reduction": _choice(SCORE_REDUCTIONS),
    "cluster_sampling": _choice(CLUSTER_SAMPLINGS),
    "length_normalization": _choice(LENGTH_NORMALIZATIONS),
    "deduplicate": _flag,
    "max_population": _whole(1),
}


def parse_funsearch_config(
    playbook: Playbook, overrides: Mapping[str, Any] | None = None, direction: str = "higher"
) -> FunSearchConfig:
    """Returns the settings of a customised FunSearch playbook, with `code/config.yaml` overrides applied."""
    if direction not in DIRECTIONS:
        raise ValueError(f"metric direction must be 'higher' or 'lower', not {direction!r}")
    values = _table_settings(playbook.text, playbook.path)
    config_path = playbook.program_dir / "code" / "config.yaml"
    for key, value in (overrides or {}).items():
        if key in SETTINGS:
            values[key] = _converted(key, value, config_path, None)
    if "function_to_evolve" not in values:
        raise ProgramError(
            "no `function_to_evolve` setting; add a `| function_to_evolve | <name> |` row to the Settings table",
            playbook.path,
        )
    return replace(FunSearchConfig(function_to_evolve=values.pop("function_to_evolve")), direction=direction, **values)


def skeleton_path(playbook: Playbook) -> Path:
    """Returns the repo-relative specification file the prompt opens with (strategy/prompts/skeleton.md)."""
    return playbook.path.parent / "prompts" / SKELETON_FILE


def _table_settings(text: str, path: Path) -> dict[str, Any]:
    """Returns the values of the `| Setting | Value |` table's rows, converted and checked."""
    table = next((t for t in md.tables(text) if _is_settings_table(t)), None)
    if table is None:
        return {}
    column = next(i for i, cell in enumerate(table.header) if md.normalize_heading(cell) == "value")
    values: dict[str, Any] = {}
    for row in table.rows:
        key = _key(row.cells[0])
        line = row.line + 1
        if key not in SETTINGS:
            raise ProgramError(f"unknown setting `{row.cells[0]}`; the settings are {', '.join(SETTINGS)}", path, line)
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
        return SETTINGS[key](value)
    except ValueError as problem:
        raise ProgramError(f"`{key}` must be {problem}, got {value!r}", path, line) from None
