"""Schedule intervals as programs write them: `every 6h`, `30 minutes`, `daily`..."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"m": 1, "min": 1, "minute": 1, "minutes": 1, "h": 60, "hr": 60, "hour": 60, "hours": 60,
          "d": 1440, "day": 1440, "days": 1440}
_NAMED = {"hourly": timedelta(hours=1), "daily": timedelta(days=1), "weekly": timedelta(weeks=1)}
_EVERY_RE = re.compile(r"^(?:every\s+)?(\d+)\s*([a-z]+)$")


def parse_schedule(text: str | None) -> timedelta | None:
    """Returns the interval of a schedule (`every 6h`, `30 minutes`, `daily`...); None for no schedule."""
    if text is None or not str(text).strip():
        return None
    value = " ".join(str(text).strip().lower().split())
    if value in _NAMED:
        return _NAMED[value]
    match = _EVERY_RE.match(value)
    if match and match.group(2) in _UNITS:
        if int(match.group(1)) == 0:
            # A zero interval used to read as "no schedule", i.e. due on every run.
            raise ValueError(f"schedule {text!r} is zero; give an interval of at least 1 minute, or no schedule")
        return timedelta(minutes=int(match.group(1)) * _UNITS[match.group(2)])
    raise ValueError(f"unparseable schedule {text!r}; use `every N m|h|d`, `N hours`, `hourly`, `daily` or `weekly`")
