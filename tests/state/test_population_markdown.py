"""Tests for autoloop_py.state.population_markdown: the `## 🧬 Population` section's text, parsed and rendered."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_population import cand, candidates, ids, population_of  # shared helpers, found via tests/ on sys.path

from autoloop_py import markdown as md
from autoloop_py.errors import StateError
from autoloop_py.state.parts import format_number
from autoloop_py.state.population import Candidate, Population, add_candidate, empty_population, evict
from autoloop_py.state.population_markdown import (
    format_fitness,
    parse_population,
    render_population,
    with_strategy_state,
)
from autoloop_py.state.population_model import RawBlock

INTRO = (
    "> 🤖 *Managed by the AlphaEvolve strategy. One entry per candidate that has been evaluated "
    "(accepted or rejected). Newest first.*\n"
)

HAND_WRITTEN = f"""## 🧬 Population

{INTRO}
### ⚙️ Strategy State

| Field | Value |
|---|---|
| rng_seed | 7 |
| next_id | 14 |

#### Islands

| Island | Family | Description | Members* | Best id* |
|---|---|---|---|---|
| 0 | sort | sort then scan | 1 | 9 |

### Candidate 12 · island 2 · fitness 0.8123 · gen 12

- **Operator**: exploitation
- **Parent(s)**: 7, 3
- **Feature cell**: hash-dict · small
- **Approach**: grouped sums with a `dict` of accumulators
- **Status**: ✅ accepted
- **Notes**: dict lookups beat sorting below 10k rows
- **Label**: refine
- **Lines**: 3*

<details><summary>Code</summary>

```python
def group_sum(keys, values):
    # one pass
    return {{}}
```

</details>

---

### Candidate 11 · island 1 · fitness null · gen 11

- **Operator**: exploration
- **Parent(s)**: —
- **Feature cell**: sort · small
- **Approach**: argsort then reduceat
- **Status**: ⚠️ error
- **Notes**: the evaluator timed out

---

### Candidate 10 · island 0 · fitness 0.5 · gen 10

- **Operator**: crossover
- **Parent(s)**: 9, 4
- **Feature cell**: sort · medium
- **Approach**: merged sort with scatter
- **Status**: ❌ rejected
- **Notes**: the merge costs more than it saves

<details><summary>Code</summary>

Full source: `memory/autoloop:tsb/candidates/10.py`

</details>

---

### Candidate seven · island 0 · fitness 0.4 · gen 7

- **Operator**: exploration
- **Status**: ✅ accepted

---

### Candidate 9 · island 0 · fitness 0.3 · gen 9

- **Operator**: exploration
- **Parent(s)**: —
- **Feature cell**: sort · small
- **Approach**: plain loop
- **Status**: ✅ accepted
- **Notes**: baseline

