"""Tests for autoloop_py.state.machine: the Machine State table read, rewritten and decided on."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest
from state_helpers import (
    FIXTURE,
    assert_parse_error,
    fresh,
    rec,
    run,
    sections_by_key,
    table_file,
    upstream_parse,
)

from autoloop_py.state.file import MACHINE, apply_iteration, new_state, parse_state, render_state, with_machine
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.machine import is_improvement

# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("# Autoloop: x\n\n## ⚙️ Machine State\n\nnothing here\n", 3, "no `| Field | Value |` table"),
        ("## Machine State\n\n| Field | Value |\n| Paused | true |\n", 4, "no `|-------|-------|` line"),
        (table_file("| Paused | true |", "| Iteration Count | 3 | extra |"), 8, "has 3 cells, expected 2"),
        (table_file("| Pause Reason |"), 7, "has 1 cells"),
        ("## Machine State\n\n| Field | Value | Note |\n|---|---|---|\n", 3, "header has 3 cells"),
        (table_file("| Iteration Count | three |"), 7, "'Iteration Count' is 'three'"),
        (table_file("| Paused | false |", "| Consecutive Errors | -1 |"), 8, "'Consecutive Errors' is '-1'"),
        (table_file("| Best Metric | 0.5x |"), 7, "not a number"),
        (table_file("| Target Metric | nan |"), 7, "'Target Metric' is 'nan'"),
        (table_file("| Paused | yes |"), 7, "not `true` or `false`"),
        (table_file("| Completed | `maybe` |"), 7, "'Completed' is 'maybe'"),
        (table_file("| Last Run | last tuesday |"), 7, "not an ISO timestamp"),
        (table_file("| Recent Statuses | accepted, skipped |"), 7, "comma-separated list"),
        (table_file("| Metric Direction | sideways |"), 7, "`higher` or `lower`"),
        (table_file("| Paused | true |", "| **Paused** | false |"), 8, "appears twice"),
    ],
)
def test_parse_errors_name_the_line(text: str, line: int, words: str) -> None:
    assert_parse_error(text, line, words)


def test_tolerant_values() -> None:
    state = parse_state(table_file(
        "| Last Run | 2026-01-02T10:00:00 |", "| best_metric | `-` |", "| PR | 12 |", "| Issue | #7 |",
        "| Paused | TRUE |", "| Recent Statuses | Pending-CI, ci-fix-exhausted |", "| Metric Direction | Lower |",
        "| Target Metric | |"))
    machine = state.machine
    assert machine.last_run == datetime(2026, 1, 2, 10, tzinfo=timezone.utc)
    assert machine.best_metric is None and machine.target_metric is None
    assert (machine.pr, machine.issue, machine.paused) == ("#12", "#7", True)
    assert machine.recent_statuses == ("pending-ci", "ci-fix-exhausted")
    assert machine.metric_direction == "lower"
    assert machine.iteration_count == 0 and machine.consecutive_errors == 0


def test_table_after_a_quote_without_blank_line() -> None:
    text = "## Machine State\n> note\n| Field | Value |\n|---|---|\n| Paused | true |"
    state = parse_state(text)
    assert state.machine.paused is True
    assert render_state(state) == text


# ---------------------------------------------------------------- rendering


def test_with_machine_rewrites_only_the_table() -> None:
    text = FIXTURE.read_text(encoding="utf-8")
    state = parse_state(text)
    resumed = with_machine(state, replace(state.machine, paused=False, pause_reason=None))
    out = render_state(resumed)
    old, new = sections_by_key(text), sections_by_key(out)
    assert {k for k in old if old[k] != new[k]} == {MACHINE}
    old_lines, new_lines = old[MACHINE].splitlines(), new[MACHINE].splitlines()
    assert [line for line in old_lines if line not in new_lines] == [
        "| Paused | true |", "| Pause Reason | paused by maintainer: reviewing PR #12 before more iterations |"]
    assert [line for line in new_lines if line not in old_lines] == [
        "| Initial Metric | — |", "| Paused | false |", "| Pause Reason | — |"]
    assert parse_state(out).machine == replace(state.machine, paused=False, pause_reason=None)


def test_reasons_with_pipes_survive() -> None:
    state = with_machine(fresh(), replace(fresh().machine, paused=True, pause_reason="a | b"))
    assert parse_state(render_state(state)).machine.pause_reason == "a | b"


def test_upstream_scheduler_reads_what_we_write() -> None:
    state = run(fresh(), [rec("accepted", 0, 0.5), rec("error", 1), rec("error", 2), rec("error", 3)])
    parsed = upstream_parse(render_state(state))
    assert parsed["paused"] is True and parsed["completed"] is False
    assert parsed["iteration_count"] == 4
    assert parsed["recent_statuses"] == ["accepted", "error", "error", "error"]
    assert parsed["last_run"] == "2026-11-21T19:40:00Z"
    fresh_parsed = upstream_parse(render_state(fresh()))
    assert fresh_parsed["paused"] is False and fresh_parsed["recent_statuses"] == []
    assert fresh_parsed["iteration_count"] == 0


# ---------------------------------------------------------------- decisions


def test_is_improvement() -> None:
    assert is_improvement(1.0, None, "higher")
    assert is_improvement(1.1, 1.0, "higher") and not is_improvement(1.0, 1.0, "higher")
    assert is_improvement(0.9, 1.0, "lower") and not is_improvement(1.1, 1.0, "lower")
    assert not is_improvement(1.05, 1.0, "higher", min_delta=0.1)
    assert is_improvement(1.2, 1.0, "higher", min_delta=0.1)


def test_accept_keeps_the_pause() -> None:
    # Only `autoloop resume` clears a pause; an accepted iteration of a forced run leaves it.
    paused = with_machine(fresh(), replace(fresh().machine, paused=True, pause_reason="manual", consecutive_errors=2))
    state = run(paused, [rec("accepted", 1, 0.7)])
    assert state.machine.paused is True and state.machine.pause_reason == "manual"
    assert state.machine.consecutive_errors == 0 and state.machine.best_metric == 0.7


def test_the_pause_reason_counts_what_it_says() -> None:
    state = run(fresh(), [rec("error", 0), rec("error", 1), rec("rejected", 2, 0.1), rec("error", 3)])
    assert state.machine.paused is True
    assert state.machine.pause_reason.startswith("3 errors with no accepted iteration between them: ")
    straight = run(fresh(), [rec("rejected", 0, 0.1), rec("error", 1), rec("error", 2), rec("error", 3)])
    assert straight.machine.pause_reason.startswith("3 consecutive errors: ")


def test_resumed_at_is_a_row_only_once_set() -> None:
    text = render_state(fresh())
    assert "Resumed At" not in text
    resumed = with_machine(fresh(), replace(fresh().machine, iteration_count=4, resumed_at=4))
    assert "| Resumed At | 4 |" in render_state(resumed)
    assert parse_state(render_state(resumed)).machine.resumed_at == 4


def test_recent_statuses_capped_at_ten() -> None:
    statuses = ["accepted", "rejected", "error"] * 4
    state = run(fresh(), [rec(s, i, 0.1 * i) for i, s in enumerate(statuses)])
    assert state.machine.recent_statuses == tuple(statuses[-10:])
    assert state.machine.iteration_count == 12


@pytest.mark.parametrize(("direction", "target", "metrics", "done"), [
    ("higher", 0.9, [0.5, 0.95], "target metric 0.9 reached with value 0.95"),
    ("higher", 0.9, [0.5, 0.9], "target metric 0.9 reached with value 0.9"),
    ("higher", 0.9, [0.5, 0.89], None),
    ("lower", 0.1, [0.5, 0.05], "target metric 0.1 reached with value 0.05"),
    ("lower", 0.1, [0.5, 0.2], None),
])
def test_completion(direction: str, target: float, metrics: list[float], done: str | None) -> None:
    state = run(fresh(direction, target), [rec("accepted", i, m) for i, m in enumerate(metrics)],
                direction=direction, target=target)
    assert state.machine.completed is (done is not None)
    assert state.machine.completed_reason == done
    assert upstream_parse(render_state(state))["completed"] is (done is not None)


def test_baseline_sets_initial_and_best() -> None:
    state = run(fresh(), [rec("accepted", 0, 0.41, baseline=0.364237)])
    machine = state.machine
    assert (machine.initial_metric, machine.best_metric) == (0.364237, 0.41)
    assert "(previous best: 0.364237, delta: +0.045763)" in state.history[0].text
    state = run(fresh(), [rec("rejected", 0, 0.3, baseline=0.364237)])
    assert (state.machine.initial_metric, state.machine.best_metric) == (0.364237, 0.364237)
    state = run(state, [rec("accepted", 1, 0.5, baseline=0.2)])
    assert state.machine.initial_metric == 0.364237


def test_without_a_baseline_the_first_accepted_metric_is_the_initial_one_for_good() -> None:
    state = run(fresh(), [rec("rejected", 0, 0.3), rec("error", 1, None)])
    assert state.machine.initial_metric is None
    state = run(state, [rec("accepted", 2, 0.41), rec("accepted", 3, 0.5)])
    assert (state.machine.initial_metric, state.machine.best_metric) == (0.41, 0.5)
    assert "| Initial Metric | 0.41 |" in render_state(state)


def test_accepted_worse_than_recorded_best_keeps_best() -> None:
    state = run(fresh(), [rec("accepted", 0, 0.8), rec("accepted", 1, 0.6)])
    assert state.machine.best_metric == 0.8


def test_the_spend_held_in_memory_is_the_spend_the_file_reads_back() -> None:
    state = new_state("demo", "g", "score", "higher", None)
    for cost in (0.1, 0.2, 1e-11, 0.3333333333333):
        record = IterationRecord("rejected", datetime(2026, 11, 29, tzinfo=timezone.utc), "c", 1.0, tokens=7, cost=cost)
        state = apply_iteration(state, record, direction="higher", target_metric=None)
        assert parse_state(render_state(state)).machine == state.machine
    assert state.machine.spent is not None and state.machine.spent.usd == 0.6333333333


def test_a_row_added_by_value_is_held_in_memory_as_the_file_reads_it_back() -> None:
    # ci_gate adds `Pending CI` as an unknown row; the section held in memory must equal the parse of its text.
    state = new_state("demo", "g", "score", "higher", None)
    machine = replace(state.machine, extra=(("Pending CI", "abc · iteration 1 · metric 2 · attempts 0"),))
    updated = with_machine(state, machine)
    assert parse_state(render_state(updated), updated.path) == updated
    again = with_machine(updated, replace(machine, iteration_count=1))
    assert parse_state(render_state(again), again.path) == again
