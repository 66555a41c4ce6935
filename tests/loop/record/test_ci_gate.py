"""Tests for autoloop_py.loop.record.ci_gate: pending-ci records reconciled into accepted, the fix loop, and pauses."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from state_helpers import T0, fresh, rec, run, sections_by_key, table_file, upstream_parse

from autoloop_py.errors import ProgramError, StateError
from autoloop_py.loop.evaluation import acceptance
from autoloop_py.loop.record.ci_gate import (
    ACCEPTED_LABEL,
    EXHAUSTED_LABEL,
    NO_CHECKS_LABEL,
    STUCK_LABEL,
    CheckResult,
    PendingCI,
    Reconciliation,
    carry_over,
    ci_gate_enabled,
    failure_signature,
    format_pending,
    parse_pending,
    read_pending,
    reconcile,
    record_pending,
    with_pending,
)
from autoloop_py.program.model import Program, load_program
from autoloop_py.state.file import MACHINE, StateFile, apply_iteration, parse_state, render_state, with_machine

SHA = "0123456789abcdef0123456789abcdef01234567"
FIX_SHA = "fedcba9876543210fedcba9876543210fedcba98"
FAILED = CheckResult("failure", ("test", "lint"), "E501 line too long (120 > 100)")


def pending_state(direction: str = "higher", target: float | None = None, metric: float = 0.6) -> StateFile:
    """Returns a state with one accepted iteration (best 0.5) and a pending candidate at iteration 2."""
    state = run(fresh(direction, target), [rec("accepted", 0, 0.5)], direction=direction, target=target)
    return pend(state, 1, metric, SHA, direction, target)


def pend(state: StateFile, i: int, metric: float, sha: str, direction: str = "higher",
         target: float | None = None) -> StateFile:
    return record_pending(state, rec("pending-ci", i, metric, commit=sha), direction=direction, target_metric=target)


def settle(state: StateFile, result: CheckResult, *, now: datetime | None = None, max_attempts: int = 5
           ) -> Reconciliation:
    machine = state.machine
    return reconcile(state, result, direction=machine.metric_direction, target_metric=machine.target_metric,
                     now=now, max_attempts=max_attempts)


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    old, new = before.splitlines(), after.splitlines()
    return [line for line in old if line not in new], [line for line in new if line not in old]


# ---------------------------------------------------------------- recording


def test_pending_record_keeps_best_and_writes_rows() -> None:
    errors = run(fresh(), [rec("accepted", 0, 0.5), rec("error", 1)])
    state = pend(errors, 2, 0.6, SHA)
    machine = state.machine
    assert machine.iteration_count == 3 and machine.best_metric == 0.5
    assert machine.recent_statuses == ("accepted", "error", "pending-ci")
    assert machine.consecutive_errors == 0 and machine.last_run == T0 + timedelta(hours=2)
    assert read_pending(state) == PendingCI(SHA, 3, 0.6)
    entry = state.history[0]
    assert entry.status == "pending-ci" and entry.iteration == 3
    assert "- **Status**: ⏳ Pending CI\n" in entry.text
    assert f"- **Commit**: {SHA}\n" in entry.text
    assert "- **Metric**: 0.6 (previous best: 0.5, delta: +0.1)\n" in entry.text
    assert f"| Pending CI | {SHA} · iteration 3 · metric 0.6 · attempts 0 |\n" in render_state(state)


def test_pending_record_needs_commit_and_metric() -> None:
    with pytest.raises(ValueError, match="commit and metric"):
        record_pending(fresh(), rec("pending-ci", 0, 0.6), direction="higher", target_metric=None)
    with pytest.raises(ValueError, match="needs its metric"):
        apply_iteration(fresh(), replace(rec("pending-ci", 0, 0.6), metric=None), direction="higher",
                        target_metric=None)


def test_file_with_pending_rows_round_trips_and_upstream_reads_it() -> None:
    state = settle(pending_state(), FAILED).state
    text = render_state(state)
    again = parse_state(text)
    assert render_state(again) == text and again.machine == state.machine
    assert read_pending(again) == read_pending(state)
    parsed = upstream_parse(text)
    assert parsed["iteration_count"] == 2 and parsed["paused"] is False and parsed["completed"] is False
    assert parsed["recent_statuses"] == ["accepted", "error"]
    assert parsed["pending_ci"] == f"{SHA} · iteration 2 · metric 0.6 · attempts 1 · ci failed"
    assert parsed["ci_signatures"] == "lint+test: E501 line too long (120 > 100)"
    assert upstream_parse(render_state(pending_state()))["recent_statuses"] == ["accepted", "pending-ci"]


# ---------------------------------------------------------------- success and waiting


def test_success_accepts_with_an_entry_level_edit() -> None:
    state = pending_state()
    done = settle(state, CheckResult("success"))
    assert (done.action, done.changed, done.proceeds) == ("accepted", True, True)
    assert done.message == f"CI passed on {SHA}: iteration 2 accepted with metric 0.6"
    machine = done.state.machine
    assert machine.best_metric == 0.6 and machine.recent_statuses == ("accepted", "accepted")
    assert machine.iteration_count == 2 and read_pending(done.state) is None and machine.extra == ()
    before, after = sections_by_key(render_state(state)), sections_by_key(render_state(done.state))
    assert {k for k in before if before[k] != after[k]} == {MACHINE, "iteration history"}
    assert changed_lines(before["iteration history"], after["iteration history"]) == (
        ["- **Status**: ⏳ Pending CI"], [f"- **Status**: {ACCEPTED_LABEL}"])
    assert done.state.history[0].status == "accepted"
    assert parse_state(render_state(done.state)).machine == machine


def test_success_reaching_the_target_completes() -> None:
    done = settle(pending_state("lower", 0.3, metric=0.25), CheckResult("success"))
    machine = done.state.machine
    assert machine.completed and machine.completed_reason == "target metric 0.3 reached with value 0.25"
    assert done.action == "accepted" and not done.proceeds
    assert done.message.endswith("; target metric 0.3 reached with value 0.25")


def test_success_never_moves_the_best_backwards() -> None:
    state = pending_state("lower", metric=0.4)
    best = with_machine(state, replace(state.machine, best_metric=0.3))  # a concurrent runner did better
    assert settle(best, CheckResult("success")).state.machine.best_metric == 0.3


@pytest.mark.parametrize("check", ["pending", "none"])
def test_running_checks_wait(check: str) -> None:
    state = pending_state()
    waiting = settle(state, CheckResult(check))
    assert (waiting.action, waiting.changed, waiting.proceeds) == ("wait", False, False)
    assert waiting.message == f"waiting for CI on {SHA}" and waiting.state is state
    assert waiting.pending == read_pending(state)


def test_no_checks_after_the_grace_period_accept() -> None:
    state = pending_state()
    recorded = T0 + timedelta(hours=1)
    assert settle(state, CheckResult("none"), now=recorded + timedelta(minutes=59)).action == "wait"
    done = settle(state, CheckResult("none"), now=recorded + timedelta(hours=1))
    assert done.action == "accepted" and done.state.history[0].text.count(NO_CHECKS_LABEL) == 1
    assert done.message.startswith(f"no CI checks reported on {SHA}")
    failed = settle(state, FAILED).state
    assert settle(failed, CheckResult("none"), now=recorded + timedelta(days=1)).action == "wait"


def test_nothing_pending_proceeds_and_reconciling_is_idempotent() -> None:
    plain = run(fresh(), [rec("accepted", 0, 0.5)])
    nothing = settle(plain, CheckResult("failure", ("x",)))
    assert (nothing.action, nothing.message, nothing.proceeds, nothing.state) == ("none", "", True, plain)
    accepted = settle(pending_state(), CheckResult("success")).state
    assert settle(accepted, CheckResult("success")).action == "none"


# ---------------------------------------------------------------- the fix loop


def test_failure_requests_a_fix() -> None:
    state = pending_state()
    fixing = settle(state, FAILED)
    assert (fixing.action, fixing.changed, fixing.proceeds) == ("fix", True, True)
    signature = "lint+test: E501 line too long (120 > 100)"
    assert fixing.fix is not None and fixing.fix.signature == signature
    assert (fixing.fix.commit, fixing.fix.iteration, fixing.fix.attempt, fixing.fix.max_attempts) == (SHA, 2, 1, 5)
    assert fixing.fix.summary == "failing checks: lint, test; first error: E501 line too long (120 > 100)"
    assert fixing.message == f"CI failed on {SHA}: fix attempt 1 of 5: {signature}"
    assert read_pending(fixing.state) == PendingCI(SHA, 2, 0.6, 1, (signature,), failed=True)
    machine = fixing.state.machine
    assert machine.recent_statuses == ("accepted", "error") and machine.best_metric == 0.5 and not machine.paused
    assert "- **Status**: ⚠️ CI failed (fix attempt 1 of 5)\n" in fixing.state.history[0].text
    assert fixing.state.history[0].status == "error"


def test_failure_summary_comes_from_the_check_output() -> None:
    fixing = settle(pending_state(), replace(FAILED, summary="  3 tests failed:\n  test_a\n"))
    assert fixing.fix is not None and fixing.fix.summary == "3 tests failed:\n  test_a"


def test_a_kept_fix_becomes_the_pending_candidate() -> None:
    fixing = settle(pending_state(), FAILED).state
    fixed = pend(fixing, 2, 0.55, FIX_SHA)
    pending = read_pending(fixed)
    assert pending == PendingCI(FIX_SHA, 3, 0.55, 1, ("lint+test: E501 line too long (120 > 100)",))
    assert "- **CI fix attempts**: 1\n" in fixed.history[0].text
    assert fixed.machine.recent_statuses == ("accepted", "error", "pending-ci")
    done = settle(fixed, CheckResult("success"))
    assert done.state.machine.best_metric == 0.55 and done.state.machine.recent_statuses[-1] == "accepted"
    assert [e.status for e in done.state.history[:2]] == ["accepted", "error"]


def test_same_signature_twice_pauses_stuck() -> None:
    fixed = pend(settle(pending_state(), FAILED).state, 2, 0.55, FIX_SHA)
    stuck = settle(fixed, replace(FAILED, failing=("lint", "test", "lint")))
    reason = "stuck in CI fix loop: lint+test: E501 line too long (120 > 100)"
    assert (stuck.action, stuck.proceeds, stuck.message) == ("paused", False, f"paused: {reason}")
    machine = stuck.state.machine
    assert machine.paused and machine.pause_reason == reason
    assert machine.recent_statuses == ("accepted", "error", "ci-fix-exhausted")
    assert read_pending(stuck.state) is None and machine.extra == () and machine.best_metric == 0.5
    assert f"- **Status**: {STUCK_LABEL}\n" in stuck.state.history[0].text
    assert stuck.state.history[0].status == "ci-fix-exhausted"
    assert upstream_parse(render_state(stuck.state))["paused"] is True


def test_five_attempts_then_exhausted() -> None:
    state = pending_state()
    for attempt in range(1, 6):
        fixing = settle(state, replace(FAILED, first_error=f"error {attempt}"))
        assert fixing.action == "fix" and fixing.fix is not None and fixing.fix.attempt == attempt
        state = pend(fixing.state, 10 + attempt, 0.6, f"{attempt:07x}")
    pending = read_pending(state)
    assert pending is not None and pending.attempts == 5 and len(pending.signatures) == 5
    exhausted = settle(state, replace(FAILED, first_error="error 6"))
    assert exhausted.action == "paused"
    assert exhausted.state.machine.pause_reason == "ci-fix-exhausted: lint+test: error 6"
    assert exhausted.state.machine.recent_statuses[-2:] == ("error", "ci-fix-exhausted")
    assert read_pending(exhausted.state) is None
    assert f"- **Status**: {EXHAUSTED_LABEL}\n" in exhausted.state.history[0].text


def test_a_failure_read_again_is_another_attempt_not_a_loop() -> None:
    fixing = settle(pending_state(), FAILED).state
    rejected = apply_iteration(fixing, rec("rejected", 2, 0.4), direction="higher", target_metric=None)
    again = settle(rejected, FAILED)
    assert again.action == "fix" and again.fix is not None and again.fix.attempt == 2
    pending = read_pending(again.state)
    assert pending is not None and pending.signatures == ("lint+test: E501 line too long (120 > 100)",)
    assert "- **Status**: ⚠️ CI failed (fix attempt 2 of 5)\n" in again.state.history[1].text
    assert again.state.machine.recent_statuses == ("accepted", "error", "rejected")


def test_budget_spent_on_rereads_pauses_exhausted() -> None:
    state = settle(pending_state(), FAILED, max_attempts=1).state
    assert settle(state, FAILED, max_attempts=1).state.machine.pause_reason == (
        "ci-fix-exhausted: lint+test: E501 line too long (120 > 100)")
    statuses = settle(state, FAILED, max_attempts=1).state.machine.recent_statuses
    assert statuses == ("accepted", "error", "ci-fix-exhausted")


# ---------------------------------------------------------------- signatures and rows


def test_failure_signature() -> None:
    assert failure_signature(CheckResult("failure", ("b", "a", "b"), "  boom \n here")) == "a+b: boom here"
    assert failure_signature(CheckResult("failure", ("test (3.10, ubuntu)",), "x | y")) == "test (3.10; ubuntu): x / y"
    assert failure_signature(CheckResult("failure")) == "unnamed check"
    long = failure_signature(CheckResult("failure", ("t",), "e" * 300))
    assert len(long) == 120 and long.endswith("…")


def test_check_result_rejects_unknown_states() -> None:
    with pytest.raises(ValueError, match="check state 'green'"):
        CheckResult("green")


def test_carry_over() -> None:
    assert carry_over(None, SHA, 4, 0.7) == PendingCI(SHA, 4, 0.7)
    previous = PendingCI(SHA, 4, 0.7, 2, ("a: b",), failed=True)
    assert carry_over(previous, FIX_SHA, 5, 0.8) == PendingCI(FIX_SHA, 5, 0.8, 2, ("a: b",))


def test_with_pending_keeps_other_rows_and_labels_in_place() -> None:
    state = parse_state(table_file("| Paused | false |", "| **pending-ci** | abc1234 · iteration 1 · metric 1 · "
                                   "attempts 0 |", "| Owner | me |"))
    assert read_pending(state) == PendingCI("abc1234", 1, 1.0)
    updated = with_pending(state.machine, PendingCI("abc1234", 1, 1.0, 1, ("x",), failed=True))
    assert [label for label, _ in updated.extra] == ["pending-ci", "Owner", "CI Signatures"]
    assert with_pending(updated, None).extra == (("Owner", "me"),)
    unchanged = with_machine(state, with_pending(state.machine, read_pending(state)))
    assert "| **pending-ci** | abc1234 · iteration 1 · metric 1 · attempts 0 |\n" in render_state(unchanged)


@pytest.mark.parametrize(("rows", "line", "words"), [
    (("| Pending CI | soon |",), 7, "'Pending CI' is 'soon', which is not `<sha> · iteration <N>"),
    (("| Pending CI | abc1234 · iteration 1 · metric nan · attempts 0 |",), 7, "which is not"),
    (("| Pending CI | abc1234 · iteration 1 · metric 1 · attempts 0 |", "| Pending CI | x |"), 8, "appears twice"),
])
def test_unreadable_pending_rows_name_the_line(rows: tuple[str, ...], line: int, words: str) -> None:
    state = parse_state(table_file(*rows), "demo.md")
    with pytest.raises(StateError) as caught:
        read_pending(state)
    assert caught.value.line == line and words in caught.value.message
    assert str(caught.value).startswith(f"demo.md:{line}: ")


def test_parse_pending_tolerates_backticks_and_case() -> None:
    parsed = parse_pending("`ABC1234` · Iteration #7 · metric -0.25 · attempts 3 · CI failed", " a: b , , c ")
    assert parsed == PendingCI("ABC1234", 7, -0.25, 3, ("a: b", "c"), failed=True)


# ---------------------------------------------------------------- the opt-out


@pytest.mark.parametrize(("frontmatter", "enabled"), [
    ("", True), ("ci-gate: false\n", False), ("ci_gate: true\n", True), ("ci-gate: 'False'\n", False),
])
def test_ci_gate_enabled(tmp_path: Path, frontmatter: str, enabled: bool) -> None:
    assert ci_gate_enabled(write_program(tmp_path, frontmatter)) is enabled


def test_ci_gate_rejects_other_values(tmp_path: Path) -> None:
    with pytest.raises(ProgramError) as caught:
        ci_gate_enabled(write_program(tmp_path, "schedule: daily\nci-gate: sometimes\n"))
    assert str(caught.value) == ".autoloop/programs/demo.md:3: frontmatter `ci-gate` is 'sometimes'; write `ci-gate: true` or " \
        "`ci-gate: false`"


def write_program(root: Path, frontmatter: str) -> Program:
    head = f"---\n{frontmatter}---\n\n" if frontmatter else ""
    body = "# Demo\n\n## Goal\n\nGo.\n\n## Target\n\n- `a.py`\n\n## Evaluation\n\n```bash\npython3 a.py\n```\n\n" \
        "The metric is `score`.\n"
    (root / ".autoloop/programs").mkdir(parents=True)
    (root / ".autoloop/programs/demo.md").write_text(head + body, encoding="utf-8")
    (root / "a.py").write_text("print('score: 1')\n", encoding="utf-8")
    return load_program(root, Path(".autoloop/programs/demo.md"))


# ---------------------------------------------------------------- properties


SIGNATURE_TEXT = st.text(st.characters(exclude_categories=["Cs", "Cc", "Zl", "Zp"]), max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(r"[0-9a-f]{7,40}", fullmatch=True), st.integers(1, 10**6),
       st.floats(-1e9, 1e9, allow_nan=False), st.integers(0, 99),
       st.lists(st.tuples(st.lists(SIGNATURE_TEXT, max_size=3), SIGNATURE_TEXT), max_size=4), st.booleans())
def test_property_pending_rows_round_trip(commit: str, iteration: int, metric: float, attempts: int,
                                          failures: list[tuple[list[str], str]], failed: bool) -> None:
    signatures = tuple(dict.fromkeys(failure_signature(CheckResult("failure", tuple(n), e)) for n, e in failures))
    pending = PendingCI(commit, iteration, metric, attempts, signatures, failed)
    assert parse_pending(format_pending(pending), ", ".join(signatures)) == pending
    base = pending_state()
    state = with_machine(base, with_pending(base.machine, pending))
    text = render_state(state)
    again = parse_state(text)
    assert read_pending(again) == pending and render_state(again) == text
    assert upstream_parse(text)["iteration_count"] == 2
    assert render_state(with_machine(again, with_pending(again.machine, None))) == render_state(
        with_machine(base, with_pending(base.machine, None)))


def test_a_candidate_accepted_once_its_ci_passed_joins_the_kept_front(tmp_path: Path) -> None:
    """Under objectives acceptance compares with the Kept Front: a CI-gated candidate joins it once accepted, so a
    candidate it dominates is refused even after its history entry is folded (issue 37)."""
    program = write_program(tmp_path, "objectives: [{score: higher}, {cost: lower}]\n")
    first = rec("accepted", 0, 0.5, extra=(("Objectives", "score 0.5 · cost 2"),))
    state = acceptance.with_kept(run(fresh(), [first]), first, program)
    pending = rec("pending-ci", 1, 0.6, commit=SHA, extra=(("Objectives", "score 0.6 · cost 3"),))
    state = acceptance.with_kept(record_pending(state, pending, direction="higher", target_metric=None), pending,
                                 program)
    assert state.machine.kept_front == ((("score", 0.5), ("cost", 2.0)),)  # not kept yet: CI has not passed
    done = reconcile(state, CheckResult("success"), direction="higher", target_metric=None, program=program)
    assert done.state.machine.kept_front == ((("score", 0.5), ("cost", 2.0)), (("score", 0.6), ("cost", 3.0)))
    assert parse_state(render_state(done.state)).machine.kept_front == done.state.machine.kept_front
    folded = run(done.state, [rec("rejected", i, 0.1) for i in range(2, 16)])
    assert not any(e.is_detailed and e.iteration == 2 for e in folded.history)
    dominated = acceptance.judge(program, {"score": 0.55, "cost": 3.5}, folded)
    assert dominated is not None and not dominated.kept
    unaware = reconcile(state, CheckResult("success"), direction="higher", target_metric=None)  # no program given
    assert unaware.state.machine.kept_front == state.machine.kept_front

