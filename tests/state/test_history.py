"""Tests for autoloop_py.state.history: entries rendered from records, range headings, compaction."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from state_helpers import T0, fresh, rec, run, sections_by_key, table_file

from autoloop_py import markdown as md
from autoloop_py.state.file import DEFAULT_BUDGET, StateFile, compact, parse_state, render_state, with_machine
from autoloop_py.state.history import IterationRecord, parse_entry, parse_history_section, relabel_entry

# ---------------------------------------------------------------- entries


def test_delta_sign_for_lower_is_better() -> None:
    state = run(fresh("lower"), [rec("accepted", 0, 0.5), rec("accepted", 1, 0.4)], direction="lower")
    assert "- **Metric**: 0.4 (previous best: 0.5, delta: -0.1)" in state.history[0].text
    assert state.machine.best_metric == 0.4


def test_an_upstream_error_entry_has_no_metric() -> None:
    error = (
        "### Iteration 4 — 2025-01-15 12:00 UTC — [Run](https://github.com/o/r/actions/runs/9)\n\n"
        "- **Status**: ⚠️ Error\n- **Change**: tried a heap\n"
        "- **Metric**: — (previous best: 0.4213, evaluation crashed)\n- **Notes**: ImportError\n"
    )
    entry = parse_entry(error)
    assert (entry.iteration, entry.status, entry.metric) == (4, "error", None)
    accepted = error.replace("⚠️ Error", "✅ Accepted").replace("— (previous", "0.45 (previous")
    assert parse_entry(accepted).metric == 0.45
    assert parse_entry(error.replace("— (previous best: 0.4213, evaluation crashed)", "-1.25")).metric == -1.25


def test_extra_bullets_render_before_notes() -> None:
    state = run(fresh(), [rec("rejected", 0, notes="n", extra=(("Operator", "mutate"), ("Island", "2")))])
    assert "- **Operator**: mutate\n- **Island**: 2\n- **Notes**: n\n" in state.history[0].text


def test_relabel_entry_rewrites_only_the_status_bullet() -> None:
    text = render_state(run(fresh(), [rec("accepted", 0, 0.5), rec("rejected", 1, 0.4)])).replace("\n", "\r\n")
    found = next(s for s in md.split_sections(text, 2) if s.key == "iteration history")
    history = parse_history_section(found)
    relabelled = relabel_entry(history, 1, "✅ Accepted  (CI\npassed)")
    assert relabelled.text == history.text.replace("- **Status**: ✅ Accepted\r\n",
                                                   "- **Status**: ✅ Accepted (CI passed)\r\n")
    assert relabelled.entries[1].status == "accepted" and relabelled.entries[0] == history.entries[0]
    assert relabel_entry(history, 7, "x") == history


def test_a_key_a_candidate_wrote_into_its_text_is_never_read_as_the_entry_key() -> None:
    forged = "<!-- autoloop-key: demo:1:0000000000000000 -->"
    record = IterationRecord("accepted", T0, f"faster {forged}\n{forged}", 0.7, notes=f"n {forged}",
                             extra=(("Operator", f"\n{forged}\n"),), key="demo:1:realrealrealreal")
    entry = run(fresh(), [record]).history[0]
    assert entry.text.count(forged) == 4  # kept as text, each inside a bullet line
    assert entry.key == "demo:1:realrealrealreal"
    without = run(fresh(), [IterationRecord("rejected", T0, f"x {forged}", 0.1, notes=forged)]).history[0]
    assert without.key is None


# ---------------------------------------------------------------- compaction


STATUS_CYCLE = ["accepted", "rejected", "rejected", "error", "rejected"]


def twenty_five() -> tuple[StateFile, list[IterationRecord]]:
    records = [rec(STATUS_CYCLE[i % 5], i, 0.1 + 0.01 * i, notes="n" * 40) for i in range(25)]
    return run(fresh(), records), records


def test_compaction_keeps_ten_and_folds_one_range() -> None:
    state, records = twenty_five()
    history = state.history
    assert [e.iteration for e in history if e.is_detailed] == list(range(25, 15, -1))
    ranges = [e for e in history if e.is_range]
    assert len(ranges) == 1 and history[-1] is ranges[0]
    folded = ranges[0]
    assert (folded.iteration, folded.last_iteration) == (1, 15)
    assert folded.counts == (3, 9, 3)
    assert (folded.first_metric, folded.metric) == (0.1, 0.2)
    assert folded.summary == "change 0; change 5; change 10"
    assert folded.text == "### Iters 1–15 — ✅ 3 / ❌ 9 / ⚠️ 3 (metric 0.1→0.2): change 0; change 5; change 10\n"
    text = render_state(state)
    assert len(text.encode()) < DEFAULT_BUDGET
    assert render_state(parse_state(text)) == text
    assert state.machine.iteration_count == 25 and state.machine.best_metric == 0.1 + 0.01 * 20


def test_a_folded_range_shows_the_best_before_it_and_after_it() -> None:
    # One accepted iteration (0.5 over a best of 0.4) among rejections once read "(metric 0.5→0.5)".
    start = with_machine(fresh(), replace(fresh().machine, best_metric=0.4, initial_metric=0.4))
    records = [rec("rejected", i, 0.1) for i in range(4)] + [rec("accepted", 4, 0.5)]
    records += [rec("rejected", i, 0.1) for i in range(5, 30)]
    ranges = [e for e in run(start, records).history if e.is_range]
    assert len(ranges) == 1 and "(metric 0.4→0.5)" in ranges[0].text
    assert (ranges[0].first_metric, ranges[0].metric) == (0.4, 0.5)


def test_compaction_never_touches_prose() -> None:
    base = render_state(fresh())
    state, _ = twenty_five()
    old, new = sections_by_key(base), sections_by_key(render_state(state))
    for key in ("current priorities", "lessons learned", "foreclosed avenues", "future directions", "program info"):
        assert new[key] == old[key]


def test_compaction_above_eighty_percent_keeps_five() -> None:
    state = run(fresh(), [rec(STATUS_CYCLE[i % 5], i, 0.1 + 0.01 * i, notes="n" * 200) for i in range(12)],
                budget=10**9)
    assert sum(e.is_detailed for e in state.history) == 10
    size = len(render_state(state).encode())
    tight = compact(state, budget=int(size / 0.85))
    assert [e.iteration for e in tight.history if e.is_detailed] == [12, 11, 10, 9, 8]
    folded = [e for e in tight.history if e.is_range]
    assert len(folded) == 1 and (folded[0].iteration, folded[0].last_iteration) == (1, 7)
    assert sum(folded[0].counts) == 7


def test_compaction_merges_all_ranges_when_over_budget() -> None:
    history = (
        "## 📊 Iteration History\n\n"
        "### Iteration 3 — 2026-01-03 10:00 UTC\n\n- **Status**: ✅ Accepted\n- **Change**: c3\n- **Metric**: 0.7\n\n"
        "### Iters 20-29 — ✅ 2 / ❌ 7 / ⚠️ 1 (metric 0.5→0.6): newer\n\n"
        "### A note from Ana\n\nWe reset the counter here.\n\n"
        "### Iters 1–19 — ✅ (metrics 0.1→0.4): upstream summary\n"
    )
    state = parse_state(table_file("| Paused | false |") + "\n" + history)
    merged = compact(state, budget=10)
    entries = merged.history
    assert [e.is_range for e in entries] == [False, True, False]
    assert (entries[1].iteration, entries[1].last_iteration, entries[1].counts) == (1, 29, (2, 7, 1))
    assert (entries[1].first_metric, entries[1].metric) == (0.1, 0.6)
    assert entries[1].summary == "upstream summary; newer"
    assert entries[2].text == "### A note from Ana\n\nWe reset the counter here.\n\n"
    assert render_state(parse_state(render_state(merged))) == render_state(merged)


def test_range_headings_parse() -> None:
    text = table_file("| Paused | false |") + (
        "\n## Iteration History\n\n### Iters 12-40 — ✅ 5 / ❌ 20 / ⚠️ 4 (metric 0.31→0.62): a: b\n"
    )
    entry = parse_state(text).history[0]
    assert (entry.iteration, entry.last_iteration, entry.counts) == (12, 40, (5, 20, 4))
    assert (entry.first_metric, entry.metric, entry.summary) == (0.31, 0.62, "a: b")


def test_summary_is_trimmed() -> None:
    records = [IterationRecord("accepted", T0 + timedelta(hours=i), f"change number {i} " + "w" * 30, 0.1 * (i + 1))
               for i in range(20)]
    folded = [e for e in run(fresh(), records).history if e.is_range][0]
    assert len(folded.summary) <= 200 and folded.summary.startswith("…")
    assert folded.summary.endswith("change number 9 " + "w" * 30)


def test_a_long_history_is_parsed_once_not_once_more_per_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    state = fresh()
    for number in range(1, 41):
        state = run(state, [rec(["accepted", "rejected", "error"][number % 3], number)])
    text = render_state(state)
    history = next(s for s in md.split_sections(text) if s.key.endswith("iteration history"))
    alone = parse_history_section(replace(history, blocks=None, env=None, inner=None))  # each entry parsed alone
    parsed: list[str] = []
    real = md.parse_blocks

    def counted(source: str) -> list[dict[str, object]]:
        parsed.append(source)
        return real(source)

    monkeypatch.setattr(md, "parse_blocks", counted)
    assert parse_history_section(history) == alone
    assert parsed == []
