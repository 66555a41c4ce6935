"""A playbook's `| Setting | Value |` table and `code/config.yaml` overrides, converted and checked per key."""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError
from autoloop_py.program.playbook import CONFIG_YAML, Playbook

Convert = Callable[[Any], Any]
NONE_WORDS = ("", "none", "null", "—", "–", "-", "~", "auto")


def whole(minimum: int | None = None) -> Convert:
    """Returns a converter to a whole number >= minimum (digits in a string, or an int; never a bool)."""
    wanted = "a whole number" if minimum is None else f"a whole number >= {minimum}"

    def convert(value: Any) -> int:
        if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]{1,15}\s*", value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
            raise ValueError(wanted)
        return value

    return convert


def real(value: Any) -> float:
    """Converts a finite number (or its text; never a bool) to a float."""
    try:
        result = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        result = None
    if result is None:
        raise ValueError("a number")
    if not math.isfinite(result):
        raise ValueError("a finite number")
    return result


def number(above: float, *, inclusive: bool, example: str) -> Convert:
    """Returns a converter to a finite number > above (>= with inclusive); example shows a valid value."""
    wanted = f"a number >= {above:g} such as {example}" if inclusive else f"a positive number such as {example}"

    def convert(value: Any) -> float:
        try:
            result = real(value)
        except ValueError:
            raise ValueError(wanted) from None
        if result < above or (result == above and not inclusive):
            raise ValueError(wanted)
        return result

    return convert


def choice(options: tuple[str, ...]) -> Convert:
    """Returns a converter to one of options (case, dashes and spaces forgiven)."""

    def convert(value: Any) -> str:
        word = "_".join(str(value).strip().lower().replace("-", " ").split())
        if word not in options:
            raise ValueError(" or ".join(f"`{option}`" for option in options))
        return word

    return convert


def flag(value: Any) -> bool:
    """Converts yes/no, true/false, on/off (or a bool) to a bool."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("yes", "true", "on", "1"):
        return True
    if word in ("no", "false", "off", "0"):
        return False
    raise ValueError("yes or no")


def names(value: Any) -> tuple[str, ...]:
    """Converts a list of metric names (`[accuracy, latency_ms]`, `accuracy, latency_ms`, or none) to a tuple."""
    if value is None or (isinstance(value, str) and value.strip().lower() in (*NONE_WORDS, "[]")):
        return ()
    items = value if isinstance(value, (list, tuple)) else str(value).strip("[]").split(",")
    found = tuple(str(item).strip().strip("`").strip() for item in items if str(item).strip())
    if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name) for name in found):
        raise ValueError("a list of metric names such as [accuracy, latency_ms]")
    return found


def directions(value: Any) -> tuple[tuple[str, bool], ...]:
    """Converts a mapping of metric names to true (higher is better) or false to (name, flag) pairs."""
    if value is None or (isinstance(value, str) and value.strip().lower() in (*NONE_WORDS, "{}")):
        return ()
    if not isinstance(value, Mapping):
        raise ValueError("a mapping of metric names to true/false such as {latency_ms: false}")
    return tuple((str(name), flag(given)) for name, given in value.items())


def check_direction(direction: str) -> None:
    """Raises ValueError unless direction is a metric direction, "higher" or "lower"."""
    if direction not in ("higher", "lower"):
        raise ValueError(f"metric direction must be 'higher' or 'lower', not {direction!r}")


def config_path(playbook: Playbook) -> Path:
    """Returns the program's `code/config.yaml`, which errors in its overrides name."""
    return playbook.program_dir / CONFIG_YAML


def playbook_settings(
    playbook: Playbook, settings: Mapping[str, Convert], overrides: Mapping[str, Any] | None, direction: str
) -> dict[str, Any]:
    """Returns a playbook's Settings values with `code/config.yaml` overrides applied, for a checked direction."""
    check_direction(direction)
    return read_settings(playbook.text, playbook.path, settings, overrides, config_path(playbook))


def read_settings(
    text: str, path: Path, settings: Mapping[str, Convert], overrides: Mapping[str, Any] | None, config_path: Path
) -> dict[str, Any]:
    """Returns the Settings table's values with config.yaml's overrides (keys in settings only) applied on top."""
    values, _ = table_settings(text, path, settings)
    for key, value in (overrides or {}).items():
        if key in settings:
            values[key] = converted(settings, key, value, config_path, None)
    return values


def table_settings(
    text: str, path: Path, settings: Mapping[str, Convert], ignored: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], dict[str, int]]:
    """Returns the values of the `| Setting | Value |` table's rows and each one's 1-based line.

    Keys in ignored are passed over; an unknown or repeated key names its line.
    """
    table = next((t for t in md.tables(text) if _is_settings_table(t)), None)
    if table is None:
        return {}, {}
    column = next(i for i, cell in enumerate(table.header) if md.normalize_heading(cell) == "value")
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for row in table.rows:
        key = setting_key(row.cells[0]) if row.cells else ""
        line = row.line + 1
        if key in ignored:
            continue
        if key not in settings:
            close = difflib.get_close_matches(key, settings, n=1)
            hint = f"did you mean `{close[0]}`?" if close else f"the settings are {', '.join(settings)}"
            raise ProgramError(f"unknown setting `{key}`; {hint}", path, line)
        if key in values:
            raise ProgramError(f"setting `{key}` appears twice; keep one row", path, line)
        cell = row.cells[column] if column < len(row.cells) else ""
        values[key] = converted(settings, key, cell, path, line)
        lines[key] = line
    return values, lines


def setting_key(cell: str) -> str:
    """Returns a table cell as a setting key: `Num islands` → num_islands."""
    return "_".join(cell.strip().strip("`").strip().lower().replace("-", " ").split())


def converted(settings: Mapping[str, Convert], key: str, value: Any, path: Path, line: int | None) -> Any:
    """Returns a setting's value converted to its type; raises ProgramError naming the key and what it takes."""
    try:
        return settings[key](value.strip().strip("`").strip() if isinstance(value, str) else value)
    except ValueError as problem:
        raise ProgramError(f"`{key}` must be {problem}, got {value!r}", path, line) from None


def _is_settings_table(table: md.Table) -> bool:
    names = [md.normalize_heading(cell) for cell in table.header]
    return bool(names) and names[0] == "setting" and "value" in names
