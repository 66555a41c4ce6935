"""Repository-wide settings of autoloop: `.autoloop/config.yaml` (optional), and the environment over it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from autoloop_py.errors import AutoloopError

CONFIG_PATH = Path(".autoloop/config.yaml")
POLICIES = ("overdue", "gain")
POLICY_ENV = "AUTOLOOP_SCHEDULE_POLICY"


class SettingsError(AutoloopError):
    """`.autoloop/config.yaml` holds a setting autoloop cannot use."""


@dataclass(frozen=True)
class RepositorySettings:
    """Settings that hold for every program of the repository.

    Attributes:
      schedule_policy: how due programs are ordered: `overdue` (longest waiting first) or `gain` (most
        improvement per runner-minute and model dollar, with exploration; state/schedule_table.py).
      max_programs_per_tick: at most this many due programs run per tick (None: all of them).
      exploration: the weight of the gain policy's bonus for programs tried less (0: none).
    """

    schedule_policy: str = "overdue"
    max_programs_per_tick: int | None = None
    exploration: float = 1.0


def load_repository_settings(root: Path, environ: Mapping[str, str]) -> RepositorySettings:
    """Returns the settings of `.autoloop/config.yaml` under root (defaults without it), AUTOLOOP_SCHEDULE_POLICY first.

    Raises SettingsError naming the file and line of a bad value.
    """
    path = root / CONFIG_PATH
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    settings = parse_repository_settings(text, CONFIG_PATH)
    policy = environ.get(POLICY_ENV, "").strip().lower()
    if policy and policy not in POLICIES:
        raise SettingsError(f"{POLICY_ENV}={policy!r}: must be one of {', '.join(POLICIES)}")
    return RepositorySettings(policy or settings.schedule_policy, settings.max_programs_per_tick, settings.exploration)


def parse_repository_settings(text: str, path: Path = CONFIG_PATH) -> RepositorySettings:
    """Returns the settings a config.yaml text sets; raises SettingsError naming path:line for a bad one."""
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise SettingsError(f"invalid YAML: {getattr(err, 'problem', err)}", path,
                            mark.line + 1 if mark is not None else None) from None
    if not isinstance(data, dict):
        raise SettingsError("must be a mapping of `key: value` lines", path, 1)
    values: dict[str, Any] = {}
    for key, value in data.items():
        line = next((n for n, row in enumerate(text.splitlines(), 1) if row.startswith(f"{key}:")), None)
        if key == "schedule-policy":
            if str(value).strip().lower() not in POLICIES:
                raise SettingsError(f"`schedule-policy` must be one of {', '.join(POLICIES)}, got {value!r}", path,
                                    line)
            values["schedule_policy"] = str(value).strip().lower()
        elif key == "max-programs-per-tick":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise SettingsError(f"`max-programs-per-tick` must be a whole number >= 1, got {value!r}", path, line)
            values["max_programs_per_tick"] = value
        elif key == "exploration":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise SettingsError(f"`exploration` must be a number >= 0, got {value!r}", path, line)
            values["exploration"] = float(value)
        else:
            raise SettingsError(f"unknown key `{key}` (known: schedule-policy, max-programs-per-tick, exploration)",
                                path, line)
    return RepositorySettings(**values)