"""

COMPACT = """## 🧬 Population
> 🤖 *Managed by the AlphaEvolve strategy. Newest first.*
### Candidate 2 · island 1 · fitness 1.5 · gen 2
- **Operator**: exploitation
- **Parent(s)**: 1
- **Feature cell**: scatter · small
- **Approach**: np.add.at scatter
- **Status**: ✅ accepted
- **Notes**: scatter wins
<details><summary>Code</summary>
```python
import numpy as np

# a comment that is not a heading
### nor is this
def f(x):
    return x
```
</details>
---
### Candidate 1 · island 0 · fitness 1 · gen 1
- **Operator**: exploration
- **Parent(s)**: —
- **Feature cell**: sort · small
- **Approach**: sort
- **Status**: ❌ rejected
- **Notes**: slow
<details><summary>Code</summary>
```python
pass
```
</details>
---
"""


# ---------------------------------------------------------------- parse and render


def test_hand_written_section_round_trips_byte_for_byte() -> None:
    population = parse_population(HAND_WRITTEN)
    assert render_population(population) == HAND_WRITTEN
    assert ids(population.candidates) == [12, 11, 10, 9]
    assert population.next_id == 14  # carried by the strategy state, above max id + 1


def test_hand_written_fields_are_read() -> None:
    c12, c11, c10, c9 = parse_population(HAND_WRITTEN).candidates
    assert (c12.island, c12.fitness, c12.gen, c12.operator, c12.parents) == (2, 0.8123, 12, "exploitation", (7, 3))
    assert c12.cell == ("hash-dict", "small")
    assert c12.approach == "grouped sums with a `dict` of accumulators"
    assert c12.extra == (("Label", "refine"),)  # Lines is derived and not kept
    assert c12.code == "def group_sum(keys, values):\n    # one pass\n    return {}\n"
    assert c12.language == "python"
    assert (c11.fitness, c11.status, c11.parents, c11.code) == (None, "error", (), None)
    assert (c10.code, c10.code_ref, c10.status) == (None, "tsb/candidates/10.py", "rejected")
    assert c9.code is None and c9.notes == "baseline"


def test_intro_and_strategy_state_are_kept_raw() -> None:
    population = parse_population(HAND_WRITTEN)
    assert population.intro == "\n" + INTRO + "\n"
    assert population.strategy_state.startswith("### ⚙️ Strategy State\n")
    assert "#### Islands" in population.strategy_state
    assert population.heading == "## 🧬 Population\n"


def test_unreadable_entry_is_kept_raw_and_left_out(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        population = parse_population(HAND_WRITTEN, "tsb.md", first_line=40)
    assert 7 not in ids(population.candidates)
    (raw,) = population.unreadable
    assert raw.text.startswith("### Candidate seven")
    line = HAND_WRITTEN.splitlines().index("### Candidate seven · island 0 · fitness 0.4 · gen 7")
    assert raw.line == 40 + line
    assert f"tsb.md:{40 + line + 1}:" in caplog.text
    grown = add_candidate(population, cand(14, 0.9))
    assert raw.text in render_population(grown)


def test_compact_seed_schema_is_read_with_headings_inside_code() -> None:
    population = parse_population(COMPACT)
    assert render_population(population) == COMPACT
    assert ids(population.candidates) == [2, 1]
    assert "### nor is this\n" in (population.candidates[0].code or "")
    assert population.candidates[1].code == "pass\n"


def test_rendered_section_is_one_markdown_section_even_with_headings_in_code() -> None:
    code = "## not a section\n# nor this\n\n### nor this\n</details>\n```\n"
    text = render_population(population_of(cand(1, 0.5, code=code)))
    document = "Preamble.\n\n" + text + "## 📚 Lessons Learned\n\n- none\n"
    keys = [s.key for s in md.split_sections(document, 2)]
    assert keys == ["", "population", "lessons learned"]
    assert parse_population(text).candidates[0].code == code


def test_rendered_entry_has_the_seed_layout() -> None:
    candidate = Candidate(
        12, 2, 0.8123, 12, "exploitation", (7, 3), ("hash-dict", "small"), "dicts", "accepted", "fast", "x = 1\n"
    )
    text = render_population(population_of(candidate))
    assert text.endswith(
        "### Candidate 12 · island 2 · fitness 0.8123 · gen 12\n\n"
        "- **Operator**: exploitation\n- **Parent(s)**: 7, 3\n- **Feature cell**: hash-dict · small\n"
        "- **Approach**: dicts\n- **Status**: ✅ accepted\n- **Notes**: fast\n- **Lines**: 1*\n\n"
        "<details><summary>Code</summary>\n\n```python\nx = 1\n```\n\n</details>\n\n---\n\n"
    )
    assert text.startswith("## 🧬 Population\n\n" + INTRO + "\n### Candidate 12")


def test_error_entry_renders_null_fitness_and_no_code() -> None:
    text = render_population(population_of(replace(cand(1, None), status="error", island=None)))
    assert "### Candidate 1 · island — · fitness null · gen 1\n" in text
    assert "- **Status**: ⚠️ error\n" in text and "<details>" not in text


def test_code_fence_is_longer_than_any_backtick_run() -> None:
    code = "s = '```'\nt = '`````'\n"
    text = render_population(population_of(cand(1, 1.0, code=code)))
    assert "``````python\n" + code + "``````\n" in text
    assert parse_population(text).candidates[0].code == code


def test_duplicate_id_raises_state_error_with_the_line() -> None:
    text = HAND_WRITTEN.replace("### Candidate 9 ·", "### Candidate 11 ·")
    with pytest.raises(StateError) as caught:
        parse_population(text, "tsb.md", first_line=100)
    second = text.splitlines().index("### Candidate 11 · island 0 · fitness 0.3 · gen 9")
    assert caught.value.line == 100 + second + 1
    assert str(caught.value).startswith(f"tsb.md:{101 + second}: candidate 11 appears twice")


def test_missing_heading_raises_state_error() -> None:
    with pytest.raises(StateError, match="must start with its `## 🧬 Population` heading"):
        parse_population("### Candidate 1 · island 0 · fitness 1 · gen 1\n", "s.md", 5)


@pytest.mark.parametrize(
    "edit, reason",
    [
        (("- **Status**: ✅ accepted", "- **Status**: maybe"), "status 'maybe'"),
        (("fitness 0.3 ·", "fitness fast ·"), "fitness 'fast'"),
        (("- **Parent(s)**: —\n- **Feature cell**: sort · small\n- **Approach**: plain", "- **Parent(s)**: x\n"
          "- **Feature cell**: sort · small\n- **Approach**: plain"), "parents 'x'"),
        (("- **Notes**: baseline\n", "- **Notes**: baseline\n- **Notes**: again\n"), "a second **Notes**"),
    ],
)
def test_each_unreadable_field_is_reported(edit: tuple[str, str], reason: str, caplog: pytest.LogCaptureFixture) -> None:
    text = HAND_WRITTEN.replace(*edit)
    with caplog.at_level(logging.WARNING):
        population = parse_population(text)
    assert 9 not in ids(population.candidates)
    assert reason in caplog.text
    assert render_population(population) == text


# ---------------------------------------------------------------- changes


def test_add_candidate_prepends_after_the_strategy_state() -> None:
    population = add_candidate(parse_population(HAND_WRITTEN), cand(14, 0.9))
    text = render_population(population)
    assert ids(population.candidates)[0] == 14 and population.next_id == 15
    assert text.index("#### Islands") < text.index("### Candidate 14") < text.index("### Candidate 12")
    assert text.replace(text[text.index("### Candidate 14") : text.index("### Candidate 12")], "") == HAND_WRITTEN


def test_a_hand_deleted_entry_stays_deleted() -> None:
    start = render_population(population_of(cand(1, 0.1), cand(2, 0.2), cand(3, 0.3)))
    deleted = start[: start.index("### Candidate 2")] + start[start.index("### Candidate 1") :]
    population = add_candidate(parse_population(deleted), cand(4, 0.9))
    text = render_population(population)
    assert "### Candidate 2" not in text
    assert ids(population.candidates) == [4, 3, 1]
    assert text.replace(text[text.index("### Candidate 4") : text.index("### Candidate 3")], "") == deleted


def test_edited_notes_stay_after_a_change_elsewhere() -> None:
    start = render_population(population_of(cand(1, 0.1), cand(2, 0.2)))
    edited = start.replace("- **Notes**:\n", "- **Notes**: keep me\n", 1)
    population = add_candidate(parse_population(edited), cand(3, 0.3))
    assert "- **Notes**: keep me\n" in render_population(population)
    assert population.candidates[1].notes == "keep me"


def test_ids_continue_after_a_hand_deleted_max_entry_when_next_id_is_carried() -> None:
    population = with_strategy_state(
        population_of(cand(1, 0.1), cand(2, 0.2), cand(3, 0.3)),
        "### ⚙️ Strategy State\n\n| Field | Value |\n|---|---|\n| next_id | 4 |\n",
    )
    text = render_population(population)
    without_3 = text[: text.index("### Candidate 3")] + text[text.index("### Candidate 2") :]
    reread = parse_population(without_3)
    assert ids(reread.candidates) == [2, 1] and reread.next_id == 4
    assert parse_population(without_3.replace("| next_id | 4 |", "| next_id | 2 |")).next_id == 3


def test_with_strategy_state_places_a_new_block_first_and_replaces_in_place() -> None:
    population = population_of(cand(1, 0.1))
    state = "### ⚙️ Strategy State\n\n| Field | Value |\n|---|---|\n| rng_draws | 3 |"
    text = render_population(with_strategy_state(population, state))
    assert text.index("| rng_draws | 3 |\n\n### Candidate 1") > text.index(INTRO)
    reread = parse_population(text)
    changed = with_strategy_state(reread, reread.strategy_state.replace("| 3 |", "| 4 |"))
    assert render_population(changed) == text.replace("| 3 |", "| 4 |")
    assert render_population(with_strategy_state(reread, "")) == render_population(population)


@pytest.mark.parametrize("text", ["| Field | Value |\n", "### Other\n", "### ⚙️ Strategy State\n\n### Candidate 1\n"])
def test_with_strategy_state_refuses_other_blocks(text: str) -> None:
    with pytest.raises(ValueError, match="Strategy State"):
        with_strategy_state(empty_population(), text)


def test_untouched_entries_survive_eviction_byte_for_byte() -> None:
    text = render_population(population_of(cand(1, 0.5), cand(2, 0.7), cand(3, 0.6), cand(4, 0.2)))
    population = parse_population(text)
    trimmed, evicted = evict(population, cap=3, archive_size=1, direction="higher")
    assert ids(evicted) == [4]
    kept = render_population(trimmed)
    # The newest entry went: a line after the intro keeps its id from being handed out again.
    marked = text[: text.index("### Candidate 4")] + "<!-- autoloop-next-id: 5 -->\n\n"
    assert kept == marked + text[text.index("### Candidate 3") :]
    assert trimmed.next_id == 5 and parse_population(kept).next_id == 5


# ---------------------------------------------------------------- numbers and ranking


@pytest.mark.parametrize("value", [None, 3.0, 0.8123, -2.5, 1e16, 1 / 3, 0.1 + 0.2, 12])
def test_format_fitness_matches_state_format_number(value: float | None) -> None:
    assert format_fitness(value) == ("null" if value is None else format_number(value))


# ---------------------------------------------------------------- properties


@st.composite
def populations(draw: st.DrawFn) -> Population:
    """Draws a population built through add_candidate, sometimes with a strategy state."""
    population = empty_population()
    if draw(st.booleans()):
        population = with_strategy_state(population, "### ⚙️ Strategy State\n\n| Field | Value |\n|---|---|\n| next_id | 3 |\n")
    for i, candidate in enumerate(draw(st.lists(candidates(), max_size=5)), start=3):
        population = add_candidate(population, replace(candidate, id=i))
    return population


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(populations())
def test_render_then_parse_gives_the_same_candidates(population: Population) -> None:
    text = render_population(population)
    reread = parse_population(text)
    assert [replace(c, raw=None) for c in reread.candidates] == list(population.candidates)
    assert reread.unreadable == ()
    assert render_population(reread) == text
    assert reread.next_id == population.next_id


_INSERTS = st.sampled_from(
    ["### Candidate 3 · island 0 · fitness 1 · gen 1\n", "```\n", "~~~python\n", "---\n", "<details>\n", "</details>\n",
     "- **Status**: ✅ accepted\n", "- **Operator**: x\n", "### ⚙️ Strategy State\n", "| next_id | 99 |\n",
     "## Other\n", "\n", "text\n", "- **Feature cell**: a · b · c\n", "    indented\n"]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(populations(), st.lists(st.tuples(st.sampled_from(["delete", "duplicate", "insert", "cut"]), st.integers(0, 10**6), _INSERTS), min_size=1, max_size=4))
def test_mutated_sections_parse_or_raise_state_error(population: Population, edits: list[tuple[str, int, str]]) -> None:
    text = render_population(population)
    for op, at, insert in edits:
        lines = text.split("\n")
        i = at % len(lines)
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "insert":
            lines.insert(i, insert.rstrip("\n"))
        else:
            lines[i] = lines[i][: at % (len(lines[i]) + 1)]
        text = "\n".join(lines)
    try:
        reread = parse_population(text)
    except StateError:
        return
    assert render_population(reread) == text
    assert all(isinstance(block, RawBlock) for block in reread.unreadable)


def test_a_second_strategy_state_block_is_kept_raw(caplog: pytest.LogCaptureFixture) -> None:
    text = HAND_WRITTEN + "### ⚙️ Strategy State\n\n| Field | Value |\n|---|---|\n| next_id | 99 |\n"
    with caplog.at_level(logging.WARNING):
        population = parse_population(text)
    assert population.next_id == 14 and len(population.unreadable) == 2  # with "Candidate seven"
    assert "a second `### ⚙️ Strategy State` block" in caplog.text
    assert render_population(population) == text


def test_an_unreadable_next_id_is_ignored_with_its_file_line(caplog: pytest.LogCaptureFixture) -> None:
    text = HAND_WRITTEN.replace("| next_id | 14 |", "| next_id | soon |")
    with caplog.at_level(logging.WARNING):
        population = parse_population(text, "tsb.md", first_line=10)
    assert population.next_id == 13
    line = text.splitlines().index("| next_id | soon |")
    assert f"tsb.md:{10 + line + 1}: next_id 'soon'" in caplog.text


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=600))
def test_random_text_after_the_heading_parses_or_raises_state_error(body: str) -> None:
    text = "## 🧬 Population\n\n" + body
    try:
        population = parse_population(text, "fuzz.md")
    except StateError as err:
        assert err.line is not None
        return
    assert render_population(population) == text


def test_an_id_the_newest_evicted_entry_had_is_never_handed_out_again() -> None:
    """AlphaEvolve evicts the worst entry, often the one just added: read back, its id was the next id again, and
    the next candidate took it (two trace rows with one id; found by the long-run harness, issue 37)."""
    population, evicted = evict(add_candidate(population_of(*(cand(i, float(i)) for i in range(1, 5))), cand(5, 0.0)),
                                4, 1, "higher")
    assert [c.id for c in evicted] == [5] and population.next_id == 6
    text = render_population(population)
    back = parse_population(text)
    assert back.next_id == 6 and back.intro == population.intro and render_population(back) == text
    assert "<!-- autoloop-next-id" not in render_population(add_candidate(back, cand(6, 1.0)))  # held by entry 6
