"""Tests for autoloop_py.state.source_pruning: the saved candidate sources a bounded memory folder may drop."""

from __future__ import annotations

from pathlib import Path

from autoloop_py.state import file as statefile
from autoloop_py.state.memory_folder import FolderMemory
from autoloop_py.state.population import Candidate, add_candidate, empty_population, fold_code, render_population
from autoloop_py.state.population_fold import fold_entries
from autoloop_py.state.source_pruning import needed_ids, prunable_sources, prune_plan


def _state(*entries: Candidate) -> str:
    population = empty_population()
    for entry in sorted(entries, key=lambda c: c.id):
        population = add_candidate(population, entry)
    population = fold_code(population, lambda c: c.id == max(e.id for e in entries),
                           lambda c: f"candidates/p/{c.id}.py")
    state = statefile.new_state("p", "goal", "score", "higher", None)
    return statefile.render_state(statefile.with_section(state, statefile.POPULATION, render_population(population)))


def _entry(cid: int, *parents: int) -> Candidate:
    return Candidate(cid, island=0, fitness=float(cid), gen=cid, operator="exploitation", parents=parents,
                     code=f"x = {cid}\n")


def test_only_sources_no_entry_is_or_names_as_parent_go_oldest_first() -> None:
    files = {"p.md": _state(_entry(6, 2), _entry(8, 6)), "candidates/p/bases.json": "{}"}
    paths = [*files, *(f"candidates/p/{i}.py" for i in range(1, 9))]
    assert needed_ids("p", files.get) == {2, 6, 8}
    assert prunable_sources(paths, 3, files.get) == ["candidates/p/1.py", "candidates/p/3.py", "candidates/p/4.py"]
    assert prunable_sources(paths, 99, files.get) == [f"candidates/p/{i}.py" for i in (1, 3, 4, 5, 7)]
    assert prunable_sources(paths, 0, files.get) == []


def test_entries_folded_out_of_the_state_file_keep_their_sources() -> None:
    population = empty_population()
    for entry in (_entry(1), _entry(2, 1), _entry(3), _entry(4, 3)):
        population = add_candidate(population, entry)
    smaller, archive = fold_entries(population, [1, 2], "candidates/p/population.md")
    state = statefile.with_section(statefile.new_state("p", "goal", "score", "higher", None), statefile.POPULATION,
                                   render_population(smaller))
    files = {"p.md": statefile.render_state(state), "candidates/p/population.md": archive}
    paths = [*files, *(f"candidates/p/{i}.py" for i in range(1, 6))]
    assert prunable_sources(paths, 5, files.get) == ["candidates/p/5.py"]


def test_a_program_whose_state_file_is_missing_or_unreadable_keeps_every_source() -> None:
    paths = ["candidates/gone/1.py", "candidates/broken/1.py", "broken.md"]
    files = {"broken.md": "# Broken\n\n## 🧬 Population\n\n### Candidate 1 · island x · fitness ? · gen -\n"}
    assert prunable_sources(paths, 5, files.get) == []


def test_the_folder_drops_the_oldest_row_and_the_oldest_unneeded_source(tmp_path: Path) -> None:
    memory = FolderMemory(tmp_path)
    sources = {f"candidates/p/{i}.py": f"x = {i}\n" for i in range(1, 7)}
    memory.commit({"p.md": _state(_entry(5, 1), _entry(6, 5)), **sources,
                   "traces/p/rows/000001-1.json": "{}\n"}, "start")
    memory._prune(6)
    left = memory.list()
    assert "traces/p/rows/000001-1.json" not in left and len(left) == 6
    assert [p for p in left if p.endswith(".py")] == [f"candidates/p/{i}.py" for i in (1, 3, 4, 5, 6)]  # 2 went: the oldest not needed


def _row(iteration: int) -> str:
    return f"traces/p/rows/{iteration:06d}-{iteration}.json"


def test_rows_and_unneeded_sources_go_together_oldest_first() -> None:
    files = {"p.md": _state(_entry(9, 2))}  # the Population needs 9 and its parent 2
    paths = ["p.md", *(f"candidates/p/{i}.py" for i in range(1, 10)), *(_row(i) for i in range(1, 10)),
             *(f"traces/p/children/{i - 1}/{i:06d}-{i}.json" for i in range(2, 10))]
    doomed = prune_plan(paths, len(paths) - 7, files.get)
    # By age: row 1, source 1, row 2 and its children entry, (source 2 is needed) row 3 and its entry, source 3.
    assert doomed[:2] == [_row(1), "candidates/p/1.py"] and doomed[-1] == "candidates/p/3.py"
    assert set(doomed) == {_row(1), "candidates/p/1.py", "traces/p/children/1/000002-2.json", _row(2),
                           "traces/p/children/2/000003-3.json", _row(3), "candidates/p/3.py"}
    assert prune_plan(paths, len(paths), files.get) == []
    everything = prune_plan(paths, 0, files.get)  # cannot reach 0: what may go, and no more
    assert "p.md" not in everything and {"candidates/p/2.py", "candidates/p/9.py"}.isdisjoint(everything)
    assert len(everything) == len(paths) - 3
