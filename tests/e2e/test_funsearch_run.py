"""End to end: 28 offline iterations of FunSearch on function_minimization, through the CLI.

The test's copy of the program gets a wrapper evaluator that prints per-trial `scores` and an
`output_hash`, a fully customised FunSearch playbook (4 islands, a reset every 6 stored programs) and
the pointer to it. One iteration runs with a proposer that replays an earlier candidate's code, so a
duplicate is discarded before evaluation; the seed iteration runs with a proposer that must not be
called. After every iteration the Strategy State tables must agree with the Population, and the state
file stays within its byte budget (entries past max_population leave it); after a reset the reset
islands hold only the donor's best.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.program.regions import evolved_code, place_code
from autoloop_py.proposers import get_proposer
from autoloop_py.proposers.base import Proposal, ProposalRequest, Proposer
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from autoloop_py.strategies.funsearch import strategy as fs
from autoloop_py.strategies.funsearch.config import FunSearchConfig

REPO = Path(__file__).parents[2]
NAME = "function_minimization"
PROGRAM = f".autoloop/programs/{NAME}"
STRATEGY = REPO / ".autoloop/strategies/funsearch"
ITERATIONS = 28
REPLAY_AT = 12
ISLANDS, RESET_EVERY = 4, 6
PRIMARY = f"{PROGRAM}/code/search.py"
MAX_POPULATION = FunSearchConfig("f").max_population

WRAPPER = '''"""Runs the program's evaluator and adds per-trial scores and a hash of the returned points."""

import hashlib
import json
import math
import sys

import evaluate


def main() -> int:
    try:
        points = evaluate.trial_points()  # the search runs in a process of its own
        results = [(evaluate.objective(*p), math.dist(p, evaluate.GLOBAL_MIN)) for p in points]
    except Exception as err:
        print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
        return 1
    metrics = evaluate.score([v for v, _ in results], [d for _, d in results])
    metrics["scores"] = {f"trial_{t:02d}": round(-v, 4) for t, (v, _) in enumerate(results)}
    points = json.dumps([[round(v, 9), round(d, 9)] for v, d in results])
    metrics["output_hash"] = hashlib.sha256(points.encode()).hexdigest()[:16]
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

SKELETON = """# Specification — function_minimization

## Problem

Find the global minimum of f(x, y) = sin(x)·cos(y) + sin(x·y) + (x² + y²)/20 on [-5, 5]². A better
search returns points closer to (-1.704, 0.678) in more of the ten seeded trials.

## Test inputs

- trial_00 … trial_09: one seeded run each; the score is −f at the returned point.

## Function skeleton

```python
def search_algorithm(rng, bounds):
    \"\"\"Returns (x, y, value): the best point found; call objective for every value.\"\"\"
```
"""

POINTER = """## Evolution Strategy

This program uses the **FunSearch** strategy. On every iteration, read `strategy/funsearch.md` and follow it literally.
Support files:
- `strategy/funsearch.md` — the runtime playbook.
- `strategy/prompts/skeleton.md` — the specification every prompt opens with.
"""


def _playbook() -> str:
    text = (STRATEGY / "strategy.md").read_text(encoding="utf-8")
    text = text.replace("<CUSTOMIZE: program-name>", NAME)
    text = re.sub(r"<CUSTOMIZE: problem framing[^>]*>", "The search rewrites `search_algorithm`; the evaluator "
                  "scores ten seeded trials, one per test.", text)
    text = re.sub(r"<CUSTOMIZE: function name[^>]*>", "search_algorithm", text)
    text = text.replace("| num_islands | 10 |", f"| num_islands | {ISLANDS} |")
    text = text.replace("| score_reduction | last |", "| score_reduction | metric |")
    assert "<CUSTOMIZE" not in text
    return text


@pytest.fixture
def funsearch_repo(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    base = git_repo / PROGRAM
    shutil.copytree(REPO / PROGRAM, base, ignore=shutil.ignore_patterns("__pycache__"))
    (base / "code/evaluate_funsearch.py").write_text(WRAPPER)
    (base / "code/config.yaml").write_text(f"reset_every_registrations: {RESET_EVERY}\n")
    (base / "strategy/prompts").mkdir(parents=True)
    (base / "strategy/funsearch.md").write_text(_playbook())
    (base / "strategy/prompts/skeleton.md").write_text(SKELETON)
    program_md = (base / "program.md").read_text()
    program_md = program_md.replace("code/evaluate.py\"", "code/evaluate_funsearch.py\"")
    program_md = program_md[: program_md.index("## Evolution Strategy")] + POINTER
    (base / "program.md").write_text(program_md)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "function_minimization with FunSearch")
    return git_repo


class _Replay:
    """Proposes an earlier candidate's code (not the parent the runner placed): a duplicate by construction."""

    name = "replay"

    def __init__(self, memory: MemoryStore) -> None:
        self.memory = memory

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        placed = request.files[PRIMARY]
        population = population_of(_state(self.memory), self.memory.read)
        other = next(c for c in population.candidates if c.code and c.code != evolved_code(placed))
        return Proposal({PRIMARY: place_code(placed, other.code or "")}, f"replay candidate {other.id}")


def _state(memory: MemoryStore) -> statefile.StateFile:
    return statefile.parse_state(memory.read(f"{NAME}.md") or "", f"{NAME}.md")


