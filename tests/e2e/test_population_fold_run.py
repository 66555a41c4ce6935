"""End to end: a Population too large for the state file folds whole entries to the memory branch.

Each strategy runs function_minimization with the offline `tune` proposer twice against copies of one
origin: once with the default byte budget, once with a budget small enough that entries must fold.
The folded run records the same decisions (every entry, read back, equals the unfolded run's), its
state file stays within the budget, and a Lesson a person wrote before the folding is still there.
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from autoloop_py.state.population_fold import folded_path
from tests.state_helpers import folded_ids
from tests.e2e.test_funsearch_run import funsearch_repo  # noqa: F401
from tests.e2e.test_publish import _clone
from tests.e2e.test_publish_strategies import NAME, PROGRAM, STRATEGIES, _number_the_caps
from tests.programs import install_strategy_program

pytest.importorskip("numpy")

ITERATIONS = 10
# Small enough that entries must fold at a Population of 10; EvoX's Strategy State (label texts, the
# running strategy's code) alone takes about 6 KB, and FunSearch's about 2.3 KB, so theirs are larger.
BUDGETS = {"evox": 14000, "funsearch": 11000}
BUDGET = 9000
LESSON = "A person's lesson: keep the step size above 0.1."
CAPS = {
    "alphaevolve": "population_size: 10\n",
    "adaevolve": "population_size: 10\nmax_islands: 2\n",
    "evox": "population_size: 10\n",
}


def _run(origin: Path, where: Path, budget: int, lesson_after: int) -> MemoryStore:
    repo = _clone(origin, where)
    program = load_program(repo, Path(PROGRAM) / "program.md")
    memory = MemoryStore(repo)
    for n in range(ITERATIONS):
        run_iteration(repo, program, RunOptions(proposer="tune", budget=budget), datetime.now(timezone.utc))
        if n + 1 == lesson_after:
            memory.sync()
            memory.update(
                f"{NAME}.md",
                lambda text: statefile.render_state(statefile.add_lesson(statefile.parse_state(text or "", NAME), LESSON)),
                "a person adds a lesson",
            )
    memory.sync()
    return memory


def _compare(git_repo: Path, tmp_path: Path, budget: int = BUDGET) -> None:
    plain, folded = tmp_path / "plain.git", tmp_path / "folded.git"
    for origin in (plain, folded):
        subprocess.run(["git", "clone", "-q", "--bare", str(git_repo), str(origin)], check=True)
    wide = _run(plain, tmp_path / "a", statefile.DEFAULT_BUDGET, lesson_after=2)
    tight = _run(folded, tmp_path / "b", budget, lesson_after=2)
    text = tight.read(f"{NAME}.md") or ""
    state = statefile.parse_state(text, f"{NAME}.md")
    assert len(text.encode()) <= budget
    in_file = population_of(state)
    assert folded_ids(in_file), "the tight budget should have folded whole entries"
    assert tight.read(folded_path(NAME)) is not None
    full = population_of(state, tight.read)
    reference = population_of(statefile.parse_state(wide.read(f"{NAME}.md") or "", f"{NAME}.md"), wide.read)
    assert not folded_ids(reference)
    key = lambda c: (c.id, c.island, c.fitness, c.gen, c.parents, c.operator, c.status, c.extra)  # noqa: E731
    assert [key(c) for c in full.candidates] == [key(c) for c in reference.candidates]
    assert set(folded_ids(in_file)) == {c.id for c in full.candidates} - {c.id for c in in_file.candidates}
    assert LESSON in text


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_folded_entries_keep_every_decision_and_the_file_within_budget(
    strategy: str, git_repo: Path, run_git, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    pointer, _ = STRATEGIES[strategy]
    install_strategy_program(git_repo, run_git, PROGRAM, strategy, pointer, CAPS[strategy])
    if strategy == "alphaevolve":
        _number_the_caps(git_repo / PROGRAM / "strategy/alphaevolve.md")
        run_git(git_repo, "commit", "-qam", "caps")
    _compare(git_repo, tmp_path, BUDGETS.get(strategy, BUDGET))


def test_folded_funsearch_entries_keep_every_decision(funsearch_repo: Path, tmp_path: Path) -> None:
    _compare(funsearch_repo, tmp_path, BUDGETS["funsearch"])
