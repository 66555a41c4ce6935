"""Tests for autoloop_py.state.population: ranking, eviction, and adding or folding candidates."""

from __future__ import annotations

import logging
import math
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.state.population import (
    CANDIDATE_STATUSES,
    NO_CELL,
    OPERATORS,
    Candidate,
    Population,
    add_candidate,
    cell_bests,
    cell_of,
    complexity_bucket,
    elites,
    empty_population,
    evict,
    evolved_lines,
    fold_code,
    normalized,
    oriented,
    parse_population,
    render_population,
    with_strategy_name,
)


def cand(cid: int, fitness: float | None, cell: tuple[str, str] | None = ("A", "s"), **kw: object) -> Candidate:
    """Returns a minimal candidate for ranking tests."""
    return Candidate(cid, 0, fitness, cid, "exploitation", cell=cell, status="accepted", **kw)  # type: ignore[arg-type]


def population_of(*candidates: Candidate) -> Population:
    """Returns an empty population with the candidates added in id order."""
    population = empty_population()
    for candidate in sorted(candidates, key=lambda c: c.id):
        population = add_candidate(population, candidate)
    return population


def ids(candidates: object) -> list[int]:
    return [c.id for c in candidates]  # type: ignore[attr-defined]


# ---------------------------------------------------------------- changes


