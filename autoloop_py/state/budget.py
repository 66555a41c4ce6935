"""Budgets: the model spend a program may make, in all and per UTC day, checked before its next model call.

Spend is what the iterations recorded (tokens and dollars of every proposal, retries included), added up
in the Machine State's `Spent` and `Spent Today` rows. A total budget reached pauses the program until a
person raises it and resumes; a daily one pauses it until the next UTC day, when it runs again by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Sequence

from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.machine import MachineState, Spend, with_spend
from autoloop_py.state.parts import format_number

DAILY_PREFIX = "daily budget reached on "
_DAILY_RE = re.compile(r"^daily budget reached on (\d{4}-\d{2}-\d{2})\b")


@dataclass(frozen=True)
class Limit:
    """One configured budget and what was spent against it.

    Attributes:
      key: its frontmatter key (`budget-usd`, `budget-tokens-per-day`, ...).
      cap: the budget.
      spent: what the recorded iterations spent against it.
      dollars: whether it counts dollars (else tokens).
      daily: whether it is per UTC day.
    """

    key: str
    cap: float
    spent: float
    dollars: bool
    daily: bool

    @property
    def reached(self) -> bool:
        """Returns whether the spend has reached the budget."""
        return self.spent >= self.cap

    def text(self) -> str:
        """Returns `spent/cap` as a person reads it (`$0.81/$5`, `1200/50000 tokens`)."""
        if self.dollars:
            return f"${_money(self.spent)}/${format_number(self.cap)}"
        return f"{int(self.spent)}/{format_number(self.cap)} tokens"


def limits(config: ProgramConfig, machine: MachineState, today: date) -> list[Limit]:
    """Returns the program's configured budgets with their spend (a daily one counts only today's)."""
    total = machine.spent or Spend()
    day = machine.spent_today if machine.spent_today and machine.spent_today.day == today else Spend(day=today)
    return [
        Limit(key, cap, spend.usd if dollars else float(spend.tokens), dollars, daily)
        for key, cap, spend, dollars, daily in (
            ("budget-usd", config.budget_usd, total, True, False),
            ("budget-tokens", config.budget_tokens, total, False, False),
            ("budget-usd-per-day", config.budget_usd_per_day, day, True, True),
            ("budget-tokens-per-day", config.budget_tokens_per_day, day, False, True),
        )
        if cap is not None
    ]


def reached(config: ProgramConfig, machine: MachineState, now: datetime) -> Limit | None:
    """Returns the first budget the recorded spend has reached (None: the next model call may go out)."""
    return next((limit for limit in limits(config, machine, now.date()) if limit.reached), None)


def reached_after(
    config: ProgramConfig, machine: MachineState, records: Sequence[IterationRecord], now: datetime
) -> Limit | None:
    """Returns the first budget reached once the records' usage (an iteration's attempts so far) is added."""
    for record in records:
        machine = with_spend(machine, record)
    return reached(config, machine, now)


def pause_reason(limit: Limit, program: str, today: date) -> str:
    """Returns the Pause Reason for a reached budget: what was spent, and how the program runs again."""
    spent = f"spent {limit.text()} ({limit.key})"
    if limit.daily:
        return f"{DAILY_PREFIX}{today.isoformat()}: {spent}; runs again the next UTC day"
    return f"budget reached: {spent}; raise {limit.key} in program.md, then `autoloop resume {program}`"


def daily_pause_over(paused: bool, reason: str | None, now: datetime) -> bool:
    """Returns whether the program is paused only by a daily budget of an earlier day."""
    found = _DAILY_RE.match(reason or "") if paused else None
    if found is None:
        return False
    try:
        return date.fromisoformat(found.group(1)) < now.date()
    except ValueError:
        return False


def describe(config: ProgramConfig, machine: MachineState, now: datetime) -> str:
    """Returns the spend against every budget for `autoloop status` ('—' when nothing is spent or capped)."""
    shown = [f"{limit.text()}{' today' if limit.daily else ''}" for limit in limits(config, machine, now.date())]
    if not shown and machine.spent is not None:
        shown.append(f"${_money(machine.spent.usd)}, {machine.spent.tokens} tokens")
    return " · ".join(shown) or "—"


def _money(value: float) -> str:
    return f"{value:.2f}" if value >= 1 else f"{value:.4f}".rstrip("0").rstrip(".") or "0"
