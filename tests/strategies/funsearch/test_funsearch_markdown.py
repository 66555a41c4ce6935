"""Tests for autoloop_py.strategies.funsearch.markdown: the `### ⚙️ Strategy State` block read back and re-rendered (spec §4.7)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.errors import StateError
from autoloop_py.state.population import empty_population, parse_population, render_population, with_strategy_state
from autoloop_py.strategies.funsearch.config import FunSearchConfig
from autoloop_py.strategies.funsearch.markdown import parse_state_block, render_state_block
from autoloop_py.strategies.funsearch.state import (
    Cluster,
    FunSearchState,
    Island,
    Member,
    hash_token,
    sorted_members,
)

CONFIG = FunSearchConfig("priority")
STATE = FunSearchState(
    islands=(
        Island(0, version=1, num_programs=4, best_score=16.0, best_id=12, clusters=(
            Cluster((10.0, 16.0), 16.0, (Member(12, 340, "9f2c"), Member(31, 512))),
            Cluster((0.5,), 0.5, (Member(1, 300, "a1"),)),
        )),
        Island(1, num_programs=15000),
        Island(2, num_programs=1, best_score=-0.25, best_id=1, clusters=(Cluster((-0.25,), -0.25, (Member(1, 300),)),)),
    ),
    registrations_since_reset=3,
    last_reset_at=17,
    stored=40,
    duplicates=2,
    execution_failed=1,
    version_mismatch=0,
    rng_seed=7,
    rng_draws=123,
)
TEXT = """\
### ⚙️ Strategy State

> 🤖 *FunSearch bookkeeping: edit a value and the next iteration uses it; columns marked * are recomputed.*

| Field | Value |
|---|---|
| registrations_since_reset | 3 |
| last_reset_at | 17 |
| stored | 40 |
| duplicates | 2 |
| execution_failed | 1 |
| version_mismatch | 0 |
| rng_seed | 7 |
| rng_draws | 123 |

#### Islands

| Island | Version | Programs | Best score | Best id | Temperature* |
|---|---|---|---|---|---|
| 0 | 1 | 4 | 16 | 12 | 0.0999867 |
| 1 | 0 | 15000 | — | — | 0.05 |
| 2 | 0 | 1 | -0.25 | 1 | 0.0999967 |

#### Clusters

