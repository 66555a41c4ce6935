"""Stale parents: the default branch's change merged into each entry's code, conflicting entries left out."""

from __future__ import annotations

from autoloop_py.loop.checkout.stale_parents import read_bases, rebase_population, with_base
from autoloop_py.state import population as pop

OLD = "x = 1\n\n\ndef f():\n    return 0\n"
NEW = "x = 1\n\n\ndef f():\n    return 1000\n"


def _entry(candidate_id: int, code: str | None, ref: str | None = None) -> pop.Candidate:
    return pop.Candidate(candidate_id, None, 1.0, candidate_id, "exploitation", code=code, code_ref=ref)


def test_entries_get_the_change_and_conflicting_ones_are_stale() -> None:
    population = pop.Population(
        candidates=(
            _entry(4, "x = 7\n\n\ndef f():\n    return 0\n"),  # clean: x changed, far from the fix
            _entry(3, "x = 1\n\n\ndef f():\n    return 5\n"),  # conflict: changed the line the fix changes
            _entry(2, None, "candidates/p/2.py"),  # folded: its code is read back
            _entry(1, NEW),  # recorded after the fix
        ),
        intro="",
    )
    blocks = {"old": OLD, "new": NEW}
    folded = {"candidates/p/2.py": "x = 2\n\n\ndef f():\n    return 0\n"}
    rebased = rebase_population(population, "new", {4: "old", 3: "old", 2: "old", 1: "new"}, blocks.get, folded.get)
    codes = {c.id: c.code for c in rebased.population.candidates}
    assert codes == {4: "x = 7\n\n\ndef f():\n    return 1000\n", 2: "x = 2\n\n\ndef f():\n    return 1000\n", 1: NEW}
    assert rebased.stale == (3,) and set(rebased.updated) == {4, 2}


def test_entries_without_a_recorded_commit_take_the_oldest_one() -> None:
    population = pop.Population(candidates=(_entry(9, "x = 9\n\n\ndef f():\n    return 0\n"), _entry(8, NEW)), intro="")
    rebased = rebase_population(population, "new", {1: "old"}, {"old": OLD, "new": NEW}.get, {}.get)
    # The copy from before gets the fix; one that already holds it merges cleanly (both sides made it).
    assert [c.code for c in rebased.population.candidates] == ["x = 9\n\n\ndef f():\n    return 1000\n", NEW]


def test_the_bases_file_round_trips() -> None:
    text = with_base(with_base(None, 2, "b"), 10, "c")
    assert read_bases(text) == {2: "b", 10: "c"}
    assert read_bases("not json") == {} and read_bases(None) == {}
