"""End to end: 8 runners at once against one bare origin, as threads in one clone and as processes in eight.

Four runners share the AlphaEvolve program `shared` and four each run their own default-flow
program. Afterwards origin must hold every iteration record, every Population entry and every
accepted commit, a linear memory branch, and state files that all parse; in one clone, no two
evaluations of `shared` may overlap (the program lock).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.record import recovery
from autoloop_py.program.model import load_program
from autoloop_py.state import file as statefile
from autoloop_py.state.population import population_of
from tests.conftest import GitRunner

REPO = Path(__file__).parents[2]
N = 8
SOLOS = [f"solo{i}" for i in range(N // 2)]

PROGRAM_MD = """\
---
evaluation-timeout: 30
isolation: none
---

# {name}

## Goal

Grow x + y.

## Target

- `code/value.py`

Do NOT modify:
- `code/evaluate.py`
- `code/config.yaml`

## Evaluation

```bash
cd "$AUTOLOOP_PROGRAM_DIR" && python3 code/evaluate.py
```

The metric is `score`. Higher is better.
"""
STRATEGY = "\n## Evolution Strategy\n\nThis program uses the **AlphaEvolve** strategy: read `strategy/alphaevolve.md`.\n"
VALUE = "# EVOLVE-BLOCK-START\nx = 1.5\ny = 2.5\n# EVOLVE-BLOCK-END\n"
# The evaluation appends its (start, end) times to a log outside the worktree, to prove the lock
# (so it runs unsandboxed: `isolation: none` above).
EVALUATE = """\
import json, runpy, time
start = time.time()
ns = runpy.run_path("code/value.py")
time.sleep(0.05)
with open({log!r}, "a") as log:
    log.write(f"{{start}} {{time.time()}}\\n")
print(json.dumps({{"score": ns["x"] + ns["y"]}}))
"""


def _add_program(repo: Path, name: str, log: Path, strategy: bool) -> None:
    folder = repo / ".autoloop/programs" / name
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(PROGRAM_MD.format(name=name) + (STRATEGY if strategy else ""))
    (folder / "code/value.py").write_text(VALUE)
    (folder / "code/evaluate.py").write_text(EVALUATE.format(log=str(log)))
    if strategy:
        shutil.copytree(REPO / ".autoloop/programs/groupby_evolve/strategy", folder / "strategy")
        (folder / "code/config.yaml").write_text("population_size: 40\narchive_size: 5\n")


def _setup(repo: Path, run_git: GitRunner) -> Path:
    """Commits the programs on main, pushes them, and returns the evaluation log of `shared`."""
    log = repo.parent / "shared-evaluations.log"
    _add_program(repo, "shared", log, strategy=True)
    for name in SOLOS:
        _add_program(repo, name, repo.parent / f"{name}-evaluations.log", strategy=False)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "programs")
    run_git(repo, "push", "-q", "origin", "main")
    return log


def _check_origin(origin: Path, run_git: GitRunner) -> None:
    """Asserts that origin lost no record, Population entry or accepted commit, and its memory is linear."""
    assert run_git(origin, "rev-list", "--merges", "memory/autoloop") == ""
    files = run_git(origin, "ls-tree", "--name-only", "memory/autoloop").splitlines()
    states = {}
    for name in [f for f in files if f.endswith(".md")]:
        states[name[:-3]] = statefile.parse_state(run_git(origin, "show", f"memory/autoloop:{name}") + "\n", name)
    assert set(states) == {"shared", *SOLOS}
    for name, state in states.items():
        expected = N // 2 if name == "shared" else 1
        entries = [e for e in state.history if e.is_detailed]
        assert state.machine.iteration_count == expected == len(entries), name
        assert sorted(e.iteration for e in entries) == list(range(1, expected + 1)), name
        keys = {e.key for e in entries}
        assert None not in keys and len(keys) == expected, name
        _check_accepted(origin, name, entries, run_git)
    population = population_of(states["shared"]).candidates
    ids = [c.id for c in population]
    assert len(ids) == len(set(ids)) == len([e for e in states["shared"].history if e.metric is not None])


def _check_accepted(origin: Path, name: str, entries: list[statefile.HistoryEntry], run_git: GitRunner) -> None:
    """Asserts that every keyed commit on origin's autoloop/<name> is an accepted entry of the history."""
    branch = subprocess.run(["git", "rev-parse", "--verify", "-q", f"autoloop/{name}"], cwd=origin, capture_output=True)
    log = run_git(origin, "log", "--format=%H%x1f%B%x1e", f"main..autoloop/{name}") if branch.returncode == 0 else ""
    by_key = {e.key: e for e in entries}
    commits = 0
    for record in log.split("\x1e"):
        sha, _, message = record.strip().partition("\x1f")
        key = recovery.read_trailers(message).get(recovery.KEY)
        if key:
            commits += 1
            assert key in by_key and by_key[key].status == "accepted" and sha in by_key[key].text, name
    assert commits == len([e for e in entries if e.status == "accepted"]), name


def _overlaps(log: Path) -> list[tuple[float, float]]:
    spans = sorted(tuple(float(v) for v in line.split()) for line in log.read_text().splitlines())
    return [(a, b) for (a, b), (c, _) in zip(spans, spans[1:]) if c < b]


def test_eight_threads_in_one_clone(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    log = _setup(git_repo_with_origin, run_git)
    names = ["shared"] * (N // 2) + SOLOS
    errors: list[BaseException] = []

    def runner(name: str) -> None:
        try:
            program = load_program(git_repo_with_origin, Path(f".autoloop/programs/{name}/program.md"))
            run_iteration(git_repo_with_origin, program, RunOptions(proposer="tune"))
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=runner, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    _check_origin(git_repo_with_origin.parent / "origin.git", run_git)
    # The baseline (the first run records it as the Population's seed) and one candidate per later run.
    assert len(log.read_text().splitlines()) == N // 2
    assert _overlaps(log) == []


def test_eight_processes_in_eight_clones(
    git_repo_with_origin: Path, clone_origin: Callable[[str], Path], run_git: GitRunner
) -> None:
    _setup(git_repo_with_origin, run_git)
    names = ["shared"] * (N // 2) + SOLOS
    clones = [clone_origin(f"clone{i}") for i in range(N)]
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "autoloop_py", "run", "--repo", str(clone), "--program", name, "--proposer", "tune"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for clone, name in zip(clones, names)
    ]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    _check_origin(git_repo_with_origin.parent / "origin.git", run_git)
