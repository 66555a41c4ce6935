"""Tests for autoloop_py.state.file: lossless parse/render of the whole file, apply_iteration, prose sections."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from state_helpers import (
    FIXTURE,
    T0,
    assert_parse_error,
    fresh,
    rec,
    run,
    sections_by_key,
    table_file,
    upstream_parse,
)

from autoloop_py import markdown as md
from autoloop_py.errors import StateError
from autoloop_py.state import file as statefile
from autoloop_py.state import prose
from autoloop_py.state.file import (
    HISTORY,
    LESSONS,
    MACHINE,
    RECORD_STATUSES,
    HistorySection,
    IterationRecord,
    MachineSection,
    MachineState,
    StateFile,
    add_item,
    apply_iteration,
    load_state,
    parse_state,
    render_state,
)

# ---------------------------------------------------------------- hand-written variants


HAND_PLAIN = """# Autoloop: tuner

Some intro a person wrote.

## Notes from the team

We run this nightly. **Do not** touch the GPU box.

## Iteration History

### Iteration 2 — 2026-01-02 10:00 UTC

- **Status**: ❌ Rejected
- **Change**: smaller step
- **Metric**: 1.9

### Iteration 1 — 2026-01-01 10:00 UTC
- **Status**: ✅ Accepted
- **Change**: first
- **Metric**: 2.0

## **Machine State**

| **Field** | **Value** |
|---|---|
| **Last Run** | `2026-01-02T10:00:00Z` |
| iteration count | `2` |
| Best Metric | `2.0` |
| **Paused** | `false` |
| Owner | **@alice** |
| Recent Statuses | accepted, rejected |

Text after the table.

## lessons learned
* bullet with star
* second bullet

