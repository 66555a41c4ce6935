"""End to end: `autoloop run --parallel 2` keeps two slots in flight and records each as soon as it ends.

The evaluation appends to a log outside the worktree (so it runs unsandboxed, `isolation: none`): the
first candidate to start holds its evaluation until two other evaluations ended, so the order of the
log and of the records shows that a fast slot was recorded, and a new slot started and ended, while
the slow one was still running, without timing anything. A slot whose process dies, or whose
iteration raises, is recorded as an error and the run goes on.
"""

from __future__ import annotations

import os
import runpy
import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.loop import async_slots, lanes
from autoloop_py.loop.iteration import run_iteration
from autoloop_py.state import file as statefile
from tests.conftest import GitRunner

NAME = "slow_and_fast"
PROGRAM_MD = """\
---
evaluation-timeout: 300
isolation: none
novelty_filter: false
---

# Slow and fast

## Goal

Bring x near 4.

## Target

- `code/value.py`

Do NOT modify:
- `code/evaluate.py`

## Evaluation

```bash
cd "$AUTOLOOP_PROGRAM_DIR" && python3 code/evaluate.py
```

The metric is `score`. Higher is better.
"""
VALUE = "# EVOLVE-BLOCK-START\nx = 1.5\n# EVOLVE-BLOCK-END\n"
EVALUATE = """\
import json, os, runpy, subprocess, time
x = runpy.run_path("code/value.py")["x"]
if x != 1.5:  # a slot's candidate (the unchanged code is the baseline)
    try:
        os.close(os.open({claim!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        slow = True  # the first candidate to start
    except FileExistsError:
        slow = False
    with open({log!r}, "a") as log:
        log.write(f"{{'slow' if slow else 'fast'}}-start {{x!r}}\\n")
    def recorded():  # the slots origin's memory branch holds a record of
        shown = subprocess.run(["git", "--git-dir", {origin!r}, "log", "--format=%s", "memory/autoloop"],
                               capture_output=True, text=True).stdout
        return shown.count("tick of 1")
    waited = time.time() + 240  # a bound for a broken run, not a measure: the test asserts the order of things
    while slow and time.time() < waited and recorded() < 2:
        time.sleep(0.05)
    with open({log!r}, "a") as log:
        log.write(f"{{'slow' if slow else 'fast'}}-end {{x!r}}\\n")
print(json.dumps({{"score": -abs(x - 4)}}))
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _setup(git_repo: Path, run_git: GitRunner, tmp_path: Path) -> tuple[Path, Path, Path]:
    """Commits the program, makes a bare origin and a clone of it; returns (origin, clone, evaluation log)."""
    log = tmp_path / "evaluations.log"
    folder = git_repo / ".autoloop/programs" / NAME
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(PROGRAM_MD)
    (folder / "code/value.py").write_text(VALUE)
    (folder / "code/evaluate.py").write_text(EVALUATE.format(log=str(log), claim=str(tmp_path / "slow.claim"),
                                                          origin=str(tmp_path / "origin.git")))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "program")
    origin = tmp_path / "origin.git"
    _git(tmp_path, "clone", "-q", "--bare", str(git_repo), str(origin))
    work = tmp_path / "work"
    _git(tmp_path, "clone", "-q", str(origin), str(work))
    for key, value in (("user.name", "t"), ("user.email", "t@example.invalid")):
        _git(work, "config", key, value)
    return origin, work, log


def _state(origin: Path) -> statefile.StateFile:
    return statefile.parse_state(_git(origin, "show", f"memory/autoloop:{NAME}.md") + "\n", f"{NAME}.md")


def _check_records(origin: Path, count: int) -> statefile.StateFile:
    """Asserts the records are unique and consecutive, each under its own key, and the branch holds the best."""
    state = _state(origin)
    assert state.machine.iteration_count == count
    numbers = [e.iteration for e in state.history]
    assert sorted(numbers) == list(range(1, count + 1))
    keys = [e.key or "" for e in state.history]
    assert len(set(keys)) == count and [int(k.split(":")[1]) for k in keys] == numbers
    statefile.parse_state(statefile.render_state(state), f"{NAME}.md")
    # The memory branch took one commit per slot, newest record last.
    subjects = _git(origin, "log", "--reverse", "--format=%s", "memory/autoloop").splitlines()
    assert [s.split("(iterations ")[1].split("–")[0] for s in subjects if "tick of 1" in s] == [
        str(n) for n in range(1, count + 1)]
    branch = _git(origin, "show", f"autoloop/{NAME}:.autoloop/programs/{NAME}/code/value.py")
    kept = runpy.run_path(str(_write(origin.parent / "kept.py", branch)))["x"]
    assert state.machine.best_metric == pytest.approx(-abs(kept - 4), rel=1e-5)
    return state


def _write(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    return path


def test_a_fast_slot_is_recorded_and_another_starts_while_a_slow_one_runs(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    origin, work, log = _setup(git_repo, run_git, tmp_path)
    assert main(["run", "--repo", str(work), "--program", NAME, "--parallel", "2", "--iterations", "3"]) == 0
    lines = log.read_text().splitlines()
    assert sum(line.startswith("slow-start") for line in lines) == 1
    slow_end = next(i for i, line in enumerate(lines) if line.startswith("slow-end"))
    # While the slow slot ran, two fast ones ran whole and were recorded: the second started on the freed lane.
    assert [line.split()[0] for line in lines[:slow_end]].count("fast-end") == 2
    assert [line.split()[0] for line in lines[:slow_end]].count("fast-start") == 2
    state = _check_records(origin, 3)
    slow_x = float(lines[slow_end].split()[1])
    newest = state.history[0]  # the slow slot, launched first, was recorded last
    assert newest.iteration == 3 and newest.metric == pytest.approx(-abs(slow_x - 4), rel=1e-5)
    out = capsys.readouterr().out
    assert out.index(f"{NAME} · iteration 1") < out.index(f"{NAME} · iteration 2") < out.index(f"{NAME} · iteration 3")
    assert main(["status", "--repo", str(work)]) == 0


def test_a_slot_whose_process_dies_or_raises_is_an_error_and_the_run_goes_on(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin, work, log = _setup(git_repo, run_git, tmp_path)
    (tmp_path / "slow.claim").write_text("")  # no slow slot here

    def hostile(root, program, options, *args, **kwargs):  # type: ignore[no-untyped-def]
        if options.slot.launch == 1:
            os._exit(9)  # the lane's process dies mid-slot
        if options.slot.launch == 2:
            raise RuntimeError("the slot's iteration broke")
        return run_iteration(root, program, options, *args, **kwargs)

    monkeypatch.setattr(lanes, "run_iteration", hostile)
    monkeypatch.setattr(async_slots, "start_method", lambda: "fork")  # the lanes inherit the hostile iteration
    assert main(["run", "--repo", str(work), "--program", NAME, "--parallel", "2", "--iterations", "5"]) == 0
    state = _check_records(origin, 5)
    errors = sorted(e.text for e in state.history if e.status == "error")
    assert len(errors) == 2
    assert any("slot 1 (lane" in text and "process died (exit code 9)" in text for text in errors), errors
    assert any("slot 2 (lane" in text and "RuntimeError: the slot's iteration broke" in text for text in errors), errors
    assert sum(e.status in ("accepted", "rejected") for e in state.history) == 3  # the siblings were unaffected
    assert log.read_text().count("fast-end") == 3
    assert main(["status", "--repo", str(work)]) == 0
