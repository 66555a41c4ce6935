"""Tests for state/model_stats.py: the Models table read, added to and re-rendered by the state file."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.errors import StateError
from autoloop_py.state import file as statefile
from autoloop_py.state.model_stats import (
    MODEL_BULLET,
    ModelRow,
    ModelTable,
    ModelUse,
    parse_models_section,
    render_models_section,
    use_bullets,
    use_of,
    with_record,
)

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def _record(status: str, metric: float | None, use: ModelUse, tokens: int = 10, cost: float | None = 0.01
            ) -> statefile.IterationRecord:
    return statefile.IterationRecord(status, NOW, "change", metric, tokens=tokens, cost=cost, extra=use_bullets(use))


def _state_after(*records: statefile.IterationRecord) -> statefile.StateFile:
    state = statefile.new_state("demo", "Grow x.", "score", "higher", None)
    for i, record in enumerate(records):
        record = record if i else replace(record, baseline=1.0)
        state = statefile.apply_iteration(state, record, direction="higher", target_metric=None)
    return state


def _table(state: statefile.StateFile) -> ModelTable:
    return parse_models_section(state.section_text(statefile.MODELS), state.path,
                                statefile.section_line(state, statefile.MODELS))


def test_iterations_add_calls_kept_improvement_and_spend_per_model() -> None:
    state = _state_after(
        _record("accepted", 3.0, ModelUse("openai/a", {"openai/a": (8, 0.008), "openai/meta": (2, None)})),
        _record("rejected", 2.0, ModelUse("openai/b", {"openai/b": (10, 0.01)})),
        _record("error", None, ModelUse("openai/b", {})),
        _record("accepted", 3.5, ModelUse("openai/a", {"openai/a": (10, 0.01)})),
    )
    rows = {row.name: row for row in _table(state).rows}
    assert rows["openai/a"] == ModelRow("openai/a", None, 2, 2, 2.5, 18, pytest.approx(0.018))
    assert rows["openai/b"] == ModelRow("openai/b", None, 2, 0, 0.0, 10, 0.01)
    assert rows["openai/meta"] == ModelRow("openai/meta", None, 0, 0, 0.0, 2, 0.0)
    assert rows["openai/a"].accepted_share == 1.0 and rows["openai/meta"].accepted_share is None
    text = statefile.render_state(state)
    # The table sits before the history, and the file reads back byte for byte.
    assert text.index("## 🎰 Models") < text.index("## 📊 Iteration History")
    assert statefile.render_state(statefile.parse_state(text, "demo.md")) == text


def test_a_record_without_model_use_leaves_no_table() -> None:
    state = _state_after(statefile.IterationRecord("rejected", NOW, "tune", 1.0))
    assert state.section_text(statefile.MODELS) is None


def test_hand_edits_are_honoured_and_the_prose_around_the_table_kept() -> None:
    state = _state_after(_record("accepted", 3.0, ModelUse("openai/a", {"openai/a": (8, 0.008)})))
    text = statefile.render_state(state)
    edited = text.replace("| `openai/a` | — | 1 | 1 |", "| `openai/a` | 0.25 | 7 | 1 |").replace(
        "keep the table parseable.*\n", "keep the table parseable.*\n\nA note of ours.\n")
    state = statefile.parse_state(edited, "demo.md")
    state = statefile.apply_iteration(
        state, _record("rejected", 2.0, ModelUse("openai/a", {"openai/a": (8, 0.008)})), direction="higher",
        target_metric=None,
    )
    row = _table(state).rows[0]
    assert (row.weight, row.calls, row.accepted, row.tokens) == (0.25, 8, 1, 16)
    assert "keep the table parseable.*\n\nA note of ours.\n\n| Model |" in (state.section_text(statefile.MODELS) or "")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("| 1 | 1 | 2 |", "| 1 | 1 | lots |", "Improvement is 'lots', which is not a number >= 0"),
        ("| 1 | 1 | 2 |", "| 1.5 | 1 | 2 |", "Calls is '1.5', which is not a whole number >= 0"),
        ("| 1 | 1 | 2 |", "| 1 | 3 | 2 |", "openai/a: Accepted (3) exceeds Calls (1)"),
        ("| 1 | 1 | 2 |", "| 1 | 2 |", "this Models row has 6 cells, expected 7"),
        ("| `openai/a` |", "| open ai |", "'open ai' is not a model string"),
    ],
)
def test_a_malformed_row_is_an_error_naming_its_line(old: str, new: str, message: str) -> None:
    text = statefile.render_state(_state_after(
        _record("accepted", 3.0, ModelUse("openai/a", {"openai/a": (8, 0.008)}))))
    line = next(i for i, row in enumerate(text.splitlines(), 1) if old in row)
    state = statefile.parse_state(text.replace(old, new), "demo.md")
    with pytest.raises(StateError) as caught:
        _table(state)
    assert str(caught.value).startswith(f"demo.md:{line}: {message}")


def test_two_rows_of_one_model_are_an_error() -> None:
    table = "## 🎰 Models\n\n| Model | Weight | Calls | Accepted | Improvement | Tokens | Spend |\n|---|---|---|---|---|---|---|\n"
    row = "| `m/a` | — | 1 | 0 | 0 | 1 | $0 |\n"
    with pytest.raises(StateError, match="x.md:6: model m/a has two rows"):
        parse_models_section(table + row + row, "x.md")


def test_bullets_round_trip_and_a_new_table_renders_from_the_skeleton() -> None:
    use = ModelUse("openai/a", {"openai/a": (12, 0.5), "openai/meta": (3, None)})
    record = _record("accepted", 1.0, use)
    assert dict(record.extra)[MODEL_BULLET] == "openai/a"
    assert use_of(record) == use
    table = with_record(ModelTable(), record, 0.5)
    text = render_models_section(table)
    assert text.startswith("## 🎰 Models\n") and "| `openai/a` | — | 1 | 1 | 0.5 | 12 | $0.5 |" in text
    assert parse_models_section(text, "x.md").rows == table.rows


def test_a_name_that_could_not_be_read_back_stays_out_of_the_table() -> None:
    record = _record("accepted", 2.0, ModelUse("my model|x", {"my model|x": (5, None), "ok/m": (3, None)}))
    table = with_record(ModelTable(), record, 1.0)
    assert [row.name for row in table.rows] == ["ok/m"]
    assert parse_models_section(render_models_section(table), "x.md").rows == table.rows


_NAMES = st.from_regex(r"[a-z][a-z0-9_.-]{0,8}/[a-zA-Z0-9_.:-]{1,12}", fullmatch=True)
_ROWS = st.lists(
    st.builds(
        ModelRow, _NAMES, st.one_of(st.none(), st.floats(0, 100, allow_nan=False)), st.integers(0, 10**6),
        st.just(0), st.floats(0, 1e6, allow_nan=False), st.integers(0, 10**9), st.floats(0, 1e4, allow_nan=False),
    ),
    max_size=6, unique_by=lambda row: row.name,
)


@settings(max_examples=80, deadline=None)
@given(_ROWS, st.text(alphabet="abc \n", max_size=30))
def test_any_table_reads_back_as_written(rows: list[ModelRow], note: str) -> None:
    rows = [replace(row, accepted=row.calls // 2) for row in rows]
    fresh = render_models_section(ModelTable(tuple(rows)))
    table = parse_models_section(fresh, "x.md")
    assert [(r.name, r.weight, r.calls, r.accepted, r.tokens) for r in table.rows] == [
        (r.name, r.weight, r.calls, r.accepted, r.tokens) for r in rows]
    for read, written in zip(table.rows, rows):
        assert read.improvement == pytest.approx(written.improvement, rel=1e-9, abs=1e-9)
        assert read.usd == pytest.approx(written.usd, rel=1e-9, abs=1e-9)
    # The prose around the table is kept byte for byte through a re-render.
    text = fresh.replace("\n\n| Model |", f"\n\n{note.strip()}\n\n| Model |" if note.strip() else "\n\n| Model |")
    assert render_models_section(parse_models_section(text, "x.md")) == render_models_section(
        parse_models_section(render_models_section(parse_models_section(text, "x.md")), "x.md"))
    assert render_models_section(parse_models_section(text, "x.md")).startswith(text.split("| Model |")[0])
