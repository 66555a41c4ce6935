"""Budgets: limits against recorded spend, pause reasons, the daily reset, and the Spent rows of the Machine State."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timezone

from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.state import budget
from autoloop_py.state import file as statefile
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.machine import MachineState, Spend, with_spend

NOON = datetime(2026, 5, 6, 12, tzinfo=timezone.utc)


def _record(day: int, tokens: int | None, cost: float | None) -> IterationRecord:
    return IterationRecord("rejected", datetime(2026, 5, day, 9, tzinfo=timezone.utc), "c", 1.0, tokens=tokens, cost=cost)


def test_spend_adds_up_in_total_and_per_day() -> None:
    machine = MachineState()
    machine = with_spend(machine, _record(5, 100, 0.25))
    machine = with_spend(machine, _record(6, 50, None))
    machine = with_spend(machine, _record(6, None, None))  # nothing spent: unchanged
    assert machine.spent == Spend(150, 0.25)
    assert machine.spent_today == Spend(50, 0.0, date(2026, 5, 6))


def test_budgets_are_reached_at_the_cap_and_a_daily_one_counts_only_today() -> None:
    config = ProgramConfig(budget_usd=1.0, budget_tokens_per_day=100)
    machine = MachineState(spent=Spend(900, 0.99), spent_today=Spend(99, 0.1, date(2026, 5, 6)))
    assert budget.reached(config, machine, NOON) is None
    limit = budget.reached(config, replace(machine, spent=Spend(900, 1.0)), NOON)
    assert limit is not None and limit.key == "budget-usd" and not limit.daily
    limit = budget.reached(config, replace(machine, spent_today=Spend(100, 0.1, date(2026, 5, 6))), NOON)
    assert limit is not None and limit.key == "budget-tokens-per-day"
    reason = budget.pause_reason(limit, "p", NOON.date())
    assert reason == "daily budget reached on 2026-05-06: spent 100/100 tokens (budget-tokens-per-day); runs again the next UTC day"
    # Yesterday's spend does not count today, and yesterday's daily pause is over.
    assert budget.reached(config, replace(machine, spent_today=Spend(500, 1, date(2026, 5, 5))), NOON) is None
    assert budget.daily_pause_over(True, reason, datetime(2026, 5, 7, tzinfo=timezone.utc))
    assert not budget.daily_pause_over(True, reason, NOON)
    assert not budget.daily_pause_over(True, "budget reached: spent $1/$1 (budget-usd)", datetime(2027, 1, 1, tzinfo=timezone.utc))
    assert budget.describe(config, machine, NOON) == "$0.99/$1 · 99/100 tokens today"
    assert budget.describe(ProgramConfig(), MachineState(), NOON) == "—"


def test_spent_rows_read_back_and_appear_only_once_something_was_spent() -> None:
    state = statefile.new_state("p", "goal", "score", "higher", None)
    assert "| Spent" not in statefile.render_state(state)
    machine = with_spend(state.machine, _record(6, 1234, 0.000123))
    text = statefile.render_state(statefile.with_machine(state, machine))
    assert "| Spent | 1234 tokens, $0.000123 |" in text
    assert "| Spent Today | 2026-05-06: 1234 tokens, $0.000123 |" in text
    again = statefile.parse_state(text, "p.md").machine
    assert again.spent == machine.spent and again.spent_today == machine.spent_today


def test_frontmatter_budgets_are_read() -> None:
    from autoloop_py.program.frontmatter import _KEYS, _coerce

    assert _KEYS["budget-usd-per-day"] == "budget_usd_per_day" and _KEYS["budget_tokens"] == "budget_tokens"
    assert _coerce("budget_usd", "5") == 5.0