| Island | Signature | Score | Members (id (chars, output hash), shortest first) |
|---|---|---|---|
| 0 | (10, 16) | 16 | 12 (340, 9f2c), 31 (512) |
| 0 | (0.5) | 0.5 | 1 (300, a1) |
| 2 | (-0.25) | -0.25 | 1 (300) |
"""


def test_the_block_reads_as_the_spec_lays_it_out() -> None:
    assert render_state_block(STATE, CONFIG) == TEXT
    assert parse_state_block(TEXT, "fs.md", 0) == STATE


def test_an_empty_block_is_the_initial_state() -> None:
    assert parse_state_block("", "fs.md", 0) == FunSearchState()
    assert parse_state_block(render_state_block(FunSearchState(), CONFIG)) == FunSearchState()


def test_derived_temperatures_are_ignored_and_recomputed() -> None:
    edited = TEXT.replace("| 0 | 1 | 4 | 16 | 12 | 0.0999867 |", "| 0 | 1 | 4 | 16 | 12 | 99 |")
    assert parse_state_block(edited) == STATE
    assert render_state_block(parse_state_block(edited), CONFIG) == TEXT


def test_hand_edits_are_read_back() -> None:
    edited = (
        TEXT.replace("| 0 | 1 | 4 | 16 | 12 |", "| 0 | 3 | 4 | 16 | 12 |")
        .replace("12 (340, 9f2c), 31 (512)", "#31 (512), 12 (340, 9f2c)")
        .replace("| registrations_since_reset | 3 |", "| Registrations since reset | 1199 |")
        .replace("| 2 | (-0.25) | -0.25 | 1 (300) |\n", "")
    )
    state = parse_state_block(edited)
    assert state.islands[0].version == 3 and state.registrations_since_reset == 1199
    assert [m.id for m in state.islands[0].clusters[0].members] == [12, 31]
    assert state.islands[2].clusters == ()


def test_the_block_lives_in_the_population_section() -> None:
    population = with_strategy_state(empty_population("FunSearch"), render_state_block(STATE, CONFIG))
    parsed = parse_population(render_population(population), "fs.md", 40)
    assert parse_state_block(parsed.strategy_state, "fs.md", 42) == STATE


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("| stored | 40 |", "| kept | 40 |", 9, "unknown field 'kept'; the fields are registrations_since_reset"),
        ("| stored | 40 |", "| stored | forty |", 9, "field `stored` 'forty' is not a whole number"),
        ("| rng_draws | 123 |", "| rng_draws | 123 |\n| stored | 1 |", 15,
         "field stored appears twice; keep one row"),
        ("| 1 | 0 | 15000 |", "| 0 | 0 | 15000 |", 21, "island 0 has two rows; keep one"),
        ("| 2 | 0 | 1 | -0.25 |", "| 2 | 0 | 1 | best |", 22, "best score 'best' is not a finite number"),
        ("| 0 | (0.5) | 0.5 |", "| 7 | (0.5) | 0.5 |", 29,
         "cluster of island 7, which has no row in the Islands table"),
        ("| 0 | (0.5) | 0.5 |", "| 0 | 0.5 | 0.5 |", 29, "signature '0.5' must read like `(10, 16)`"),
        ("| 0 | (0.5) | 0.5 |", "| 0 | () | 0.5 |", 29, "signature '()' is empty"),
        ("| 0 | (0.5) | 0.5 |", "| 0 | (10, 16) | 0.5 |", 29, "island 0 has two clusters (10, 16); merge them"),
        ("| 0 | (0.5) | 0.5 |", "| 0 | (0.5) | nan |", 29, "score 'nan' is not a finite number"),
        ("1 (300, a1)", "1 300", 29, "members '1 300' must read like `12 (340, 9f2c), 31 (512)`"),
        ("1 (300, a1)", "1 (300, a1),", 29, "members '1 (300, a1),' must read like"),
        ("| Island | Signature | Score |", "| Island | Signature | Points |", 26, "the table has no `Score` column"),
    ],
)
def test_bad_values_name_the_line(old: str, new: str, line: int, message: str) -> None:
    assert old in TEXT
    with pytest.raises(StateError) as caught:
        parse_state_block(TEXT.replace(old, new, 1), "fs.md", 100)
    assert str(caught.value).startswith(f"fs.md:{100 + line}: {message}")


def test_a_foreign_table_is_refused() -> None:
    with pytest.raises(StateError, match=r"fs.md:3: a table with columns Island \| G is not part of FunSearch's state"):
        parse_state_block("### ⚙️ Strategy State\n\n| Island | G |\n|---|---|\n| 0 | 1 |\n", "fs.md", 0)


def test_hash_tokens_are_short_and_table_safe() -> None:
    assert hash_token("9f2cA0") == "9f2cA0"
    assert hash_token(1234) == "1234"
    long = hash_token("sha256:" + "ab" * 32)
    assert long is not None and len(long) == 16 and long == hash_token("sha256:" + "ab" * 32)
    assert hash_token("a|b") != hash_token("a_b") and len(hash_token("a|b") or "") == 16
    assert [hash_token(v) for v in (None, True, "", " ", 1.5, [1])] == [None] * 6


# ---------------------------------------------------------------- round trips


numbers = st.floats(allow_nan=False, allow_infinity=False, width=64)
members = st.builds(
    Member,
    st.integers(1, 10**9),
    st.integers(0, 10**6),
    st.none() | st.text("0123456789abcdefABCDEF", min_size=1, max_size=16),
)


@st.composite
def islands(draw: st.DrawFn) -> tuple[Island, ...]:
    """Draws islands with unique indices, each with clusters of unique signatures."""
    indices = draw(st.lists(st.integers(0, 50), unique=True, max_size=5))
    found = []
    for index in sorted(indices):
        signatures = draw(st.lists(st.lists(numbers, min_size=1, max_size=4).map(tuple), unique=True, max_size=4))
        clusters = tuple(
            Cluster(s, draw(numbers), sorted_members(draw(st.lists(members, max_size=4))))
            for s in signatures
        )
        best = draw(st.none() | numbers)
        found.append(Island(
            index,
            draw(st.integers(0, 10**6)),
            draw(st.integers(0, 10**9)),
            best,
            draw(st.none() | st.integers(1, 10**9)),
            clusters,
        ))
    return tuple(found)


states = st.builds(
    FunSearchState,
    islands=islands(),
    registrations_since_reset=st.integers(0, 10**9),
    last_reset_at=st.none() | st.integers(0, 10**9),
    stored=st.integers(0, 10**9),
    duplicates=st.integers(0, 10**9),
    execution_failed=st.integers(0, 10**9),
    version_mismatch=st.integers(0, 10**9),
    rng_seed=st.none() | st.integers(0, 10**12),
    rng_draws=st.integers(0, 10**12),
)
configs = st.builds(
    FunSearchConfig,
    st.just("f"),
    cluster_sampling_temperature_init=st.floats(1e-6, 10),
    cluster_sampling_temperature_period=st.integers(1, 10**6),
)


@settings(max_examples=150, deadline=None)
@given(states, configs)
def test_render_then_parse_gives_the_state_back(state: FunSearchState, config: FunSearchConfig) -> None:
    text = render_state_block(state, config)
    assert parse_state_block(text, "fs.md", 0) == state
    assert render_state_block(parse_state_block(text), config) == text


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(TEXT) - 1), st.integers(0, 40), st.text(max_size=12))
def test_damaged_blocks_raise_only_state_errors(start: int, length: int, insert: str) -> None:
    damaged = TEXT[:start] + insert + TEXT[start + length :]
    try:
        state = parse_state_block(damaged, "fs.md", 0)
    except StateError as error:
        assert error.line is not None and error.line >= 1
        return
    assert isinstance(state, FunSearchState)
    assert parse_state_block(render_state_block(state, CONFIG)) == state
