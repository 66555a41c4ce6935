"""End to end: 12 offline iterations of the AlphaEvolve proof of concept through the real CLI.

Checks the Population after every iteration: ids, the cap, every cell's best and the elite archive
kept, history entries carrying the strategy's fields, and the prompt of each iteration kept on the
memory branch.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of

pytest.importorskip("numpy")
pytest.importorskip("pandas")

REPO = Path(__file__).parents[2]
PROGRAM = ".autoloop/programs/groupby_evolve"
ITERATIONS = 12
CAP, ARCHIVE = 7, 3


@pytest.fixture
def poc_repo(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    shutil.copytree(REPO / PROGRAM, git_repo / PROGRAM, ignore=shutil.ignore_patterns("__pycache__"))
    # A smaller cap than the program's own, so that 12 iterations evict.
    (git_repo / PROGRAM / "code/config.yaml").write_text(f"population_size: {CAP}\narchive_size: {ARCHIVE}\n")
    # Smaller datasets: this test checks AlphaEvolve's bookkeeping, not the timings (12 evaluations of the full size
    # take minutes of CPU).
    evaluator = git_repo / PROGRAM / "code/evaluate.py"
    text = evaluator.read_text(encoding="utf-8")
    assert "ROWS = 250_000" in text
    evaluator.write_text(text.replace("ROWS = 250_000", "ROWS = 5_000"), encoding="utf-8")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "proof of concept")
    return git_repo


def _oriented(candidate: pop.Candidate) -> float:
    return -math.inf if candidate.fitness is None else candidate.fitness


def test_a_run_past_the_cap_keeps_every_cell_best_and_elite(poc_repo: Path) -> None:
    memory = MemoryStore(poc_repo)
    seen: dict[int, pop.Candidate] = {}
    for iteration in range(1, ITERATIONS + 1):
        assert main(["run", "--repo", str(poc_repo), "--program", "groupby_evolve", "--iterations", "1"]) == 0
        state = statefile.parse_state(memory.read("groupby_evolve.md") or "", "groupby_evolve.md")
        population = population_of(state, memory.read)
        ids = [c.id for c in population.candidates]
        assert len(ids) == len(set(ids))
        assert len(ids) <= CAP, f"cap exceeded after iteration {iteration}"
        for candidate in population.candidates:
            seen.setdefault(candidate.id, candidate)
        present = set(ids)
        # Every cell's best so far and the elite archive so far are still in the population.
        cells: dict[tuple[str, str], pop.Candidate] = {}
        for candidate in seen.values():
            if candidate.fitness is None or candidate.cell is None:
                continue
            key = pop.cell_of(candidate)
            assert key is not None
            if key not in cells or (_oriented(candidate), candidate.id) > (_oriented(cells[key]), cells[key].id):
                cells[key] = candidate
        assert {c.id for c in cells.values()} <= present
        elites = pop.elites(list(seen.values()), ARCHIVE, "higher")
        assert {c.id for c in elites} <= present

    machine = state.machine
    assert machine.iteration_count == ITERATIONS
    # Ids are 1..N in order of creation: each one present or legitimately evicted, never reused.
    assert set(seen) <= set(range(1, ITERATIONS + 1))
    # One candidate per iteration: the next id follows the last one made, even when the newest were evicted at once.
    assert population.next_id == ITERATIONS + 1
    assert len(seen) >= CAP
    # The cap evicted some: more were made than are kept (a newcomer evicted at once is never seen above).
    assert population.next_id - 1 > len(population.candidates)
    # The history entries still detailed carry the strategy's fields.
    detailed = [e for e in state.history if e.is_detailed]
    assert detailed
    for entry in detailed:
        for label in ("**Operator**", "**Parent(s)**", "**Island**", "**Fitness**"):
            assert label in entry.text, (entry.iteration, label)
    # Every iteration's prompt is kept, and it is the playbook-driven one.
    prompts = memory.list("traces/groupby_evolve/prompts/")
    # Iteration 1 records the evaluated Target as the first member, with no prompt; the next ones start from it.
    assert len(prompts) == ITERATIONS - 1
    assert memory.read("traces/groupby_evolve/prompts/1.md") is None
    assert "AlphaEvolve strategy" in (memory.read("traces/groupby_evolve/prompts/2.md") or "")
    # Folded code is never lost: every recorded candidate's source is on the memory branch.
    for candidate in population.candidates:
        source = memory.read(f"candidates/groupby_evolve/{candidate.id}.py")
        assert source is not None and source.strip()
        if candidate.code is not None:
            assert source == candidate.code
    accepted = subprocess.run(
        ["git", "log", "--format=%s", "main..autoloop/groupby_evolve"], cwd=poc_repo, capture_output=True, text=True
    ).stdout.splitlines()
    in_history = sum(e.counts[0] for e in state.history if e.is_range)
    in_history += sum(1 for e in detailed if e.status == "accepted")
    assert len(accepted) == in_history
