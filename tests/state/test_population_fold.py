"""Tests for autoloop_py.state.population_fold: whole entries moved to the memory branch, and read back."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.errors import StateError
from autoloop_py.state.population import (
    Candidate,
    Population,
    add_candidate,
    empty_population,
    parse_population,
    render_population,
    with_strategy_state,
)
from autoloop_py.state.population_fold import fold_entries, id_ranges, is_folded_block, unfold_entries
from tests.state_helpers import folded_ids

PATH = "candidates/demo/population.md"


def cand(cid: int, fitness: float | None = None, **kw: object) -> Candidate:
    values = {"island": cid % 3, "fitness": fitness if fitness is not None else cid / 10, "gen": cid,
              "operator": "exploitation", "parents": (cid - 1,) if cid > 1 else (), "approach": f"idea {cid}",
              "status": "accepted", "code": f"x = {cid}\n", "extra": (("Island", f"{cid % 3} · explore"),)}
    values.update(kw)
    return Candidate(cid, **values)  # type: ignore[arg-type]


def population(n: int, state: str = "") -> Population:
    out = empty_population()
    for cid in range(1, n + 1):
        out = add_candidate(out, cand(cid))
    if state:
        out = with_strategy_state(out, state)
    return parse_population(render_population(out))


def test_folded_entries_leave_the_file_and_come_back_the_same() -> None:
    before = population(12, "### ⚙️ Strategy State\n\n| Field | Value |\n|---|---|\n| next_id | 13 |\n")
    folded, text = fold_entries(before, [1, 2, 3, 5, 9], PATH)
    assert [c.id for c in folded.candidates] == [12, 11, 10, 8, 7, 6, 4]
    rendered = render_population(folded)
    assert "### Candidate 5 " not in rendered and f"`memory/autoloop:{PATH}`" in rendered
    assert "#1–#3, #5, #9" in rendered and "5 entries are kept in full" in rendered
    # The folded file is a Population section of its own, readable like the state file.
    assert [c.id for c in parse_population(text).candidates] == [9, 5, 3, 2, 1]
    reread = parse_population(rendered)
    assert folded_ids(reread) == (1, 2, 3, 5, 9)
    back = unfold_entries(reread, {PATH: text}.get)
    assert [replace(c, raw=None) for c in back.candidates] == [replace(c, raw=None) for c in before.candidates]
    assert back.strategy_state == before.strategy_state and back.next_id == before.next_id


def test_a_person_editing_the_folded_file_is_honoured() -> None:
    folded, text = fold_entries(population(6), [1, 2], PATH)
    edited = text.replace("- **Approach**: idea 2", "- **Approach**: a person's better words")
    assert edited != text
    back = unfold_entries(parse_population(render_population(folded)), {PATH: edited}.get)
    assert next(c for c in back.candidates if c.id == 2).approach == "a person's better words"


def test_an_entry_moved_back_into_the_state_file_wins_over_the_folded_copy() -> None:
    folded, text = fold_entries(population(5), [1, 2], PATH)
    moved_back = replace(folded, candidates=(*folded.candidates, cand(2, 0.25)))
    back = unfold_entries(parse_population(render_population(moved_back)), {PATH: text}.get)
    assert [c.id for c in back.candidates] == [5, 4, 3, 2, 1]
    assert next(c for c in back.candidates if c.id == 2).fitness == 0.25


def test_a_missing_folded_file_is_an_error_naming_the_block() -> None:
    folded, _ = fold_entries(population(4), [1], PATH)
    text = "## 🧬 Population\n\n" + render_population(folded).split("\n", 2)[2]
    with pytest.raises(StateError, match="not on the memory branch") as caught:
        unfold_entries(parse_population(text, "demo.md", 40), lambda path: None, "demo.md")
    assert str(caught.value.path) == "demo.md" and caught.value.line is not None and caught.value.line > 40


def test_nothing_to_fold_changes_nothing() -> None:
    before = population(3)
    assert fold_entries(before, [], PATH) == (before, "")
    assert fold_entries(before, [99], PATH) == (before, "")
    assert unfold_entries(before, lambda path: pytest.fail("nothing is folded, nothing is read")) == before


def test_the_block_is_not_taken_for_an_unreadable_entry(caplog: pytest.LogCaptureFixture) -> None:
    folded, _ = fold_entries(population(4), [1, 2], PATH)
    parse_population(render_population(folded))
    assert "left out of the population" not in caplog.text
    assert is_folded_block("### 🗄️ Folded entries\n") and not is_folded_block("### Candidate 1 · island 0\n")


@given(st.sets(st.integers(min_value=1, max_value=60), max_size=40))
@settings(max_examples=60)
def test_id_ranges_name_exactly_the_ids(ids: set[int]) -> None:
    text = id_ranges(ids)
    named: set[int] = set()
    for part in filter(None, text.split(", ")):
        first, _, last = part.partition("–")
        named |= set(range(int(first[1:]), int((last or first)[1:]) + 1))
    assert named == ids


@given(st.lists(st.integers(min_value=1, max_value=30), unique=True, max_size=30))
@settings(max_examples=40, deadline=None)
def test_fold_then_unfold_keeps_every_entry(fold: list[int]) -> None:
    before = population(30)
    folded, text = fold_entries(before, fold, PATH)
    back = unfold_entries(parse_population(render_population(folded)), {PATH: text}.get)
    strip = lambda cs: sorted((replace(c, raw=None) for c in cs), key=lambda c: c.id)  # noqa: E731
    assert strip(back.candidates) == strip(before.candidates)
