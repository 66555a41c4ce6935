"""Tests for autoloop_py/commands/report.py (test_report.py is the e2e page test): the trace and the Population come
from one commit of the memory branch."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from autoloop_py.state import trace
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import Candidate, add_candidate, empty_population, render_population
from tests.programs import small_program


def _recorded(memory: MemoryStore, name: str, count: int) -> str:
    """Commits `name`'s trace rows and Population entries 1..count, as a run that made `count` candidates would."""
    population, files = empty_population("AdaEvolve"), {}
    for i in range(1, count + 1):
        population = add_candidate(population, Candidate(i, 0, float(i), i, "exploitation", status="accepted"))
        row = trace.TraceRow(id=str(i), iteration_found=i, parent_id=None if i == 1 else str(i - 1),
                             status="accepted", metrics={"score": float(i)})
        files.update(trace.row_files(name, row, f"x = {i}\n", {}))
    state = statefile.new_state(name, "Grow x.", "score", "higher", None)
    files[f"{name}.md"] = statefile.render_state(statefile.with_section(state, statefile.POPULATION,
                                                                        render_population(population)))
    return memory.commit(files, f"[Autoloop: {name}] {count}")


def _figures(page: Path) -> tuple[list[str], list[str]]:
    """Returns the report's (tree node ids, Population entry ids), sorted."""
    found = re.search(r'<script type="application/json" id="run-data">(.*?)</script>', page.read_text(), re.S)
    assert found, "the page carries its data"
    data = json.loads(found.group(1))
    return sorted(node["id"] for node in data["nodes"]), sorted(str(entry["id"]) for entry in data["population"])


def test_report_reads_the_trace_and_the_population_at_one_commit(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run records candidate 2 just after report read the first trace row: the whole page stays at the commit
    report started from (no Population entry 2 beside a trace without it)."""
    small_program(git_repo, "alpha")
    before = _recorded(MemoryStore(git_repo), "alpha", 1)
    read_at = MemoryStore._read_at
    landed: list[str] = []

    def racing(self: MemoryStore, commit: str | None, path: str) -> str | None:
        text = read_at(self, commit, path)
        if "/rows/" in path and not landed:  # a parallel run's record lands between two reads of report
            landed.append(_recorded(MemoryStore(git_repo), "alpha", 2))
        return text

    monkeypatch.setattr(MemoryStore, "_read_at", racing)
    out = tmp_path / "report.html"
    assert main(["report", "alpha", "--repo", str(git_repo), "--out", str(out)]) == 0
    assert landed and MemoryStore(git_repo).tip() == landed[-1] != before  # the branch did move mid-read
    assert _figures(out) == (["1"], ["1"])

    # Read again on the quiet branch, the report shows the candidate that landed.
    monkeypatch.setattr(MemoryStore, "_read_at", read_at)
    assert main(["report", "alpha", "--repo", str(git_repo), "--out", str(out)]) == 0
    assert _figures(out) == (["1", "2"], ["1", "2"])
