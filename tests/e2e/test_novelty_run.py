"""End to end: the novelty filter skips a re-proposed candidate, reusing its earlier result, unless switched off.

The example `function_minimization` runs offline: iteration 1 is the `tune` proposer's (accepted), iteration 2
a fake proposer that puts the seed's search.py back, byte for byte, and iteration 3 the `tune` proposer again,
whose saved prompt shows the line iteration 1 deleted. Under `novelty: embedding`, iteration 2 renames the
variables of the code iteration 1 kept instead, and is not evaluated either (offline: local code vectors).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import pytest

from autoloop_py.analysis import code_vector
from autoloop_py.cli import main
from autoloop_py.loop.iteration.iteration import IterationOutcome, run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.proposers.base import Proposal, ProposalRequest, Proposer
from autoloop_py.proposers.llm import LLMProposer
from autoloop_py.proposers.llm_call import CallLimits
from autoloop_py.proposers.model_calls import ModelCheck, Reply
from autoloop_py.state.memory import MemoryStore

EXAMPLE = Path(__file__).parents[2] / ".autoloop/programs/function_minimization"
NAME = "function_minimization"
FOLDER = Path(".autoloop/programs") / NAME
SEARCH = (FOLDER / "code/search.py").as_posix()
START = datetime(2026, 1, 2, 3, 4, tzinfo=timezone.utc)


class _PutSeedBack:
    """Proposes the seed's search.py again (a candidate the run has already evaluated)."""

    name = "tune"

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        return Proposal({SEARCH: (EXAMPLE / "code/search.py").read_text(encoding="utf-8")}, "put the seed back")


class _Rename:
    """Proposes the current search.py with its variables renamed (the same program in other words)."""

    name = "tune"

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        source = request.files[SEARCH]
        for old, new in (("temperature", "heat"), ("best", "champion"), ("new_value", "trial_value"), ("nx", "cx")):
            source = re.sub(rf"\b{old}\b", new, source)
        return Proposal({SEARCH: source}, "rename the variables")


def _factory(name: str, **kwargs: object) -> Proposer:
    return _PutSeedBack()


def _install(repo: Path, novelty_filter: bool, frontmatter: str = "") -> None:
    target = repo / FOLDER
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    added = frontmatter + ("" if novelty_filter else "novelty_filter: false\n")
    text = (target / "program.md").read_text(encoding="utf-8")
    (target / "program.md").write_text(text.replace("seed: 7\n", "seed: 7\n" + added, 1))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "program"], cwd=repo, check=True)


def _run(
    repo: Path, novelty_filter: bool, frontmatter: str = "", second: Proposer | None = None
) -> list[IterationOutcome]:
    _install(repo, novelty_filter, frontmatter)
    program = load_program(repo, FOLDER / "program.md")
    factory = _factory if second is None else (lambda name, **kwargs: second)
    options = (RunOptions(proposer="tune"), RunOptions(proposer="tune", proposer_factory=factory),
               RunOptions(proposer="tune"))
    # The third iteration only shows the prompt after a skip: a renamed candidate needs no third.
    options = options if second is None else options[:2]
    return [run_iteration(repo, program, option, START + timedelta(minutes=i)) for i, option in enumerate(options)]


def _row(memory: MemoryStore, iteration: int) -> dict[str, Any]:
    path = next(p for p in memory.list(f"traces/{NAME}/rows/") if p.endswith(f"{iteration:06d}-it{iteration}.json"))
    return json.loads(memory.read(path) or "{}")


def test_a_re_proposed_candidate_is_not_evaluated(git_repo: Path) -> None:
    first, repeat, _ = _run(git_repo, novelty_filter=True)
    assert first.status == "accepted" and first.best_before is not None
    assert repeat.status == "rejected" and "evaluate" not in repeat.timings
    assert repeat.reason == f"not evaluated: identical to candidate seed (metric {first.best_before:g} reused)"
    assert repeat.metric == first.best_before
    memory = MemoryStore(git_repo)
    row = _row(memory, 2)
    assert row["status"] == "rejected" and row["parent_id"] == "it1"
    assert row["metadata"]["novelty"] == {"verdict": "duplicate", "evaluated": False, "of": "seed", "identical": True}
    assert row["metrics"]["combined_score"] == first.best_before
    state = memory.read(f"{NAME}.md") or ""
    assert "not evaluated: identical to candidate seed" in state


def test_the_prompt_shows_what_the_lineage_deleted(git_repo: Path) -> None:
    _run(git_repo, novelty_filter=True)
    prompt = MemoryStore(git_repo).read(f"traces/{NAME}/prompts/3.md") or ""
    section = prompt.split("## Recently deleted lines (do not re-add without a new reason)\n", 1)[1]
    assert re.search(r"- initial_temperature = 2\.0 +← deleted in iteration 1 by it1 \(accepted, metric [0-9.]+; "
                     r"change: tune: initial_temperature 2\.0→1\.1852\)", section)
    assert section.index("```text") < section.index("initial_temperature") < section.index("## How to reply")