def test_add_candidate_rejects_used_and_lower_ids() -> None:
    population = population_of(cand(1, 0.1), cand(3, 0.3))
    with pytest.raises(ValueError, match="already in the population"):
        add_candidate(population, cand(3, 0.5))
    with pytest.raises(ValueError, match="below next_id 4"):
        add_candidate(population, cand(2, 0.5))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"status": "maybe"}, "status 'maybe'"),
        ({"fitness": math.nan}, "fitness 'nan'"),
        ({"cell": ("a · b", "c")}, "feature cell"),
        ({"extra": (("Notes", "again"),)}, "a second **Notes**"),
        ({"extra": (("Lines", "5"),)}, "different extra"),
    ],
)
def test_add_candidate_refuses_what_would_not_read_back(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        add_candidate(empty_population(), replace(cand(1, 0.5), **change))  # type: ignore[arg-type]


def test_add_candidate_stores_the_candidate_as_it_reads_back() -> None:
    candidate = cand(1, 0.5, approach="two\nlines", notes="  padded  ", code="x = 1")
    population = add_candidate(empty_population(), candidate)
    stored = population.candidates[0]
    assert (stored.approach, stored.notes, stored.code) == ("two lines", "padded", "x = 1\n")
    assert replace(parse_population(render_population(population)).candidates[0], raw=None) == stored


def test_fold_code_replaces_code_by_a_reference_and_reads_back() -> None:
    population = parse_population(render_population(population_of(cand(1, 0.1, code="a\n"), cand(2, 0.2, code="b\n"))))
    folded = fold_code(population, keep=lambda c: c.id == 2, ref_for=lambda c: f"tsb/candidates/{c.id}.py")
    text = render_population(folded)
    assert (
        "<details><summary>Code</summary>\n\nFull source: `memory/autoloop:tsb/candidates/1.py`\n\n</details>\n" in text
    )
    one = parse_population(text).candidates[1]
    assert (one.code, one.code_ref) == (None, "tsb/candidates/1.py")
    assert (population.candidates[0].raw or "<none>") in text  # the kept entry is byte-identical
    assert text.endswith("---\n\n")  # the re-rendered last entry keeps its spacing


def test_fold_code_refuses_a_reference_that_would_not_read_back() -> None:
    with pytest.raises(ValueError, match="cannot be written"):
        fold_code(population_of(cand(1, 0.1, code="a\n")), keep=lambda c: False, ref_for=lambda c: "a`b")


# ---------------------------------------------------------------- ranking


@pytest.mark.parametrize(
    "fitness, direction, expected",
    [(0.5, "higher", 0.5), (0.5, "lower", -0.5), (3, "lower", -3.0), (None, "higher", None),
     (math.nan, "higher", None), (math.inf, "lower", None), (True, "higher", None)],
)
def test_oriented(fitness: float | None, direction: str, expected: float | None) -> None:
    assert oriented(fitness, direction) == expected


def test_oriented_refuses_an_unknown_direction() -> None:
    with pytest.raises(ValueError, match="'higher' or 'lower'"):
        oriented(1.0, "up")


@pytest.mark.parametrize("lines, bucket", [(0, "small"), (39, "small"), (40, "medium"), (100, "medium"), (101, "large")])
def test_complexity_buckets_t5(lines: int, bucket: str) -> None:
    assert complexity_bucket(lines) == bucket


def test_complexity_bucket_custom_thresholds() -> None:
    assert [complexity_bucket(n, (10, 20)) for n in (9, 10, 20, 21)] == ["small", "medium", "medium", "large"]


def test_evolved_lines_counts_the_evolve_block_when_marked() -> None:
    assert evolved_lines("a\nb\nc\n") == 3
    assert evolved_lines("x\n# EVOLVE-BLOCK-START\na\nb\n# EVOLVE-BLOCK-END\ny\n") == 2


def test_elites_break_ties_toward_the_newer_and_skip_missing_fitness() -> None:
    members = [cand(3, 0.8), cand(7, 0.8), cand(5, 0.6), cand(9, None)]
    assert ids(elites(members, 2, "higher")) == [7, 3]
    assert ids(elites(members, 10, "higher")) == [7, 3, 5]
    assert ids(elites([cand(1, 12.0), cand(2, 9.5)], 1, "lower")) == [2]


def test_cell_bests_per_cell_ties_newer_and_cell_less_members_share_a_cell() -> None:
    members = [cand(1, 0.5), cand(2, 0.5), cand(3, 0.9, ("B", "m")), cand(4, 0.1, None), cand(5, None, ("C", "l"))]
    bests = cell_bests(members, "higher")
    assert {key: c.id for key, c in bests.items()} == {("a", "s"): 2, ("b", "m"): 3, NO_CELL: 4}


def test_cell_of_ignores_case_and_spacing() -> None:
    assert cell_of(cand(1, 0.1, (" Hash  dict", "Small"))) == ("hash dict", "small")
    assert cell_of(cand(1, 0.1, None)) is None


def t4(first_fitness: float | None = 0.50) -> Population:
    """Returns the T4 population of strategies.md §1.6 with candidate 6 added."""
    return population_of(
        cand(1, first_fitness, ("A", "s")), cand(2, 0.70, ("A", "s")), cand(3, 0.60, ("A", "s")),
        cand(4, 0.90, ("B", "m")), cand(5, 0.40, ("B", "s")), cand(6, 0.55, ("A", "s")),
    )


@pytest.mark.parametrize("first_fitness", [0.50, None])
def test_eviction_vector_t4(first_fitness: float | None) -> None:
    trimmed, evicted = evict(t4(first_fitness), cap=5, archive_size=2, direction="higher")
    assert ids(evicted) == [1]
    assert ids(trimmed.candidates) == [6, 5, 4, 3, 2]


def test_eviction_spares_a_protected_elite() -> None:
    members = population_of(cand(1, 0.9), cand(2, 0.8), cand(3, 0.7), cand(4, 0.1, ("B", "s")), cand(5, 0.05, ("B", "s")))
    _, evicted = evict(members, cap=4, archive_size=1, direction="higher")
    assert ids(evicted) == [3]  # the worst of the crowded cell A/s
    _, evicted = evict(members, cap=4, archive_size=3, direction="higher")
    assert ids(evicted) == [5]  # 2 and 3 are elites now, so A/s has no victim and B/s gives one


def test_eviction_spares_every_cell_best() -> None:
    members = population_of(cand(1, 0.9), cand(2, 0.1), cand(3, 0.5, ("B", "s")), cand(4, 0.6, ("B", "s")),
                            cand(5, 0.05, ("C", "s")))
    trimmed, evicted = evict(members, cap=1, archive_size=0, direction="higher")
    # A/s and B/s tie on count; A/s holds the lower worst, so 2 goes first; 5 is C/s's best and stays.
    assert ids(evicted) == [2, 3]
    assert ids(trimmed.candidates) == [5, 4, 1]


def test_eviction_with_lower_is_better() -> None:
    members = population_of(cand(1, 12.0), cand(2, 9.5), cand(3, 11.0), cand(4, 30.0, ("B", "s")))
    _, evicted = evict(members, cap=3, archive_size=1, direction="lower")
    assert ids(evicted) == [1]


def test_eviction_ties_go_to_the_lower_id() -> None:
    members = population_of(cand(1, 0.9), cand(2, 0.3), cand(3, 0.3), cand(4, None), cand(5, None))
    _, evicted = evict(members, cap=2, archive_size=0, direction="higher")
    assert ids(evicted) == [4, 5, 2]


def test_eviction_stops_when_every_member_is_protected(caplog: pytest.LogCaptureFixture) -> None:
    members = population_of(cand(1, 0.1, ("A", "s")), cand(2, 0.2, ("B", "s")), cand(3, 0.3, ("C", "s")))
    with caplog.at_level(logging.WARNING):
        trimmed, evicted = evict(members, cap=1, archive_size=0, direction="higher")
    assert evicted == () and trimmed == members
    assert "over its cap of 1" in caplog.text


def test_eviction_groups_cell_less_members_together() -> None:
    members = population_of(cand(1, 0.5, None), cand(2, 0.4, None), cand(3, 0.1, ("A", "s")))
    _, evicted = evict(members, cap=2, archive_size=0, direction="higher")
    assert ids(evicted) == [2]


# ---------------------------------------------------------------- properties

_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=20).map(
    lambda s: " ".join(s.split())
)
_CELL_PART = _TEXT.filter(lambda s: s != "" and "·" not in s)
_CODE_LINES = st.sampled_from(
    ["def f(x):", "    return x", "", "# comment", "### heading", "## section", "```", "~~~", "</details>",
     "<details>", "---", "- **Status**: ✅ accepted", "Full source: `memory/autoloop:x`", "````python"]
)
_CODE = st.lists(_CODE_LINES | _TEXT, max_size=6).map(lambda rows: "".join(row + "\n" for row in rows))


