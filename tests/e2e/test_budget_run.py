"""End to end: `budget-usd` and `budget-tokens-per-day` stop a program before its next model call.

A fake model proposer reports usage (400 tokens and $0.40 a call), so the recorded spend is known; the
real llm proposer with litellm's mock reply checks that the usage it records counts too.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.tick import schedule
from autoloop_py.program.model import load_program
from autoloop_py.proposers.base import Proposal, ProposalRequest, Usage
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from tests.programs import program_md

NAME = "counter"
FOLDER = f".autoloop/programs/{NAME}"
VALUE = f"{FOLDER}/code/value.py"
DAY = datetime(2026, 5, 6, 10, 0, tzinfo=timezone.utc)


class _PricedModel:
    """Proposes x + 1 and reports 300 + 100 tokens costing $0.40, like a model call."""

    name = "llm"

    def __init__(self) -> None:
        self.calls = 0

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        self.calls += 1
        x = float(re.search(r"x = ([-0-9.]+)", request.files[VALUE]).group(1))  # type: ignore[union-attr]
        usage = Usage(prompt_tokens=300, completion_tokens=100, cost=0.4, model="fake/priced")
        return Proposal({VALUE: f"# EVOLVE-BLOCK-START\nx = {x + 1}\n# EVOLVE-BLOCK-END\n"}, "x + 1", usage=usage)


def _repo(repo: Path, run_git, frontmatter: dict[str, object]) -> Path:  # type: ignore[no-untyped-def]
    folder = repo / FOLDER
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(program_md("Counter", "Make x large.", frontmatter=frontmatter))
    (folder / "code/value.py").write_text("# EVOLVE-BLOCK-START\nx = 1.0\n# EVOLVE-BLOCK-END\n")
    (folder / "code/evaluate.py").write_text(
        'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n'
    )
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "counter program")
    return repo


def _state(repo: Path) -> statefile.StateFile:
    return statefile.parse_state(MemoryStore(repo).read(f"{NAME}.md") or "", f"{NAME}.md")


def test_a_total_budget_pauses_before_the_next_call(git_repo: Path, run_git, capsys) -> None:  # type: ignore[no-untyped-def]
    repo = _repo(git_repo, run_git, {"budget-usd": 1, "evaluation-timeout": 20})
    program = load_program(repo, Path(FOLDER) / "program.md")
    model = _PricedModel()
    options = RunOptions(proposer="llm", proposer_factory=lambda name, **_: model)
    statuses = [run_iteration(repo, program, options, DAY + timedelta(minutes=i)).status for i in range(4)]
    # $0.40, $0.80, $1.20: the third call went over; the fourth is never made.
    assert statuses == ["accepted", "accepted", "accepted", "paused"]
    assert model.calls == 3
    machine = _state(repo).machine
    assert machine.iteration_count == 3
    assert machine.spent is not None and (machine.spent.tokens, machine.spent.usd) == (1200, pytest.approx(1.2))
    assert machine.paused
    assert machine.pause_reason == (
        "budget reached: spent $1.20/$1 (budget-usd); raise budget-usd in program.md, then `autoloop resume counter`"
    )
    text = MemoryStore(repo).read(f"{NAME}.md") or ""
    assert "| Spent | 1200 tokens, $1.2" in text
    # Paused: not picked again, and status shows spend against the budget.
    assert run_iteration(repo, program, options, DAY + timedelta(minutes=9)).status == "paused" and model.calls == 3
    capsys.readouterr()
    assert main(["status", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "$1.20/$1" in out and "budget reached" in out


def test_a_daily_budget_pauses_until_the_next_day(git_repo: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    repo = _repo(git_repo, run_git, {"budget-tokens-per-day": 800, "evaluation-timeout": 20})
    program = load_program(repo, Path(FOLDER) / "program.md")
    model = _PricedModel()
    options = RunOptions(proposer="llm", proposer_factory=lambda name, **_: model)
    statuses = [run_iteration(repo, program, options, DAY + timedelta(minutes=i)).status for i in range(3)]
    assert statuses == ["accepted", "accepted", "paused"] and model.calls == 2
    machine = _state(repo).machine
    assert machine.paused and machine.pause_reason is not None
    assert machine.pause_reason.startswith("daily budget reached on 2026-05-06: spent 800/800 tokens")
    # The scheduler skips it for the rest of the day, and picks it the next day.
    assert schedule.plan([program], {NAME: machine}, DAY + timedelta(hours=5)).selected is None
    tomorrow = DAY + timedelta(days=1)
    assert schedule.plan([program], {NAME: machine}, tomorrow).selected == NAME
    assert run_iteration(repo, program, options, tomorrow).status == "accepted"
    assert model.calls == 3
    machine = _state(repo).machine
    assert not machine.paused
    assert machine.spent_today is not None and machine.spent_today.day == tomorrow.date()
    assert machine.spent_today.tokens == 400
    assert machine.spent is not None and machine.spent.tokens == 1200


def test_the_llm_proposers_recorded_usage_counts(git_repo: Path, run_git, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("litellm")
    repo = _repo(git_repo, run_git, {"budget-tokens": 1, "evaluation-timeout": 20})
    reply = f"SUMMARY: raise x\n\n{VALUE}\n<<<<<<< SEARCH\nx = 1.0\n=======\nx = 2.0\n>>>>>>> REPLACE\n"
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", reply)
    args = ["run", "--repo", str(repo), "--program", NAME, "--proposer", "llm", "--model", "gpt-4o-mini"]
    assert main(args) == 0
    spent = _state(repo).machine.spent
    assert spent is not None and spent.tokens >= 1
    assert main(args) == 0
    machine = _state(repo).machine
    assert machine.iteration_count == 1 and machine.paused
    assert machine.pause_reason is not None and "(budget-tokens)" in machine.pause_reason


class _FailingPricedModel:
    """A model call that costs $0.40 and gives no usable edit."""

    name = "llm"

    def __init__(self) -> None:
        self.calls = 0

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        self.calls += 1
        usage = Usage(prompt_tokens=300, completion_tokens=100, cost=0.4, model="fake/priced")
        return Proposal({}, "no edit", usage=usage, failure="the reply had no usable edit block")


def test_a_strategy_does_not_retry_past_the_budget(git_repo: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    from tests.programs import install_tiny_strategy_program

    files = {
        "program.md": program_md("Counter", "Make x large.", frontmatter={"budget-usd": 1, "evaluation-timeout": 20}),
        "code/value.py": "# EVOLVE-BLOCK-START\nx = 1.0\n# EVOLVE-BLOCK-END\n",
        "code/evaluate.py": 'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n',
    }
    install_tiny_strategy_program(git_repo, run_git, FOLDER, "adaevolve", files, "max_error_retries: 5\n")
    program = load_program(git_repo, Path(FOLDER) / "program.md")
    model = _FailingPricedModel()
    # The first iteration records the evaluated Target as every island's seed, without the model.
    run_iteration(git_repo, program, RunOptions(proposer="llm", proposer_factory=lambda name, **_: model), DAY)
    assert model.calls == 0
    outcome = run_iteration(git_repo, program, RunOptions(proposer="llm", proposer_factory=lambda name, **_: model), DAY)
    # $0.40, $0.80, $1.20: the budget is reached after the third call, so none of the three retries left is made.
    assert outcome.status == "error" and model.calls == 3
    machine = _state(git_repo).machine
    assert machine.spent is not None and machine.spent.usd == pytest.approx(1.2)
    assert run_iteration(git_repo, program, RunOptions(proposer_factory=lambda name, **_: model), DAY).status == "paused"
    assert model.calls == 3
