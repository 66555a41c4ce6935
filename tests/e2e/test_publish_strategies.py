"""End to end: a strategy program split in two jobs (`run --outcome-dir`, then `publish`) keeps the same Population.

Each strategy runs function_minimization with the offline `tune` proposer, once as plain `autoloop run`
and once split, against two copies of one origin; the decisions travel in the outcome as JSON.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from autoloop_py.state.population import population_of
from tests.e2e.test_adaevolve_run import POINTER as ADA_POINTER
from tests.e2e.test_evox_run import POINTER as EVOX_POINTER
from tests.e2e.test_funsearch_run import funsearch_repo  # noqa: F401
from tests.e2e.test_publish import _clone
from tests.programs import install_strategy_program

pytest.importorskip("numpy")

NAME = "function_minimization"
PROGRAM = f".autoloop/programs/{NAME}"
ITERATIONS = 4
ALPHA_POINTER = """## Evolution Strategy

This program uses the **AlphaEvolve** strategy. On every iteration, read `strategy/alphaevolve.md` and follow it literally.

Support files:
- `strategy/prompts/mutation.md`
- `strategy/prompts/crossover.md`
"""
STRATEGIES = {
    "alphaevolve": (ALPHA_POINTER, "population_size: 6\n"),
    "adaevolve": (ADA_POINTER, "population_size: 6\nmax_islands: 2\n"),
    "evox": (EVOX_POINTER, ""),
}


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _number_the_caps(playbook: Path) -> None:
    """Writes numbers into the AlphaEvolve playbook's cap bullets (the generic answers hold none)."""
    lines = playbook.read_text(encoding="utf-8").splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("- **Population cap**:"):
            lines[i] = "- **Population cap**: 6. Evict the worst member of the most crowded cell.\n"
        elif line.startswith("- **Elite archive**:"):
            lines[i] = "- **Elite archive**: the top 2 by fitness are always preserved.\n"
    playbook.write_text("".join(lines), encoding="utf-8")


def _state(origin: Path) -> statefile.StateFile:
    return statefile.parse_state(_git(origin, "show", f"memory/autoloop:{NAME}.md") + "\n", f"{NAME}.md")


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_split_strategy_run_keeps_the_same_population(
    strategy: str, git_repo: Path, run_git, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    pointer, config = STRATEGIES[strategy]
    install_strategy_program(git_repo, run_git, PROGRAM, strategy, pointer, config)
    if strategy == "alphaevolve":
        _number_the_caps(git_repo / PROGRAM / "strategy/alphaevolve.md")
        run_git(git_repo, "commit", "-qam", "caps")
    _compare_split_with_plain(git_repo, tmp_path)


def test_a_split_funsearch_run_keeps_the_same_population(funsearch_repo: Path, tmp_path: Path) -> None:
    _compare_split_with_plain(funsearch_repo, tmp_path)  # its first iteration records the seed without a proposal


def _compare_split_with_plain(git_repo: Path, tmp_path: Path) -> None:
    """Runs ITERATIONS plain and split against two copies of the repository and compares what they recorded."""
    plain, split = tmp_path / "plain.git", tmp_path / "split.git"
    for origin in (plain, split):
        _git(tmp_path, "clone", "-q", "--bare", str(git_repo), str(origin))
    run = ["--program", NAME, "--proposer", "tune"]
    assert main(["run", "--repo", str(_clone(plain, tmp_path / "plain")), *run, "--iterations", str(ITERATIONS)]) == 0
    for n in range(ITERATIONS):
        outcome = tmp_path / f"outcome{n}"
        assert main(["run", "--repo", str(_clone(split, tmp_path / f"p{n}")), *run, "--outcome-dir", str(outcome)]) == 0
        assert main(["publish", "--repo", str(_clone(split, tmp_path / f"q{n}")), str(outcome)]) == 0

    a, b = _state(plain), _state(split)
    assert b.machine.recent_statuses == a.machine.recent_statuses
    assert b.machine.best_metric == a.machine.best_metric
    assert [(e.status, e.iteration) for e in b.history] == [(e.status, e.iteration) for e in a.history]
    pa, pb = population_of(a), population_of(b)
    assert [(c.id, c.island, c.fitness, c.parents, c.operator, c.status) for c in pb.candidates] == [
        (c.id, c.island, c.fitness, c.parents, c.operator, c.status) for c in pa.candidates
    ]
    assert a.machine.iteration_count == ITERATIONS
    branch = f"autoloop/{NAME}:{PROGRAM}/code/search.py"
    assert _git(split, "show", branch) == _git(plain, "show", branch)
