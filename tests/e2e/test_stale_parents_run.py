"""End to end: AlphaEvolve parents recorded before a commit on the default branch never revert it.

Three iterations record Population entries whose block holds `return 0.0`; a commit on main then fixes
that line to `return 1000.0`. Every later prompt shows its parent with the fix, every later entry and
the program branch keep it, and no accepted candidate reverts it.
"""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.proposers.base import Proposal, ProposalRequest, Proposer
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from autoloop_py.strategies.prompt import RECENTLY_DELETED
from autoloop_py.strategies.runner import with_all_code
from tests.programs import install_tiny_strategy_program, program_md

NAME = "bonus"
FOLDER = f".autoloop/programs/{NAME}"
VALUE = f"{FOLDER}/code/value.py"
SEED = """\
# EVOLVE-BLOCK-START
x = 1.0


def bonus():
    # the default branch fixes this later
    return 0.0
# EVOLVE-BLOCK-END
"""
EVALUATE = """\
import json
ns = {}
exec(open("code/value.py").read(), ns)
print(json.dumps({"score": ns["x"] + ns["bonus"]()}))
"""


class _Climb:
    """Raises x by 10 in the file it is shown (the parent's code), keeping every other line."""

    name = "tune"

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        text = request.files[VALUE]
        x = float(re.search(r"^x = ([-0-9.]+)$", text, re.MULTILINE).group(1))  # type: ignore[union-attr]
        return Proposal({VALUE: text.replace(f"x = {x}", f"x = {x + 10}", 1)}, f"x to {x + 10}")


def _factory(name: str, **kwargs: object) -> Proposer:
    return _Climb()


@pytest.fixture
def repo(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    files = {"program.md": program_md("Bonus", "Make the score large."), "code/value.py": SEED, "code/evaluate.py": EVALUATE}
    install_tiny_strategy_program(git_repo, run_git, FOLDER, "alphaevolve", files, "population_size: 10\n")
    return git_repo


def _population(repo: Path) -> dict[int, str]:
    memory = MemoryStore(repo)
    state = statefile.parse_state(memory.read(f"{NAME}.md") or "", f"{NAME}.md")
    return {c.id: c.code or "" for c in with_all_code(population_of(state), memory.read).candidates}


def test_parents_from_before_a_default_branch_commit_do_not_revert_it(repo: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    program = load_program(repo, Path(FOLDER) / "program.md")
    options = RunOptions(proposer_factory=_factory)
    for _ in range(3):
        run_iteration(repo, program, options)
    before = _population(repo)
    assert before and all("return 0.0" in code for code in before.values())
    # The fix lands on main, far from the lines the candidates change.
    path = repo / VALUE
    path.write_text(path.read_text().replace("return 0.0", "return 1000.0"))
    run_git(repo, "commit", "-qam", "fix bonus")
    outcomes: list[Any] = [run_iteration(repo, program, options) for _ in range(4)]
    assert any(o.status == "accepted" for o in outcomes)
    after = _population(repo)
    new = {i: code for i, code in after.items() if i not in before}
    assert len(new) == 4
    for candidate_id, code in new.items():
        assert "return 1000.0" in code and "return 0.0" not in code, candidate_id
    memory = MemoryStore(repo)
    for iteration in range(4, 8):
        prompt = memory.read(f"traces/{NAME}/prompts/{iteration}.md") or ""
        # The parents' code shows the fix; the line it replaced may be listed only as deleted.
        shown = prompt.split(RECENTLY_DELETED)[0]
        assert "return 1000.0" in shown and "return 0.0" not in shown, iteration
    branch = subprocess.run(
        ["git", "show", f"autoloop/{NAME}:{VALUE}"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert "return 1000.0" in branch
    # No commit on the program branch after the fix puts the old line back.
    log = subprocess.run(
        ["git", "log", "-p", "--format=%s", f"main..autoloop/{NAME}", "--", VALUE], cwd=repo, capture_output=True, text=True
    ).stdout
    assert "+    return 0.0" not in log


class _Script:
    """Proposes from a script: `x` raises x by 10; `bonus` changes the line the default branch fixes later."""

    name = "tune"

    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        if self.steps.pop(0) == "bonus":
            return Proposal({VALUE: request.files[VALUE].replace("return 0.0", "return -5.0")}, "bonus to -5")
        return _Climb().propose(request, rng)


def test_an_entry_that_conflicts_with_the_change_is_stale(repo: Path, run_git, capsys) -> None:  # type: ignore[no-untyped-def]
    from autoloop_py.cli import main

    program = load_program(repo, Path(FOLDER) / "program.md")
    script = _Script(["x", "bonus", "x", "x", "x", "x"])
    for _ in range(3):  # iteration 1 records the Target as the first member, with no proposal
        run_iteration(repo, program, RunOptions(proposer_factory=lambda name, **_: script))
    entries = _population(repo)
    conflicting = next(i for i, code in entries.items() if "return -5.0" in code)
    path = repo / VALUE
    path.write_text(path.read_text().replace("return 0.0", "return 1000.0"))
    run_git(repo, "commit", "-qam", "fix bonus")
    capsys.readouterr()
    assert main(["status", NAME, "--repo", str(repo)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"stale (their code conflicts with a later change of {VALUE}" in out and f"#{conflicting}" in out
    for _ in range(3):
        run_iteration(repo, program, RunOptions(proposer_factory=lambda name, **_: script))
    state = statefile.parse_state(MemoryStore(repo).read(f"{NAME}.md") or "", f"{NAME}.md")
    later = [c for c in population_of(state).candidates if c.id not in entries]
    assert len(later) == 3 and all(conflicting not in c.parents for c in later)
    assert all("return 1000.0" in code for i, code in _population(repo).items() if i not in entries)
