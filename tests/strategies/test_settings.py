"""Tests for strategies/settings.py: the Settings table, converters and config.yaml overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.errors import ProgramError
from autoloop_py.strategies import settings

SETTINGS = {
    "num_islands": settings.whole(1),
    "temperature": settings.number(0, inclusive=False, example="0.1"),
    "threshold": settings.number(0, inclusive=True, example="0.01"),
    "mode": settings.choice(("last", "average")),
    "deduplicate": settings.flag,
}
TABLE = """# Playbook

| Setting | Value | Why |
|---|---|---|
| Num islands | `4` | more islands, more diversity |
| temperature | 0.5 | |
| mode | Average | |
"""


def test_the_table_is_read_and_converted() -> None:
    values, lines = settings.table_settings(TABLE, Path("p.md"), SETTINGS)
    assert values == {"num_islands": 4, "temperature": 0.5, "mode": "average"}
    assert lines == {"num_islands": 5, "temperature": 6, "mode": 7}


def test_overrides_win_and_unknown_override_keys_are_ignored() -> None:
    values = settings.read_settings(TABLE, Path("p.md"), SETTINGS, {"num_islands": 2, "other": 1}, Path("c.yaml"))
    assert values["num_islands"] == 2 and "other" not in values


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ("| colour | red | |", "unknown setting `colour`"),
        ("| mode | last | |", "appears twice"),
        ("| threshold | -1 | |", "`threshold` must be a number >= 0 such as 0.01"),
    ],
)
def test_bad_rows_name_their_line(row: str, words: str) -> None:
    with pytest.raises(ProgramError, match=words) as caught:
        settings.table_settings(TABLE + row + "\n", Path("p.md"), SETTINGS)
    assert caught.value.line == 8 and str(caught.value).startswith("p.md:8:")


def test_a_bad_override_names_the_config_file() -> None:
    with pytest.raises(ProgramError, match="c.yaml: `deduplicate` must be yes or no"):
        settings.read_settings(TABLE, Path("p.md"), SETTINGS, {"deduplicate": "maybe"}, Path("c.yaml"))


@pytest.mark.parametrize("value", [True, 0, "-3", "1.5", "x"])
def test_whole_refuses_what_is_not_a_whole_number_at_least_the_minimum(value: object) -> None:
    with pytest.raises(ValueError, match="whole number >= 1"):
        settings.whole(1)(value)


def test_number_bounds_and_non_finite_values() -> None:
    assert settings.number(0, inclusive=True, example="0.01")("0") == 0.0
    for value in ("0", "nan", "inf", True, None):
        with pytest.raises(ValueError):
            settings.number(0, inclusive=False, example="0.1")(value)


def test_flag_and_choice_forgive_case_and_spelling() -> None:
    assert [settings.flag(v) for v in ("Yes", "off", True)] == [True, False, True]
    assert settings.choice(("with_replacement",))("With-Replacement") == "with_replacement"
    with pytest.raises(ValueError, match="`with_replacement`"):
        settings.choice(("with_replacement",))("sometimes")