class _Refuse:
    """A proposer the seed iteration must not call: the seed is the Target as it is."""

    name = "refuse"

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        raise AssertionError("the seed iteration called the proposer")


def _run(repo: Path, iteration: int, memory: MemoryStore) -> None:
    if iteration == 1:
        program = load_program(repo, Path(PROGRAM) / "program.md")
        outcome = run_iteration(repo, program, RunOptions(proposer_factory=lambda name, **_: _Refuse()))
        assert outcome.summary == "seed: the Target as it is" and outcome.metric == outcome.best_before
        (seed,) = population_of(_state(memory)).candidates
        assert (seed.operator, seed.fitness, seed.code) == ("seed", outcome.metric, evolved_code((repo / PRIMARY).read_text()))
        return
    if iteration != REPLAY_AT:
        assert main(["run", "--repo", str(repo), "--program", NAME, "--iterations", "1"]) == 0
        return

    def factory(name: str, **kwargs: object) -> Proposer:
        return _Replay(memory) if name == "tune" else get_proposer(name, **kwargs)  # type: ignore[arg-type]

    program = load_program(repo, Path(PROGRAM) / "program.md")
    outcome = run_iteration(repo, program, RunOptions(proposer_factory=factory))
    assert outcome.status == "rejected"
    assert outcome.reason is not None and re.fullmatch(r"not evaluated: identical to candidate \d+ \(its result stands\)", outcome.reason)


def _check_tables(state: fs.FunSearchState, population: pop.Population) -> None:
    """Checks the Strategy State against the Population: members exist, counters add up, bests are right."""
    ids = {c.id for c in population.candidates}
    assert len(state.islands) == ISLANDS
    for island in state.islands:
        members = [m for c in island.clusters for m in c.members]
        assert {m.id for m in members} <= ids
        # Programs counts registrations (the temperature's n); evicted members have left their clusters.
        assert island.num_programs >= len(members) and all(c.members for c in island.clusters)
        hashes = [m.output_hash for m in members]
        assert len(hashes) == len(set(hashes)), f"island {island.index} holds a duplicate output hash"
        best = max(island.clusters, key=lambda c: c.score)
        assert island.best_score == best.score and island.best_id in {m.id for m in best.members}
    counted = state.stored + state.duplicates + state.execution_failed + state.version_mismatch
    assert counted == len(population.candidates) + state.evicted
    assert len(population.candidates) <= MAX_POPULATION


def test_many_iterations(funsearch_repo: Path) -> None:
    memory = MemoryStore(funsearch_repo)
    resets = 0
    last_reset = None
    versions: dict[int, int] = {}
    for iteration in range(1, ITERATIONS + 1):
        before = population_of(_state(memory), memory.read) if iteration == REPLAY_AT else None
        _run(funsearch_repo, iteration, memory)
        state_file = _state(memory)
        assert len((memory.read(f"{NAME}.md") or "").encode("utf-8")) <= statefile.DEFAULT_BUDGET
        population = population_of(state_file, memory.read)
        if before is not None:
            # Discarded before evaluation: no entry, no registration, no counter moved.
            assert population.strategy_state == before.strategy_state
            assert [c.id for c in population.candidates] == [c.id for c in before.candidates]
        state = fs.parse_state_block(population.strategy_state)
        _check_tables(state, population)
        if state.last_reset_at != last_reset:
            resets += 1
            last_reset = state.last_reset_at
            assert state.registrations_since_reset == 0
            reset = [i for i in state.islands if i.version > versions.get(i.index, 0)]
            assert len(reset) == ISLANDS // 2 and all(i.version == versions.get(i.index, 0) + 1 for i in reset)
            for island in reset:
                # A reset island holds only the best program of a kept island.
                assert island.num_programs == 1 and len(island.clusters) == 1
                kept = [i for i in state.islands if i not in reset]
                assert island.best_id in {i.best_id for i in kept}
        versions = {i.index: i.version for i in state.islands}
    assert state_file.machine.iteration_count == ITERATIONS
    assert resets >= 2
    # The seed founded every island; the replayed candidate was not evaluated, so it has no entry.
    assert memory.read(f"traces/{NAME}/prompts/1.md") is None
    # ITERATIONS - 1 entries were recorded; past max_population the weakest left the table, their code kept.
    assert len(population.candidates) == MAX_POPULATION and state.evicted == ITERATIONS - 1 - MAX_POPULATION
    kept = {c.id for c in population.candidates}
    assert all(memory.read(f"candidates/{NAME}/{i}.py") for i in range(1, ITERATIONS) if i not in kept)
    assert max(kept) == ITERATIONS - 1
    entries = {c.id: dict(c.extra) for c in population.candidates}
    assert {e["Disposition"] for e in entries.values()} <= set(fs.DISPOSITIONS)
    assert all(re.fullmatch(r"\(.+\)", e["Signature"]) for e in entries.values() if e["Disposition"] == "stored")
    # The duplicate is in the history, and the prompt kept for it is FunSearch's.
    replayed = [e for e in state_file.history if e.iteration == REPLAY_AT]
    assert not replayed or "not evaluated" in replayed[0].text
    prompt = memory.read(f"traces/{NAME}/prompts/{ITERATIONS}.md") or ""
    assert "def search_algorithm_v0" in prompt and "## How to reply" in prompt
    assert "<CUSTOMIZE" not in prompt
