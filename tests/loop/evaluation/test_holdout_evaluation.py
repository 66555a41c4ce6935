"""Tests for loop/evaluation/holdout.py and where its values go: the Machine State, the prompts, GitHub's texts."""

from __future__ import annotations

from datetime import datetime, timezone

from autoloop_py.github.render import ProgramView, render_pull_request, render_status
from autoloop_py.state.machine import MachineState
from autoloop_py.loop.evaluation.holdout import FAILED_NOTE, NOTE, HeldOut, note
from autoloop_py.state.history import IterationRecord, prompt_text
from autoloop_py.state.machine import MachineState, advance, table_rows

WHEN = datetime(2026, 11, 29, tzinfo=timezone.utc)


def _record(status: str, bullets: tuple[tuple[str, str], ...], metric: float = 2.0) -> IterationRecord:
    return IterationRecord(timestamp=WHEN, status=status, change="c", metric=metric, extra=bullets)


def test_the_bullets_put_the_held_out_value_beside_the_search_metric() -> None:
    held = HeldOut(0.8, incumbent=0.9, measured=True, refusal="not kept: held out, it drops")
    assert held.bullets(0.95, "acc") == (
        ("Holdout", "0.8 (`acc` held out; search 0.95, gap +0.15); not kept: held out, it drops"),
        ("Incumbent holdout", "0.9 (the best's, measured for the comparison)"),
    )
    assert HeldOut(None, "exit 1").bullets(0.95, "acc") == (("Holdout", "failed: exit 1"),)
    assert note(held) == NOTE and note(HeldOut(None, "exit 1")) == FAILED_NOTE
    assert "0.8" not in NOTE and "0.9" not in NOTE  # the Notes reach prompts: no value in them


def test_the_machine_state_keeps_the_best_ones_held_out_value() -> None:
    kept = advance(MachineState(), _record("accepted", HeldOut(0.8).bullets(2.0, "s")), "higher", None, 0.0)
    assert kept.holdout_metric == 0.8
    refused = HeldOut(0.5, incumbent=0.8, measured=True, refusal="no").bullets(3.0, "s")
    after = advance(MachineState(holdout_metric=None), _record("rejected", refused), "higher", None, 0.0)
    assert after.holdout_metric == 0.8  # the incumbent's, measured for the comparison
    failed = advance(kept, _record("accepted", HeldOut(None, "boom").bullets(3.0, "s")), "higher", None, 0.0)
    assert failed.holdout_metric is None  # the new best's is unknown
    assert {"label": "Holdout Metric", "value": "0.8", "raw": None} in table_rows(kept)
    assert not [r for r in table_rows(MachineState()) if r["label"] == "Holdout Metric"]  # no row until measured


def test_no_prompt_shows_the_holdout_bullets() -> None:
    entry = ("### Iteration 3 — ✅ accepted\n\n- **Change**: x\n- **Holdout**: 0.8 (`s` held out)\n"
             "- **Incumbent holdout**: 0.7 (the best's)\n- **Notes**: kept\n")
    shown = prompt_text(entry)
    assert "Holdout" not in shown and "0.8" not in shown and "- **Notes**: kept" in shown


def test_the_pr_body_and_status_comment_show_both_values_and_the_gap() -> None:
    measured = MachineState(best_metric=0.95, initial_metric=0.5, holdout_metric=0.9)
    body = render_pull_request(ProgramView("p", "score", measured, latest_change="c", latest_iteration=3))
    assert "| Current metric | 0.95 |" in body and "| Held-out metric | 0.9 (search 0.95, gap +0.05) |" in body
    status = render_status(ProgramView("p", "score", measured))
    assert "| Held-out metric | 0.9 (search 0.95, gap +0.05) |" in status
    unmeasured = MachineState(best_metric=0.95, initial_metric=0.5)
    assert "Held-out" not in render_pull_request(ProgramView("p", "score", unmeasured))