@st.composite
def candidates(draw: st.DrawFn) -> Candidate:
    """Draws a candidate without an id (set later), any field a strategy or a person could write."""
    code = draw(st.none() | _CODE)
    return Candidate(
        id=0,
        island=draw(st.none() | st.integers(0, 12)),
        fitness=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False) | st.integers(-5, 5)),
        gen=draw(st.integers(0, 500)),
        operator=draw(st.sampled_from(OPERATORS) | _TEXT),
        parents=tuple(draw(st.lists(st.integers(0, 99), max_size=3))),
        cell=draw(st.none() | st.tuples(_CELL_PART, _CELL_PART)),
        approach=draw(_TEXT),
        status=draw(st.sampled_from(CANDIDATE_STATUSES)),
        notes=draw(_TEXT),
        code=code,
        code_ref=None if code is not None else draw(st.none() | st.from_regex(r"[\w./-]{1,20}", fullmatch=True)),
        language=draw(st.from_regex(r"[a-z0-9+-]{0,8}", fullmatch=True)) if code is not None else "python",
        extra=tuple(draw(st.lists(st.tuples(st.from_regex(r"X[a-z ]{0,8}[a-z]", fullmatch=True), _TEXT), max_size=2))),
    )


@settings(max_examples=100, deadline=None)
@given(candidates())
def test_normalized_is_idempotent(candidate: Candidate) -> None:
    once = normalized(replace(candidate, id=1))
    assert normalized(once) == once


def test_with_strategy_name_renames_only_the_generated_line() -> None:
    fresh = empty_population()
    assert "Managed by the AlphaEvolve strategy." in fresh.intro
    renamed = with_strategy_name(fresh, "EvoX")
    assert renamed.intro == fresh.intro.replace("AlphaEvolve", "EvoX")
    assert with_strategy_name(renamed, "EvoX") is renamed
    written = "\n>  🤖 *Managed by the AlphaEvolve strategy. Newest first.*\n\nThe AlphaEvolve paper inspired us.\n"
    by_hand = replace(fresh, intro=written)
    assert with_strategy_name(by_hand, "FunSearch").intro == written.replace(
        "the AlphaEvolve strategy", "the FunSearch strategy")
    own = replace(fresh, intro="\nOur own words, no generated line.\n")
    assert with_strategy_name(own, "EvoX") is own