A closing paragraph after the list."""


HAND_EMOJI_VARIANTS = [
    HAND_PLAIN.replace("## **Machine State**", "## ⚙ Machine State"),
    HAND_PLAIN.replace("## **Machine State**", "## ⚙️ machine state"),
    HAND_PLAIN.replace("## **Machine State**", "## Machine State") + "\n",
    HAND_PLAIN.replace("## Iteration History", "## 📊 Iteration History\n\n*(No iterations yet.)*\n"),
]


def test_skeleton_round_trips_and_has_upstream_headings() -> None:
    text = render_state(fresh())
    assert render_state(parse_state(text)) == text
    assert text.startswith("# Autoloop: demo\n\n🤖 *This file is maintained by the Autoloop agent.")
    for heading in ("## ⚙️ Machine State", "## 📋 Program Info", "## 🎯 Current Priorities", "## 📚 Lessons Learned",
                    "## 🚧 Foreclosed Avenues", "## 🔭 Future Directions", "## 📊 Iteration History"):
        assert f"\n{heading}\n" in text
    assert "| Branch | `autoloop/demo` |" in text
    assert text.endswith("<!-- Agent prepends entries here after each iteration -->\n\n*(No iterations yet.)*\n")


def future(state: statefile.StateFile) -> tuple[str, ...]:
    """Returns the Future Directions items (the runner never reads them, only the model does)."""
    return prose.items(state.section_text(statefile.FUTURE))


def test_skeleton_values() -> None:
    state = fresh("lower", 0.25)
    assert state.machine == MachineState(target_metric=0.25, metric_direction="lower", branch="autoloop/demo")
    assert state.lessons == state.priorities == state.foreclosed == future(state) == ()
    assert state.history == ()
    assert "- **Metric**: score (lower is better)" in render_state(state)


@pytest.mark.parametrize("text", [HAND_PLAIN, *HAND_EMOJI_VARIANTS])
def test_hand_written_variants_round_trip(text: str) -> None:
    assert render_state(parse_state(text)) == text


def test_crlf_file_round_trips() -> None:
    text = HAND_PLAIN.replace("\n", "\r\n")
    state = parse_state(text)
    assert render_state(state) == text
    assert state.machine.iteration_count == 2 and [e.iteration for e in state.history] == [2, 1]


def test_hand_written_values() -> None:
    state = parse_state(HAND_PLAIN)
    machine = state.machine
    assert machine.last_run == datetime(2026, 1, 2, 10, tzinfo=timezone.utc)
    assert (machine.iteration_count, machine.best_metric, machine.paused) == (2, 2.0, False)
    assert machine.metric_direction == "higher"
    assert machine.extra == (("Owner", "@alice"),)
    assert machine.recent_statuses == ("accepted", "rejected")
    assert state.lessons == ("bullet with star", "second bullet")
    assert [(e.iteration, e.status, e.metric) for e in state.history] == [(2, "rejected", 1.9), (1, "accepted", 2.0)]


def test_update_of_hand_written_file_keeps_other_bytes() -> None:
    before = parse_state(HAND_PLAIN)
    after = apply_iteration(before, rec("accepted", 3, 2.5, lesson="Bigger steps pay off"),
                            direction="higher", target_metric=None)
    text = render_state(after)
    assert render_state(parse_state(text)) == text
    old, new = sections_by_key(HAND_PLAIN), sections_by_key(text)
    assert new["notes from the team"] == old["notes from the team"]
    assert new[""] == old[""] and new["autoloop: tuner"] == old["autoloop: tuner"]
    assert "| **Owner** | **@alice** |" not in text and "| Owner | **@alice** |" in text
    assert "| Paused | false |" in text
    assert new[MACHINE].endswith("|\n\nText after the table.\n\n")
    assert "* second bullet\n- Bigger steps pay off\n\nA closing paragraph after the list." in text
    assert new[HISTORY].startswith("## Iteration History\n\n### Iteration 3 — ")
    assert new[HISTORY].endswith(old[HISTORY].split("\n\n", 1)[1])


# ---------------------------------------------------------------- the upstream fixture


def test_upstream_fixture_round_trips() -> None:
    text = FIXTURE.read_text(encoding="utf-8")
    assert render_state(parse_state(text)) == text


def test_upstream_fixture_fields() -> None:
    state = parse_state(FIXTURE.read_text(encoding="utf-8"))
    assert state.machine == MachineState(
        last_run=datetime(2026, 5, 14, 12, 3, 41, tzinfo=timezone.utc),
        iteration_count=3,
        best_metric=0.402518,
        initial_metric=None,
        target_metric=None,
        metric_direction="higher",
        branch="autoloop/circle_packing",
        pr="#12",
        issue="#7",
        paused=True,
        pause_reason="paused by maintainer: reviewing PR #12 before more iterations",
        completed=False,
        completed_reason=None,
        consecutive_errors=0,
        recent_statuses=("accepted", "rejected", "accepted"),
        extra=(),
    )
    assert state.priorities == (
        "Try a hexagonal starting layout before more local search.",
        "Keep compute_max_radii exact; no approximations.",
    )
    assert state.lessons[0] == "Ring layouts plateau near 0.40; the corners stay underused."
    assert len(state.lessons) == 2
    assert state.foreclosed == ()
    assert future(state) == ("Seed SLSQP from several random layouts and keep the best.",)
    history = state.history
    assert [(e.iteration, e.status, e.metric) for e in history] == [
        (3, "accepted", 0.402518), (2, "rejected", 0.352114), (1, "accepted", 0.371002)]
    assert history[0].timestamp == datetime(2026, 5, 14, 12, 3, tzinfo=timezone.utc)
    assert history[1].change == "Replace the ring layout with a 5x5 grid plus one circle"
    assert all(not e.is_range and e.is_detailed for e in history)


def test_update_of_upstream_fixture_touches_only_owned_regions() -> None:
    text = FIXTURE.read_text(encoding="utf-8")
    after = render_state(apply_iteration(parse_state(text), rec("rejected", 9, 0.39), direction="higher",
                                         target_metric=None))
    old, new = sections_by_key(text), sections_by_key(after)
    for key in old:
        if key not in (MACHINE, HISTORY):
            assert new[key] == old[key], key
    old_machine, new_machine = (next(s for s in parse_state(t).sections if isinstance(s, MachineSection))
                                for t in (text, after))
    assert (new_machine.head, new_machine.tail) == (old_machine.head, old_machine.tail)
    assert new_machine.table.splitlines()[:5] == [
        "| Field | Value |", "|-------|-------|", "| Last Run | 2026-11-22T01:40:00Z |", "| Iteration Count | 4 |",
        "| Best Metric | 0.402518 |"]
    assert new[HISTORY].endswith(old[HISTORY].split("-->\n\n", 1)[1])
    assert upstream_parse(after)["paused"] is True


# ---------------------------------------------------------------- parse errors


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (table_file("| Paused | true |") + "\n## ⚙️ Machine State\n\n| Field | Value |\n|---|---|\n", 9, "second"),
        ("# Autoloop: x\n\n## Iteration History\n\n### Iteration 1\n", 1, "no '## ⚙️ Machine State' section"),
        ("just some words\n", 1, "no '## ⚙️ Machine State' section"),
        ("\n  \n", 1, "empty"),
        (table_file("| Paused | true |") + "\x0cmore\n", 8, "U+000C"),
    ],
)
def test_parse_errors_name_the_line(text: str, line: int, words: str) -> None:
    assert_parse_error(text, line, words)


def test_load_state_starts_fresh_only_for_absent_or_empty_files() -> None:
    args = {"name": "demo", "goal": "g", "metric": "m", "direction": "higher", "target_metric": None}
    assert load_state(None, "demo.md", **args).machine.iteration_count == 0  # type: ignore[arg-type]
    assert load_state(" \n", "demo.md", **args).path == "demo.md"  # type: ignore[arg-type]
    with pytest.raises(StateError):
        load_state("# Autoloop: demo\n\n## 📚 Lessons Learned\n", "demo.md", **args)  # type: ignore[arg-type]


def test_public_names_stay_importable_from_state() -> None:
    # Callers read the history and machine records and rules through state.file.
    names = ("MachineState", "IterationRecord", "HistoryEntry", "TIGHT_FRACTION", "compact", "is_improvement")
    assert all(hasattr(statefile, name) for name in names)


# ---------------------------------------------------------------- apply_iteration


def test_accepted_path() -> None:
    state = run(fresh(), [rec("error", 0), rec("accepted", 1, 0.5, commit="abc1234", notes="ok",
                                                run_url="https://github.com/o/r/actions/runs/1",
                                                tokens=1234, cost=0.0021)])
    machine = state.machine
    assert (machine.iteration_count, machine.best_metric, machine.consecutive_errors) == (2, 0.5, 0)
    assert machine.last_run == T0 + timedelta(hours=1)
    assert machine.recent_statuses == ("error", "accepted")
    entry = state.history[0].text
    assert entry.startswith("### Iteration 2 — 2026-11-21 17:40 UTC — [Run](https://github.com/o/r/actions/runs/1)\n\n")
    assert "- **Status**: ✅ Accepted\n- **Change**: change 1\n- **Metric**: 0.5\n- **Commit**: abc1234\n" in entry
    assert "- **Cost**: 1234 tokens, $0.0021\n- **Notes**: ok\n" in entry
    assert "| Last Run | 2026-11-21T17:40:00Z |" in render_state(state)


def test_rejected_path_keeps_errors_and_best() -> None:
    state = run(fresh(), [rec("accepted", 0, 0.5), rec("error", 1), rec("rejected", 2, 0.4, commit="dead")])
    machine = state.machine
    assert (machine.best_metric, machine.consecutive_errors, machine.iteration_count) == (0.5, 1, 3)
    entry = state.history[0]
    assert entry.status == "rejected"
    assert "Commit" not in entry.text
    assert "- **Metric**: 0.4 (previous best: 0.5, delta: -0.1)" in entry.text


def test_error_path_pauses_at_three() -> None:
    long_error = "ImportError: " + "x" * 200
    state = run(fresh(), [rec("error", 0), rec("error", 1)])
    assert state.machine.paused is False and state.machine.consecutive_errors == 2
    state = run(state, [rec("error", 2, notes=long_error)])
    machine = state.machine
    assert machine.paused is True and machine.consecutive_errors == 3
    assert machine.pause_reason is not None
    assert machine.pause_reason.startswith("3 consecutive errors: ImportError: xxx")
    assert len(machine.pause_reason) == len("3 consecutive errors: ") + 100
    assert "- **Status**: ⚠️ Error" in state.history[0].text and "Metric" not in state.history[0].text
    reparsed = parse_state(render_state(state))
    assert reparsed.machine == machine
    assert upstream_parse(render_state(state))["paused"] is True


def test_invalid_records_are_refused() -> None:
    with pytest.raises(ValueError):
        apply_iteration(fresh(), rec("skipped"), direction="higher", target_metric=None)
    with pytest.raises(ValueError):
        apply_iteration(fresh(), IterationRecord("accepted", T0, "c", None), direction="higher", target_metric=None)
    with pytest.raises(ValueError):
        apply_iteration(fresh(), rec("accepted"), direction="up", target_metric=None)


NASTY = ["```", "~~~", "<!--", "## ⚙️ Machine State", "### Iteration 99", "| a | b |", "---", "- nested", "1. item",
         "> quote", "#", "<div>", "\\", "`code` *em* [a](b) &amp;", "*(none yet)*"]


@pytest.mark.parametrize("nasty", NASTY)
def test_markdown_in_record_texts_cannot_break_the_file(nasty: str) -> None:
    records = [IterationRecord(status, T0 + timedelta(hours=i), nasty, None if status == "error" else 0.1 * i,
                               lesson=f"{nasty} {i}", notes=nasty, extra=((nasty, nasty),))
               for i, status in enumerate(["accepted", "error", "error", "error", "rejected"])]
    state = run(fresh(), records)
    again = parse_state(render_state(state))
    assert again.machine == state.machine
    assert [(e.iteration, e.status) for e in again.history] == [(5, "rejected"), (4, "error"), (3, "error"),
                                                                 (2, "error"), (1, "accepted")]
    assert len(again.lessons) == 5
    assert sections_by_key(render_state(again)).keys() == sections_by_key(render_state(fresh())).keys()


# ---------------------------------------------------------------- prose sections


def test_lessons_dedup_and_placeholder() -> None:
    state = run(fresh(), [rec("rejected", 0, lesson="Use numpy for the inner loop."),
                          rec("rejected", 1, lesson="use  NUMPY for the *inner* loop"),
                          rec("rejected", 2, lesson="Cache the distance matrix")])
    lessons = state.section_text(LESSONS)
    assert lessons is not None
    assert "(none yet)" not in lessons
    assert lessons.endswith("freely.\n\n- Use numpy for the inner loop.\n- Cache the distance matrix\n\n---\n\n")
    assert state.lessons == ("Use numpy for the inner loop.", "Cache the distance matrix")


def test_lesson_keeps_peoples_lines() -> None:
    text = FIXTURE.read_text(encoding="utf-8")
    state = apply_iteration(parse_state(text), rec("rejected", 5, lesson="Corners need small circles"),
                            direction="higher", target_metric=None)
    lessons = state.section_text(LESSONS)
    assert lessons is not None
    assert lessons == sections_by_key(text)[LESSONS].replace(
        "time budget.\n", "time budget.\n- Corners need small circles\n")


def test_missing_sections_are_added() -> None:
    text = table_file("| Paused | false |")
    state = apply_iteration(parse_state(text), rec("accepted", 0, 1.0, lesson="L1"), direction="higher",
                            target_metric=None)
    out = render_state(state)
    assert out.startswith("# Autoloop: x\n\n## ⚙️ Machine State\n\n| Field | Value |\n")
    assert out.index("## 📚 Lessons Learned") < out.index("## 📊 Iteration History")
    reparsed = parse_state(out)
    assert reparsed.lessons == ("L1",)
    assert [e.iteration for e in reparsed.history] == [1]
    assert render_state(reparsed) == out


def test_add_item_to_future_directions() -> None:
    state = add_item(fresh(), "future directions", "Try simulated annealing")
    assert future(state) == ("Try simulated annealing",)
    assert add_item(state, "future directions", "try simulated annealing.") == state


# ---------------------------------------------------------------- properties


MARKDOWN_BITS = ["-", "*", "+", "1.", "2)", "#", "##", "###", ">", "```", "~~~", "<!--", "-->", "|", "---", "***", "**",
                 "_", "`", "[a](b)", "<div>", "\\", "&amp;", "word", "*(none yet)*", "Iteration 3", "Iters 1-2", "✅ 4"]
TEXT = st.one_of(st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
                 st.lists(st.sampled_from(MARKDOWN_BITS), max_size=6).map(" ".join))
RECORDS = st.lists(
    st.tuples(st.sampled_from(RECORD_STATUSES), st.floats(-1e6, 1e6, allow_nan=False), TEXT,
              st.one_of(st.none(), TEXT), TEXT),
    min_size=1,
    max_size=25,
)


def build(records: list[tuple[str, float, str, str | None, str]], direction: str) -> StateFile:
    state = fresh(direction, 0.0)
    for i, (status, metric, change, lesson, notes) in enumerate(records):
        record = IterationRecord(status, T0 + timedelta(minutes=i), change, None if status == "error" else metric,
                                 commit="abc1234", lesson=lesson, notes=notes)
        state = apply_iteration(state, record, direction=direction, target_metric=0.0, budget=6000)
    return state


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS, st.sampled_from(["higher", "lower"]))
def test_property_round_trip_after_updates(records: list[tuple[str, float, str, str | None, str]],
                                           direction: str) -> None:
    state = build(records, direction)
    text = render_state(state)
    again = parse_state(text)
    assert render_state(again) == text
    assert again.machine == state.machine
    assert [(e.iteration, e.last_iteration, e.status) for e in again.history] == \
        [(e.iteration, e.last_iteration, e.status) for e in state.history]
    assert sum(e.is_detailed for e in again.history) == min(len(records), 10)
    assert sections_by_key(text).keys() == sections_by_key(render_state(fresh())).keys()
    detailed_and_folded = sum(1 for e in again.history if e.is_detailed) + sum(
        e.last_iteration - e.iteration + 1 for e in again.history if e.is_range and e.last_iteration and e.iteration)
    assert detailed_and_folded == len(records)


LINE = st.text(st.characters(exclude_characters="#`<~\r\n", exclude_categories=["Cs", "Cc", "Zl", "Zp"]),
               max_size=30)
EDITABLE = ("autoloop: demo", "current priorities", "foreclosed avenues", "future directions", "program info")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(EDITABLE), st.floats(0, 1), LINE), max_size=6),
       st.lists(st.tuples(st.integers(0, 8), st.text("abcdefgh ", min_size=1, max_size=10), LINE), max_size=2))
def test_property_hand_edits_survive(edits: list[tuple[str, float, str]],
                                     new_sections: list[tuple[int, str, str]]) -> None:
    base = render_state(run(fresh(), [rec("accepted", 0, 0.5), rec("rejected", 1, 0.4)]))
    parts = [[s.key, s.text] for s in md.split_sections(base, 2)]
    for key, where, line in edits:
        part = next(p for p in parts if p[0] == key)
        lines = part[1].splitlines(keepends=True)
        at = 1 + int(where * (len(lines) - 1))
        part[1] = "".join(lines[:at] + [line + "\n"] + lines[at:])
    for at, title, body in new_sections:
        parts.insert(min(2 + at, len(parts)), [f"notes {title}", f"## Notes {title}\n\n{body}\n\n"])
    edited = "".join(text for _, text in parts)
    before = sections_by_key(edited)
    after_state = apply_iteration(parse_state(edited), rec("accepted", 5, 0.9, lesson="a new lesson"),
                                  direction="higher", target_metric=None)
    after = sections_by_key(render_state(after_state))
    for key, text in before.items():
        if key not in (MACHINE, HISTORY, LESSONS):
            assert after[key] == text


MUTATION = st.tuples(st.sampled_from(["insert", "delete", "replace", "dup_line", "drop_line"]),
                     st.floats(0, 1), st.text(max_size=8))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_property_mutated_files_parse_or_raise_state_error(mutations: list[tuple[str, float, str]]) -> None:
    text = FIXTURE.read_text(encoding="utf-8")
    for kind, where, chunk in mutations:
        text = mutate(text, kind, where, chunk)
    check_parses_or_state_error(text)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_property_random_text_parses_or_raises_state_error(text: str) -> None:
    check_parses_or_state_error(text)
    check_parses_or_state_error(table_file("| Paused | false |") + text)


def mutate(text: str, kind: str, where: float, chunk: str) -> str:
    at = int(where * len(text))
    if kind == "insert":
        return text[:at] + chunk + text[at:]
    if kind == "delete":
        return text[:at] + text[at + len(chunk) + 1:]
    if kind == "replace":
        return text[:at] + chunk + text[at + len(chunk):]
    lines = text.splitlines(keepends=True)
    i = int(where * (len(lines) - 1))
    return "".join(lines[:i] + lines[i:i + 1] * (2 if kind == "dup_line" else 0) + lines[i + 1:])


def check_parses_or_state_error(text: str) -> None:
    try:
        state = parse_state(text)
    except StateError as error:
        assert error.line is not None and error.line >= 1
        return
    assert render_state(state) == text
    assert isinstance(state.machine, MachineState)
    assert any(isinstance(s, MachineSection) for s in state.sections)
    assert all(isinstance(s.text, str) for s in state.sections if isinstance(s, HistorySection))


def test_parsing_the_same_text_again_reuses_the_result_and_still_raises_errors() -> None:
    text = statefile.render_state(fresh())
    first = statefile.parse_state(text, "a.md")
    assert statefile.parse_state(text, "a.md") is first
    assert statefile.parse_state(text, "b.md").path == "b.md"
    broken = text.replace("| Iteration Count | 0 |", "| Iteration Count | many |")
    for _ in range(2):
        with pytest.raises(StateError, match="'Iteration Count' is 'many'"):
            statefile.parse_state(broken, "a.md")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS, st.sampled_from(["higher", "lower"]))
def test_property_an_updated_state_equals_the_parse_of_its_text(
    records: list[tuple[str, float, str, str | None, str]], direction: str
) -> None:
    # What lets a run keep the state it rendered instead of parsing the file back (statefile.remember).
    state = build(records, direction)
    assert statefile._parse_state(render_state(state), state.path) == state


def test_a_remembered_state_is_read_back_without_parsing() -> None:
    state = apply_iteration(fresh(), rec("accepted", 1, 2.5), direction="higher", target_metric=None)
    text = render_state(state)
    assert statefile.remember(state, text) is state
    assert parse_state(text, state.path) is state
    assert parse_state(text, "elsewhere.md") is not state  # the path is part of what a parse returns
