"""Tests for schedule.py: schedules, due, skip reasons and selection."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.errors import ProgramError
from autoloop_py.loop.tick import schedule
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Program
from autoloop_py.program.target import Target

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Machine:
    last_run: datetime | None = None
    paused: bool = False
    pause_reason: str | None = None
    completed: bool = False
    recent_statuses: tuple[str, ...] = ()
    iteration_count: int = 0
    resumed_at: int | None = None


def make(name: str, schedule_text: str | None = "every 6h", unconfigured: bool = False) -> Program:
    return Program(
        name=name,
        path=Path(f".autoloop/programs/{name}/program.md"),
        directory=Path(f".autoloop/programs/{name}"),
        goal="g",
        target=Target(("x.py",)),
        evaluation=None,
        strategy_text="",
        config=ProgramConfig(schedule=schedule_text),
        unconfigured=unconfigured,
        text="",
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        ("every 6h", timedelta(hours=6)),
        ("every 30m", timedelta(minutes=30)),
        ("every 2d", timedelta(days=2)),
        ("every 6 hours", timedelta(hours=6)),
        ("45 minutes", timedelta(minutes=45)),
        ("3 days", timedelta(days=3)),
        ("hourly", timedelta(hours=1)),
        ("Daily", timedelta(days=1)),
        ("weekly", timedelta(weeks=1)),
        (None, None),
        ("", None),
    ],
)
def test_parse_schedule(text: str | None, expected: timedelta | None) -> None:
    assert schedule.parse_schedule(text) == expected


@pytest.mark.parametrize("text", ["every 6hamsters", "every 1.5h", "sometimes", "every h"])
def test_parse_schedule_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="unparseable schedule"):
        schedule.parse_schedule(text)


@pytest.mark.parametrize("text", ["every 0m", "0 hours", "every 00d"])
def test_a_zero_schedule_is_an_error_not_always_due(text: str) -> None:
    with pytest.raises(ValueError, match="is zero; give an interval of at least 1 minute"):
        schedule.parse_schedule(text)


def test_due_boundary_is_due() -> None:
    program = make("a")
    assert schedule.is_due(program, Machine(last_run=NOW - timedelta(hours=6)), NOW)
    assert not schedule.is_due(program, Machine(last_run=NOW - timedelta(hours=6) + timedelta(seconds=1)), NOW)


def test_naive_timestamp_is_utc() -> None:
    program = make("a")
    naive = (NOW - timedelta(hours=7)).replace(tzinfo=None)
    assert schedule.is_due(program, Machine(last_run=naive), NOW)


def test_never_run_and_no_schedule_are_due() -> None:
    assert schedule.is_due(make("a"), None, NOW)
    assert schedule.is_due(make("a", None), Machine(last_run=NOW), NOW)


def test_skip_reasons_in_order() -> None:
    assert schedule.skip_reason(Machine(completed=True, paused=True)) == "completed: target metric reached"
    assert schedule.skip_reason(Machine(paused=True, pause_reason="3 errors")) == "paused: 3 errors"
    assert schedule.skip_reason(Machine(recent_statuses=("rejected",) * 5)) == "plateau: 5 consecutive rejections"
    assert schedule.skip_reason(Machine(recent_statuses=("accepted",) + ("rejected",) * 4)) is None


def test_a_resume_clears_a_plateau_until_five_new_rejections() -> None:
    rejected = ("rejected",) * 7
    resumed = Machine(recent_statuses=rejected, iteration_count=7, resumed_at=7)
    assert schedule.skip_reason(resumed) is None
    later = Machine(recent_statuses=(*rejected, "rejected", "rejected")[-10:], iteration_count=9, resumed_at=7)
    assert schedule.skip_reason(later) is None and schedule.statuses_since_resume(later) == ("rejected",) * 2
    again = Machine(recent_statuses=("rejected",) * 10, iteration_count=12, resumed_at=7)
    assert schedule.skip_reason(again) == "plateau: 5 consecutive rejections"


def test_plan_selects_never_run_then_oldest() -> None:
    programs = [make("old"), make("fresh"), make("new"), make("older")]
    machines = {
        "old": Machine(last_run=NOW - timedelta(hours=8)),
        "fresh": Machine(last_run=NOW - timedelta(hours=1)),
        "new": None,
        "older": Machine(last_run=NOW - timedelta(days=2)),
    }
    plan = schedule.plan(programs, machines, NOW)
    assert plan.selected == "new"
    assert plan.due == ("new", "older", "old")
    assert plan.deferred == ("older", "old")
    assert plan.skipped == (schedule.Skip("fresh", "not due yet", NOW + timedelta(hours=5)),)


def test_forced_runs_a_paused_program_only_with_force() -> None:
    programs = [make("a"), make("b", unconfigured=True)]
    paused = {"a": Machine(paused=True, pause_reason="x")}
    with pytest.raises(ProgramError, match=r"a is paused \(x\): `autoloop resume a` clears the pause, or add --force"):
        schedule.plan(programs, paused, NOW, forced="a")
    plan = schedule.plan(programs, paused, NOW, forced="a", force=True)
    assert plan.selected == "a" and plan.forced
    with pytest.raises(ProgramError, match="requested program 'zzz' not found. Available programs: a, b"):
        schedule.plan(programs, {}, NOW, forced="zzz")
    # An unanswered template names its file and the way to answer it.
    with pytest.raises(ProgramError) as raised:
        schedule.plan(programs, {}, NOW, forced="b")
    assert str(raised.value).startswith(".autoloop/programs/b/program.md: b still has <CUSTOMIZE…> markers to answer")
    assert "`autoloop check` lists each with its line" in str(raised.value)
    assert "`autoloop customize b`" in str(raised.value)


def test_a_program_with_ticks_plateaus_after_five_ticks_worth_of_rejections_at_most_ten() -> None:
    one_tick = Machine(recent_statuses=("accepted",) + ("rejected",) * 8)
    assert schedule.skip_reason(one_tick) == "plateau: 5 consecutive rejections"
    assert schedule.skip_reason(one_tick, slots=4) is None  # two ticks of four that found nothing: searching on
    assert schedule.skip_reason(Machine(recent_statuses=("rejected",) * 10), slots=4) == (
        "plateau: 10 consecutive rejections")
    assert schedule.skip_reason(Machine(recent_statuses=("rejected",) * 6), slots=1) == (
        "plateau: 5 consecutive rejections")


# ---------------------------------------------------------------- a Last Run at the ends of time


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
       st.integers(min_value=-23 * 60, max_value=23 * 60), st.sampled_from(["every 6h", "weekly", "every 30m"]))
@settings(max_examples=200, deadline=None)
def test_any_last_run_a_state_file_holds_reads_back_or_names_the_field(
    moment: datetime, offset: int, every: str
) -> None:
    """Whatever Last Run a state file holds (a hand edit, a forged record), reading it and computing when
    the program is next due either works or raises StateError naming the field: never OverflowError."""
    from autoloop_py.errors import StateError
    from autoloop_py.state import file as statefile

    text = f"{moment.isoformat()}{'+' if offset >= 0 else '-'}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
    state = statefile.new_state("demo", "g", "score", "higher", None)
    rendered = statefile.render_state(state).replace("| Last Run | — |", f"| Last Run | {text} |")
    assert f"| Last Run | {text} |" in rendered
    try:
        machine = statefile.parse_state(rendered, "demo.md").machine
        due = schedule.next_due(make("demo", every), machine)
    except StateError as err:
        assert "'Last Run'" in str(err) and "demo.md" in str(err)
    else:
        assert due is not None and due - machine.last_run == schedule.parse_schedule(every)
