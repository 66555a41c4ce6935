"""Regression pin: a program without `strategy/` keeps the exact state file and commits of the default flow.

The fixture was recorded before the strategy system was wired into the iteration; any change to the
default flow's output shows up here as a diff.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.state.memory import MemoryStore

FIXTURES = Path(__file__).parent.parent / "fixtures"
EXAMPLE = Path(__file__).parents[2] / ".autoloop/programs/function_minimization"
START = datetime(2026, 1, 2, 3, 4, tzinfo=timezone.utc)


def run_default_flow(repo: Path, iterations: int = 6) -> tuple[str, list[str], str]:
    """Returns the state file, the candidate commit subjects and the branch's search.py after the run."""
    target = repo / ".autoloop/programs/function_minimization"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "program"], cwd=repo, check=True)
    program = load_program(repo, Path(".autoloop/programs/function_minimization/program.md"))
    for i in range(iterations):
        run_iteration(repo, program, RunOptions(proposer="tune"), START + timedelta(minutes=i))
    text = MemoryStore(repo).read("function_minimization.md") or ""
    log = subprocess.run(
        ["git", "log", "--format=%s", "main..autoloop/function_minimization"], cwd=repo, capture_output=True, text=True
    ).stdout.splitlines()
    source = subprocess.run(
        ["git", "show", "autoloop/function_minimization:.autoloop/programs/function_minimization/code/search.py"],
        cwd=repo, capture_output=True, text=True,
    ).stdout
    return text, log, source


def _without_shas(text: str) -> str:
    # Commit shas depend on the repository's history and clock, not on the flow; key tokens are random.
    text = re.sub(r"(autoloop-key: [^:\s]+:\d+:)[0-9a-f]+", r"\1<token>", text)
    return re.sub(r"\b[0-9a-f]{40}\b", "<sha>", text)


def test_default_flow_is_unchanged(git_repo: Path) -> None:
    text, log, source = run_default_flow(git_repo)
    assert _without_shas(text) == _without_shas((FIXTURES / "default_flow_state.md").read_text())
    assert log == (FIXTURES / "default_flow_commits.txt").read_text().splitlines()
    assert source == (FIXTURES / "default_flow_search.py.txt").read_text()
