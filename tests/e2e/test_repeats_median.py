"""End to end: with `repeats: 3` and a noisy evaluator, the median the runner compared is the one number
shown everywhere: state file, Population, trace rows, the novelty filter's reuse, analyze and prompts.
"""

from __future__ import annotations

import json
import random
import re
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from autoloop_py.commands.analyze import analyze_target
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.proposers.base import Proposal, ProposalRequest, Proposer
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from tests.programs import install_tiny_strategy_program, program_md

NAME = "noisy"
FOLDER = f".autoloop/programs/{NAME}"
VALUE = f"{FOLDER}/code/value.py"
SEED = "# EVOLVE-BLOCK-START\nx = 1.0\n# EVOLVE-BLOCK-END\n"
# Each run adds fresh noise, so the three runs differ and the last one is rarely the median.
EVALUATE = """\
import json, random
ns = {}
exec(open("code/value.py").read(), ns)
print(json.dumps({"score": ns["x"] + random.SystemRandom().uniform(-3, 3), "size": 7}))
"""
START = datetime(2026, 3, 4, 5, 6, tzinfo=timezone.utc)


class _Climb:
    """Adds 10 to x of the file it is shown (the parent's code), or puts the seed back."""

    name = "tune"

    def __init__(self, seed_back: bool = False) -> None:
        self.seed_back = seed_back

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        if self.seed_back:
            return Proposal({VALUE: SEED}, "put the seed back")
        x = float(re.search(r"x = ([-0-9.]+)", request.files[VALUE]).group(1))  # type: ignore[union-attr]
        return Proposal({VALUE: SEED.replace("x = 1.0", f"x = {x + 10}")}, f"x to {x + 10}")


def _factory(seed_back: bool) -> Any:
    def make(name: str, **kwargs: object) -> Proposer:
        return _Climb(seed_back)

    return make


@pytest.fixture
def noisy_repo(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    files = {
        "program.md": program_md("Noisy", "Make x large.", frontmatter={"repeats": 3, "evaluation-timeout": 20}),
        "code/value.py": SEED,
        "code/evaluate.py": EVALUATE,
    }
    install_tiny_strategy_program(git_repo, run_git, FOLDER, "alphaevolve", files, "population_size: 10\n")
    return git_repo


def _rows(memory: MemoryStore) -> list[dict[str, Any]]:
    return [json.loads(memory.read(path) or "{}") for path in memory.list(f"traces/{NAME}/rows/")]


def test_the_median_is_the_one_number_everywhere(noisy_repo: Path) -> None:
    program = load_program(noisy_repo, Path(FOLDER) / "program.md")
    steps = [False, False, False, False, True]
    for i, seed_back in enumerate(steps):
        run_iteration(noisy_repo, program, RunOptions(proposer_factory=_factory(seed_back)), START + timedelta(minutes=i))
    memory = MemoryStore(noisy_repo)
    state = statefile.parse_state(memory.read(f"{NAME}.md") or "", f"{NAME}.md")
    rows = {row["id"]: row for row in _rows(memory)}
    evaluated = [row for row in rows.values() if "runs" in row]
    assert len(evaluated) >= 4  # the seed and the candidates evaluated three times each
    for row in evaluated:
        assert len(row["runs"]) == 3 and len(set(row["runs"])) == 3
        assert row["metrics"]["score"] == statistics.median(row["runs"])
        assert row["metrics"]["size"] == 7
    # The baseline the state file records is the seed row's median.
    assert state.machine.initial_metric == rows["seed"]["metrics"]["score"]
    # Every Population entry's fitness is its trace row's metric, and the history entry shows the same number.
    population = population_of(state)
    for candidate in population.candidates:
        row = rows[str(candidate.id)]
        if "runs" in row:
            assert candidate.fitness == row["metrics"]["score"], candidate.id
    by_iteration = {e.iteration: e for e in state.history if e.is_detailed}
    for row in evaluated:
        entry = by_iteration.get(row["iteration_found"])
        if entry is not None:
            assert entry.metric == pytest.approx(row["metrics"]["score"], rel=1e-9)
    # The seed put back is not evaluated again: the reused number is the seed's median.
    reused = [row for row in rows.values() if row.get("metadata", {}).get("novelty", {}).get("evaluated") is False]
    assert reused and reused[0]["metrics"]["score"] == rows["seed"]["metrics"]["score"]
    assert "runs" not in reused[0]
    assert by_iteration[5].metric == pytest.approx(rows["seed"]["metrics"]["score"], rel=1e-9)
    # analyze's best is the state file's best.
    report = analyze_target(NAME, noisy_repo)
    assert _best_of(report) == pytest.approx(state.machine.best_metric, rel=1e-9)
    # A prompt shows a parent at its Population fitness (the median), never another run's value.
    for iteration in range(2, 5):
        prompt = memory.read(f"traces/{NAME}/prompts/{iteration}.md") or ""
        shown = {float(v) for v in re.findall(r"fitness[^0-9-]*(-?[0-9][0-9.e+-]*)", prompt, re.IGNORECASE)}
        runs = {v for row in evaluated for v in row["runs"] if v != row["metrics"]["score"]}
        assert not shown & runs


def _best_of(report: dict[str, Any]) -> float:
    """Returns the best score analyze reports (its lineage's best node)."""
    lineage = report["lineage"]
    assert lineage is not None
    return float(lineage["best_score"])