def test_with_the_filter_off_it_is_evaluated(git_repo: Path) -> None:
    first, repeat, _ = _run(git_repo, novelty_filter=False)
    assert repeat.status == "rejected" and "evaluate" in repeat.timings
    assert repeat.reason is not None and repeat.reason.startswith(f"metric {first.best_before:g} did not improve")
    row = _row(MemoryStore(git_repo), 2)
    assert "novelty" not in row["metadata"]
    prompt = MemoryStore(git_repo).read(f"traces/{NAME}/prompts/3.md") or ""
    assert "Recently deleted lines" not in prompt


def test_a_candidate_that_only_renames_variables_is_not_evaluated_under_novelty_embedding(
    git_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded: list[str] = []
    vector = code_vector.vector
    monkeypatch.setattr(code_vector, "vector", lambda text, *args: embedded.append(text) or vector(text, *args))
    first, renamed = _run(git_repo, novelty_filter=True, frontmatter="novelty: embedding\n", second=_Rename())
    assert first.status == "accepted"
    assert renamed.status == "rejected" and "evaluate" not in renamed.timings and renamed.metric is None
    assert renamed.reason == ("not evaluated: similarity 1.0000 to candidate it1 is above novelty-threshold 0.999 "
                              "(local vectors)")
    memory = MemoryStore(git_repo)
    row = _row(memory, 2)
    assert row["metadata"]["novelty"] == {"verdict": "similar", "evaluated": False, "of": "it1", "similarity": 1.0,
                                          "threshold": 0.999, "embedder": "local"}
    assert row["metrics"] == {}
    # The seed and the candidate iteration 1 kept were each embedded once, in iteration 1 (it1 alone: no neighbour
    # yet), and iteration 2 read both vectors from their rows: it embedded only the renamed candidate.
    seed_row = next(p for p in memory.list(f"traces/{NAME}/rows/") if p.endswith("-seed.json"))
    assert json.loads(memory.read(seed_row) or "{}")["metadata"]["embedding"]["by"] == "local"
    assert _row(memory, 1)["metadata"]["embedding"]["by"] == "local"
    assert len(embedded) == 3 and "heat" in embedded[2] and embedded[0] not in embedded[1:]  # the seed, it1, renamed
    assert "not evaluated: similarity 1.0000 to candidate it1" in (memory.read(f"{NAME}.md") or "")
    assert main(["status", NAME, "--repo", str(git_repo)]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "Not evaluated (novelty filter): 1 of the last 2 iterations" in shown
    note = "not evaluated: similarity 1.0000 to candidate it1 is above novelty-threshold 0.999 (local vectors)"
    assert f"2 {note}" in shown


class _Judge:
    """The run's model calls (a ModelCalls): the judge answers SAME, with 10 prompt and 10 completion tokens."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def completion(self, kwargs: dict[str, Any], limits: CallLimits) -> Reply:
        self.prompts.append(kwargs["messages"][-1]["content"])
        return Reply("SAME\nonly the names differ", prompt_tokens=10, completion_tokens=10)

    def check(self, model: str) -> Callable[[], ModelCheck]:
        return ModelCheck  # the setup check before the proposal: litellm places the model, no key is missing


class _RenameAsLLM(LLMProposer):
    """The renaming proposer, as an llm proposer whose model calls (the judge's too) go to a fake."""

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        return _Rename().propose(request, rng)


def test_a_judge_confirms_the_skip_and_its_call_is_counted_in_spend(git_repo: Path) -> None:
    judge = "models:\n  - model: openai/judge\n    role: judge\n    input-cost-per-token: 0.001\nnovelty: embedding\n"
    calls = _Judge()
    second = _RenameAsLLM(models=calls)  # type: ignore[arg-type]
    _, renamed = _run(git_repo, novelty_filter=True, frontmatter=judge, second=second)
    assert len(calls.prompts) == 1 and "DIFFERENT or SAME" in calls.prompts[0]
    assert renamed.status == "rejected" and "evaluate" not in renamed.timings
    assert renamed.reason is not None and renamed.reason.endswith("(local vectors; the judge: SAME)")
    state = MemoryStore(git_repo).read(f"{NAME}.md") or ""
    # The judge's 10 + 10 tokens, its 10 prompt tokens at $0.001: the iteration's cost, Spent and the Models table.
    assert "| Spent | 20 tokens, $0.01 |" in state
    assert "| `openai/judge` | — | 0 | 0 | 0 | 20 | $0.01 |" in state
    record = state.split("### Iteration 2", 1)[1].split("### Iteration", 1)[0]
    assert "- **Cost**: 20 tokens, $0.0100\n" in record
