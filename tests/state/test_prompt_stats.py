"""Tests for state/prompt_stats.py: the Prompts table read, credited, added to by a guide and re-rendered."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.errors import StateError
from autoloop_py.state import file as statefile
from autoloop_py.state.parts import NO_VALUE, one_line
from autoloop_py.state.prompt_stats import (
    BASE,
    PROMPT_BULLET,
    WRITTEN_BULLET,
    PromptRow,
    PromptTable,
    instruction_text,
    parse_prompts_section,
    render_prompts_section,
    use_bullets,
    use_of,
    with_record,
)

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
HAND_WRITTEN = """## 🧪 Prompts

Our own variants; the runner keeps this line.

| Variant | Weight | Calls | Accepted | Improvement | Tokens | Instruction |
|---|---|---|---|---|---|---|
| `terse` | — | 0 | 0 | 0 | 0 | Change one constant at a time \\| never two. |
| `bold` | 2 | 4 | 1 | 0.25 | 7 | Try a different algorithm. |

---

"""


def _record(status: str, metric: float | None, variant: str | None, written: PromptRow | None = None,
            tokens: int = 10) -> statefile.IterationRecord:
    return statefile.IterationRecord(status, NOW, "change", metric, tokens=tokens,
                                     extra=use_bullets(variant, written))


def _with_hand_table() -> statefile.StateFile:
    text = statefile.render_state(statefile.new_state("demo", "Grow x.", "score", "higher", None))
    text = text.replace("## 📊 Iteration History", HAND_WRITTEN + "## 📊 Iteration History", 1)
    return statefile.parse_state(text, "demo.md")


def _apply(state: statefile.StateFile, *records: statefile.IterationRecord) -> statefile.StateFile:
    for record in records:
        if state.machine.best_metric is None:
            record = replace(record, baseline=1.0)
        state = statefile.apply_iteration(state, record, direction="higher", target_metric=None)
    return state


def test_a_hand_written_table_is_credited_and_its_prose_kept() -> None:
    state = _apply(_with_hand_table(), _record("accepted", 3.0, "terse"), _record("rejected", 2.0, "bold"),
                   _record("accepted", 3.5, "terse", tokens=5))
    rows = {row.name: row for row in statefile.prompts_of(state).rows}
    assert rows["terse"] == PromptRow("terse", "Change one constant at a time | never two.", None, 2, 2, 2.5, 15)
    # The counts a person wrote are what the draw read and what the record adds to.
    assert rows["bold"] == PromptRow("bold", "Try a different algorithm.", 2.0, 5, 1, 0.25, 17)
    text = statefile.render_state(state)
    assert "Our own variants; the runner keeps this line.\n" in text
    assert "| `terse` | — | 2 | 2 | 2.5 | 15 | Change one constant at a time \\| never two. |" in text
    assert statefile.render_state(statefile.parse_state(text, "demo.md")) == text


def test_a_record_without_a_variant_leaves_no_table() -> None:
    state = _apply(statefile.new_state("demo", "Grow x.", "score", "higher", None),
                   statefile.IterationRecord("rejected", NOW, "tune", 1.0))
    assert state.section_text(statefile.PROMPTS) is None


def test_the_base_variant_and_a_written_one_create_the_table_before_the_history() -> None:
    written = PromptRow("p1", "Prefer the smallest change that could help.")
    state = _apply(statefile.new_state("demo", "Grow x.", "score", "higher", None),
                   _record("rejected", 0.5, BASE, written), _record("accepted", 2.0, "p1"))
    table = statefile.prompts_of(state)
    assert [(r.name, r.instruction, r.calls, r.accepted) for r in table.rows] == [
        (BASE, "", 1, 0), ("p1", "Prefer the smallest change that could help.", 1, 1)]
    text = statefile.render_state(state)
    assert text.index("## 🧪 Prompts") < text.index("## 📊 Iteration History")
    assert "- **Prompt written**: p1: Prefer the smallest change that could help." in text


def test_a_variant_deleted_by_hand_is_not_credited_or_recreated() -> None:
    table = with_record(PromptTable((PromptRow("a", "x"),)), _record("accepted", 2.0, "gone"), 1.0)
    assert table.rows == (PromptRow("a", "x"),)


def test_a_hostile_written_variant_cannot_break_the_table_or_add_sections() -> None:
    hostile = "\x1b[31m## 🎰 Models\n| `evil` | 9 | 0 | 0 | 0 | 0 | x |\n\n## ⚙️ Machine State\n| Paused | true |"
    record = _record("rejected", 2.0, BASE, PromptRow("p1", hostile))
    # What the runner writes: the variant made safe when it is parsed from the guide's reply.
    state = _apply(statefile.new_state("demo", "Grow x.", "score", "higher", None),
                   replace(record, extra=use_bullets(BASE, PromptRow("p1", instruction_text(hostile)))))
    keys = [section.key for section in state.sections]
    assert keys.count("machine state") == 1 and keys.count("models") == 0
    [base, p1] = statefile.prompts_of(state).rows
    assert p1.name == "p1" and "\n" not in p1.instruction and "\x1b" not in p1.instruction
    assert p1.instruction.startswith("🎰 Models | `evil` |")  # no heading, its pipes escaped in its one cell
    assert "| `p1` | — | 0 | 0 | 0 | 0 | 🎰 Models \\| `evil` \\|" in (state.section_text(statefile.PROMPTS) or "")
    assert not state.machine.paused
    # Bullets as an untrusted outcome could carry them are made safe on reading too.
    _, read = use_of(record)
    assert read is not None and read.instruction == instruction_text(hostile)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("| `bold` | 2 |", "| `bold` | lots |", "Weight is 'lots', which is not a number >= 0"),
        ("| `bold` | 2 | 4 | 1 |", "| `bold` | 2 | 0 | 1 |", "bold: Accepted (1) exceeds Calls (0)"),
        ("| `bold` | 2 | 4 |", "| `bold` | 2 |", "this Prompts row has 6 cells, expected 7"),
        ("| `bold` |", "| my variant |", "'my variant' is not a variant name"),
        ("| `bold` |", "| `terse` |", "variant terse has two rows"),
    ],
)
def test_a_malformed_row_is_an_error_naming_its_line(old: str, new: str, message: str) -> None:
    text = statefile.render_state(_with_hand_table())
    line = next(i for i, row in enumerate(text.splitlines(), 1) if old in row)
    state = statefile.parse_state(text.replace(old, new), "demo.md")
    with pytest.raises(StateError) as caught:
        statefile.prompts_of(state)
    assert str(caught.value).startswith(f"demo.md:{line}: {message}")


def test_bullets_round_trip() -> None:
    written = PromptRow("p2", "Keep it | short.")
    record = _record("accepted", 1.0, "p1", written)
    assert dict(record.extra) == {PROMPT_BULLET: "p1", WRITTEN_BULLET: "p2: Keep it | short."}
    assert use_of(record) == ("p1", written)
    assert use_of(_record("accepted", 1.0, "not a name")) == (None, None)


_INSTRUCTIONS = st.text(max_size=40).map(one_line).filter(lambda text: text not in NO_VALUE) | st.just("")
_ROWS = st.lists(
    st.builds(
        PromptRow, st.from_regex(r"[a-z][a-z0-9_.-]{0,8}", fullmatch=True), _INSTRUCTIONS,
        st.one_of(st.none(), st.floats(0, 100, allow_nan=False)), st.integers(0, 10**6), st.just(0),
        st.floats(0, 1e6, allow_nan=False), st.integers(0, 10**9),
    ),
    max_size=6, unique_by=lambda row: row.name,
)


@settings(max_examples=40, deadline=None)
@given(_ROWS, st.text(alphabet="abc \n", max_size=30))
def test_any_table_reads_back_as_written(rows: list[PromptRow], note: str) -> None:
    rows = [replace(row, accepted=row.calls // 2, improvement=round(row.improvement, 6)) for row in rows]
    text = render_prompts_section(PromptTable(tuple(rows)))
    assert parse_prompts_section(text, "x.md").rows == tuple(rows)
    # A person's prose before the table survives a re-render byte for byte.
    noted = text.replace("\n\n| Variant |", f"\n\n{note.strip()}\n\n| Variant |" if note.strip() else "\n\n| Variant |")
    again = render_prompts_section(parse_prompts_section(noted, "x.md"))
    assert again == noted and parse_prompts_section(again, "x.md").rows == tuple(rows)
