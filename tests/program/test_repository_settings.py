"""`.autoloop/config.yaml`: schedule-policy, max-programs-per-tick and exploration; the environment's policy wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.program.repository_settings import (
    RepositorySettings,
    SettingsError,
    load_repository_settings,
    parse_repository_settings,
)


def test_defaults_without_a_file_and_the_environment_over_the_file(tmp_path: Path) -> None:
    assert load_repository_settings(tmp_path, {}) == RepositorySettings()
    (tmp_path / ".autoloop").mkdir()
    (tmp_path / ".autoloop/config.yaml").write_text("schedule-policy: gain\nmax-programs-per-tick: 2\n")
    assert load_repository_settings(tmp_path, {}) == RepositorySettings("gain", 2)
    assert load_repository_settings(tmp_path, {"AUTOLOOP_SCHEDULE_POLICY": "overdue"}).schedule_policy == "overdue"
    with pytest.raises(SettingsError, match="AUTOLOOP_SCHEDULE_POLICY"):
        load_repository_settings(tmp_path, {"AUTOLOOP_SCHEDULE_POLICY": "random"})


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("schedule-policy: greedy\n", ":1:", "must be one of overdue, gain"),
        ("schedule-policy: gain\nmax-programs-per-tick: 0\n", ":2:", "whole number >= 1"),
        ("exploration: -1\n", ":1:", "a number >= 0"),
        ("# comment\nschedule_policy: gain\n", ":2:", "unknown key `schedule_policy`"),
        ("schedule-policy: [\n", ":2:", "invalid YAML"),
    ],
)
def test_a_bad_setting_names_file_and_line(text: str, where: str, words: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_repository_settings(text)
    assert f".autoloop/config.yaml{where}" in str(caught.value) and words in str(caught.value)
