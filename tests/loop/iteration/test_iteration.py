"""Tests for iteration.py: a run's records committed while the next model request is in flight (`pipelined`); the
seed's embedding counted in the first iteration's spend."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from autoloop_py.git.objects import GitSession
from autoloop_py.loop.checkout.workspace import Worktrees
from autoloop_py.loop.iteration.iteration import IterationOutcome, run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.proposers import model_calls
from autoloop_py.proposers.base import Proposal, ProposalRequest
from autoloop_py.proposers.llm_call import CallLimits
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MEMORY_BRANCH, MemoryStore
from tests.conftest import GitRunner
from tests.programs import program_md, small_program

VALUE = ".autoloop/programs/demo/code/value.py"
EVALUATE = "import json, runpy\nprint(json.dumps({'score': runpy.run_path('code/value.py')['x']}))\n"


def _committed_count(repo: Path) -> int:
    """Returns the iterations the memory branch's committed state file counts (0 without one)."""
    shown = subprocess.run(["git", "show", f"{MEMORY_BRANCH}:demo.md"], cwd=repo, capture_output=True, text=True)
    return statefile.parse_state(shown.stdout).machine.iteration_count if shown.returncode == 0 else 0


class _Grow:
    """Adds one to x; from its second request on, waits until the memory branch holds the last record."""

    name = "grow"

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.seen: list[tuple[int, int, int]] = []  # (request's iteration, records committed when asked, at the end)

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        asked = _committed_count(self.repo)
        ends = time.monotonic() + 20  # a guard against hanging the suite, not a timing assertion
        while request.iteration > 1 and _committed_count(self.repo) < request.iteration - 1 and time.monotonic() < ends:
            time.sleep(0.01)
        self.seen.append((request.iteration, asked, _committed_count(self.repo)))
        x = int(request.files[VALUE].split("=")[1])
        return Proposal({VALUE: f"x = {x + 1}\n"}, f"x to {x + 1}")


def test_the_next_decision_reads_the_last_record_and_its_commit_is_made_while_the_model_is_asked(
    git_repo: Path, run_git: GitRunner
) -> None:
    program = small_program(git_repo)
    (git_repo / ".autoloop/programs/demo/code/evaluate.py").write_text(EVALUATE)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "demo")
    proposer = _Grow(git_repo)
    options = RunOptions(proposer_factory=lambda name, **_: proposer, isolation="none")
    with GitSession(git_repo, owns_pushes=True) as session, Worktrees(git_repo) as worktrees:
        first = run_iteration(git_repo, program, options, session=session, worktrees=worktrees, pipelined=True)
        memory = MemoryStore(git_repo, session=session)
        # Rendered, read through the run's session, not committed yet.
        assert _committed_count(git_repo) == 0 and memory.unwritten()
        assert statefile.parse_state(memory.read("demo.md") or "").machine.iteration_count == 1
        second = run_iteration(git_repo, program, options, session=session, worktrees=worktrees)
        assert not memory.unwritten()
    assert (first.iteration, first.status, second.iteration, second.status) == (1, "accepted", 2, "accepted")
    # The second decision counted the first record (iteration 2, from x = 2) before it was committed; the commit
    # came while its request was being answered (the proposer saw it land), and the last one before the run ended.
    assert [(iteration, end) for iteration, _, end in proposer.seen] == [(1, 0), (2, 1)]
    assert _committed_count(git_repo) == 2
    assert run_git(git_repo, "show", f"autoloop/demo:{VALUE}") == "x = 3"



class _Propose:
    """Proposes the given code."""

    name = "fixed"

    def __init__(self, code: str) -> None:
        self.code = code

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        return Proposal({VALUE: self.code}, "the given code")


def _first_iteration(
    repo: Path, run_git: GitRunner, frontmatter: dict[str, str], code: str
) -> tuple[IterationOutcome, statefile.StateFile]:
    """Runs the first iteration of a program whose Target is `x = 1`, proposing code; returns it and the state."""
    folder = repo / ".autoloop/programs/demo"
    (folder / "code").mkdir(parents=True)
    (folder / "code/value.py").write_text("x = 1\n")
    (folder / "code/evaluate.py").write_text(EVALUATE)
    (folder / "program.md").write_text(program_md("Demo", "Grow x.", frontmatter=frontmatter))
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "demo")
    program = load_program(repo, Path(".autoloop/programs/demo/program.md"))
    options = RunOptions(proposer_factory=lambda name, **_: _Propose(code), isolation="none")
    outcome = run_iteration(repo, program, options)
    return outcome, statefile.parse_state(MemoryStore(repo).read("demo.md") or "")


def test_the_seeds_embedding_is_counted_in_the_first_iterations_spend(
    git_repo: Path, run_git: GitRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[list[str]] = []

    def embedding(calls: object, kwargs: dict[str, Any], limits: CallLimits) -> model_calls.Vectors:
        requests.append(kwargs["input"])
        vectors = tuple((1.0, 0.0) if "1" in text else (0.0, 1.0) for text in kwargs["input"])
        return model_calls.Vectors(vectors, prompt_tokens=7)

    monkeypatch.setattr(model_calls.InProcess, "embedding", embedding)
    models = "[{model: openai/embed, role: embedding, input-cost-per-token: 0.01}]"
    outcome, state = _first_iteration(git_repo, run_git, {"novelty": "embedding", "models": models}, "x = 2\n")
    assert outcome.status == "accepted"
    # The seed's code was embedded for its row, then the candidate (the seed's kept vector read back): two requests
    # of 7 tokens each, both in the iteration's cost, Spent and the model's row (the seed's was dropped before).
    assert requests == [["x = 1\n"], ["x = 2\n"]]
    assert "- **Cost**: 14 tokens, $0.1400\n" in state.history[0].text
    assert state.machine.spent is not None and (state.machine.spent.tokens, state.machine.spent.usd) == (14, 0.14)
    assert [(row.name, row.tokens) for row in statefile.models_of(state).rows] == [("openai/embed", 14)]


def test_the_first_candidate_is_compared_with_the_seed_measured_in_its_iteration(
    git_repo: Path, run_git: GitRunner
) -> None:
    # Before, the seed's row (written with the record) was no neighbour yet: this candidate was evaluated.
    outcome, state = _first_iteration(git_repo, run_git, {"novelty": "embedding"}, "x = 1  # the same\n")
    assert outcome.status == "rejected" and "evaluate" not in outcome.timings and outcome.metric is None
    assert outcome.reason == ("not evaluated: similarity 1.0000 to candidate seed is above novelty-threshold 0.999 "
                              "(local vectors)")
    assert state.machine.best_metric == 1
