"""End to end: `autoloop run` killed with SIGKILL at each step of an iteration, then run again.

Each case runs the CLI as a subprocess with `AUTOLOOP_FAULT=<step>`, checks that the process died
by SIGKILL at that step (and that the step's effect is visible), runs it again without the fault
(in process), and checks the repository: every iteration recorded once, every accepted commit on
`autoloop/counter` in the Iteration History, no duplicated key or iteration number, the memory
branch pushed, no lock held and no worktree left behind.

Each evaluation scores higher than the one before (the clock: the evaluation runs sandboxed in a
standalone copy without git, and can write nothing outside it), so every candidate of the offline
`tune` proposer is accepted and the commit steps are really reached.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.loop.checkout.lock import program_lock
from autoloop_py.loop.record import recovery
from autoloop_py.state import file as statefile
from tests.programs import program_md

PROG = ".autoloop/programs/counter"

# Prompt evolution on (never due): every iteration draws the `base` variant, which a recovered record credits too.
PROGRAM_MD = program_md("Counter", "Change anything: every change scores higher.",
    frontmatter={"evaluation-timeout": 30, "prompt-evolve-every": 1000})

VALUE = "# EVOLVE-BLOCK-START\nx = 1.5\ny = 2.5\n# EVOLVE-BLOCK-END\n"

EVALUATE = """\
import json, time
print(json.dumps({{"score": time.time()}}))
"""


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def _maybe(cwd: Path, *args: str) -> str | None:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.fixture
def counter_repo(git_repo_with_origin: Path) -> Path:
    """Returns a repository with the counter program on main, pushed to its bare origin."""
    folder = git_repo_with_origin / PROG
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(PROGRAM_MD)
    (folder / "code/value.py").write_text(VALUE)
    (folder / "code/evaluate.py").write_text(EVALUATE.format())
    _git(git_repo_with_origin, "add", "-A")
    _git(git_repo_with_origin, "commit", "-qm", "counter program")
    _git(git_repo_with_origin, "push", "-q", "origin", "main")
    return git_repo_with_origin


def _run(repo: Path, iterations: int = 1, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AUTOLOOP_FAULT"}
    if fault:
        env["AUTOLOOP_FAULT"] = fault
    command = [sys.executable, "-m", "autoloop_py", "run", "--repo", str(repo), "--program", "counter",
               "--proposer", "tune", "--iterations", str(iterations)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def _keyed_commits(repo: Path, ref: str) -> dict[str, str]:
    """Returns key → sha of the candidate commits on `ref` (empty when it does not exist)."""
    log = _maybe(repo, "log", "--format=%H%x1f%B%x1e", f"main..{ref}") or ""
    found = {}
    for entry in log.split("\x1e"):
        sha, _, message = entry.strip().partition("\x1f")
        key = recovery.read_trailers(message).get(recovery.KEY)
        if key:
            found[key] = sha
    return found


def _memory_keys(repo: Path, ref: str) -> set[str]:
    text = _maybe(repo, "show", f"{ref}:counter.md")
    return recovery.recorded_keys(statefile.parse_state(text + "\n")) if text else set()


def _worktrees(repo: Path) -> list[str]:
    return [line for line in _git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


def _effect_of(step: str, repo: Path) -> None:
    """Asserts that the killed run got as far as `step` and no further."""
    _git(repo, "fetch", "-q", "origin")
    local, pushed = _keyed_commits(repo, "autoloop/counter"), _keyed_commits(repo, "origin/autoloop/counter")
    recorded_local, recorded_origin = _memory_keys(repo, "memory/autoloop"), _memory_keys(repo, "origin/memory/autoloop")
    if step in ("after-propose", "during-evaluation"):
        assert local == {} and recorded_local == set()
    elif step == "after-candidate-commit":
        assert len(local) == 1 and pushed == {} and recorded_local == set()
    elif step == "after-candidate-push":
        assert len(pushed) == 1 and not set(pushed) & recorded_origin
    else:
        assert len(recorded_local - recorded_origin) == 1
        assert set(local) <= recorded_local


def _assert_consistent(repo: Path, iterations: int) -> statefile.StateFile:
    """Asserts the invariants of a consistent repository and returns origin's state file."""
    origin = repo.parent / "origin.git"
    text = _git(origin, "show", "memory/autoloop:counter.md")
    state = statefile.parse_state(text + "\n")
    entries = [e for e in state.history if e.is_detailed]
    assert state.machine.iteration_count == iterations == len(entries)
    assert sorted(e.iteration for e in entries) == list(range(1, iterations + 1))
    keys = [e.key for e in entries]
    assert None not in keys and len(set(keys)) == len(keys)
    branch = _keyed_commits(origin, "autoloop/counter")
    by_key = {e.key: e for e in entries}
    for key, sha in branch.items():  # every accepted commit is in the history, as accepted, with its sha
        assert key in by_key and by_key[key].status == "accepted" and sha in by_key[key].text
    accepted = [e for e in entries if e.status == "accepted"]
    assert len(accepted) == len(branch)
    assert _git(repo, "rev-parse", "memory/autoloop") == _git(origin, "rev-parse", "memory/autoloop")
    assert _git(repo, "rev-parse", "autoloop/counter") == _git(origin, "rev-parse", "autoloop/counter")
    assert _git(origin, "rev-list", "--merges", "memory/autoloop") == ""
    with program_lock(repo, "counter", wait=0):
        pass
    assert len(_worktrees(repo)) == 1
    return state


@pytest.mark.parametrize(
    "fault, before, after",
    [
        ("after-propose", 1, 1),
        ("during-evaluation", 1, 1),
        ("after-candidate-commit", 1, 1),
        ("after-candidate-push", 1, 1),
        ("after-state-commit", 1, 1),
        ("after-candidate-push@2", 2, 2),
        # Between the second reply and its record: the first record, committed while that request was in flight
        # (loop/iteration/attempt.py's ordering invariant), is kept.
        ("after-propose@2", 2, 1),
    ],
)
def test_killed_at_each_step_the_next_run_continues_consistently(
    counter_repo: Path, fault: str, before: int, after: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = fault.split("@")[0]
    killed = _run(counter_repo, iterations=before, fault=fault)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert f"killing the runner at {step}" in killed.stderr
    with program_lock(counter_repo, "counter", wait=0):  # the kernel released the dead run's flock
        pass
    left = _worktrees(counter_repo)[1:]
    # The dead run's worktree is still registered: a run keeps its worktree from one iteration to the next.
    assert len(left) == 1
    if before == 1:
        _effect_of(step, counter_repo)

    monkeypatch.delenv("AUTOLOOP_FAULT", raising=False)
    assert main(["run", "--repo", str(counter_repo), "--program", "counter", "--proposer", "tune",
                 "--iterations", str(after)]) == 0
    reached_commit = step in ("after-candidate-commit", "after-candidate-push", "after-state-commit")
    state = _assert_consistent(counter_repo, before - 1 + after + (1 if reached_commit else 0))
    assert not any(Path(line.removeprefix("worktree ")).exists() for line in left)
    recovered = [e.iteration for e in state.history if e.is_detailed and recovery.RECOVERED_NOTE in e.text]
    assert recovered == ([before] if step in ("after-candidate-commit", "after-candidate-push") else [])
    assert all(e.status == "accepted" for e in state.history if e.is_detailed)
    if recovered and before == 1:  # the baseline the killed run measured is kept
        assert state.machine.initial_metric is not None
    # Each recorded iteration, the recovered one too (its candidate commit's Autoloop-Prompt trailer), credits `base`.
    base = statefile.prompts_of(state).row("base")
    assert base is not None and base.calls == base.accepted == state.machine.iteration_count
    assert all("- **Prompt**: base" in e.text for e in state.history if e.is_detailed)


def test_the_temporary_folders_of_a_killed_run_are_removed_by_the_next_run(counter_repo: Path, tmp_path: Path) -> None:
    # Killed while its agent runs: the worktree folder and the agent's prompt folder are left in TMPDIR.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    flag = tmp_path / "agent-started"
    env = {k: v for k, v in os.environ.items() if k != "AUTOLOOP_FAULT"}
    env["TMPDIR"] = str(tmp)
    env["AUTOLOOP_ISOLATION"] = "none"  # the agent's flag and pid must be the host's
    command = [sys.executable, "-m", "autoloop_py", "run", "--repo", str(counter_repo), "--program", "counter",
               "--proposer", "agent", "--agent-command", f"echo $$ > {flag}; exec sleep 60"]
    runner = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not (flag.exists() and flag.read_text().strip()):  # the agent has started
            assert runner.poll() is None, "the run ended before its agent started"
            time.sleep(0.05)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        left = sorted(p.name for p in tmp.iterdir())
        assert any(name.startswith("autoloop-agent-") for name in left), left
        assert any(name.startswith("autoloop-counter-") for name in left), left
        done = subprocess.run(command[:-4] + ["--proposer", "tune"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in tmp.iterdir()) == []
    finally:
        agent = flag.read_text().strip() if flag.exists() else ""
        if agent.isdigit():
            try:
                os.kill(int(agent), signal.SIGKILL)
            except ProcessLookupError:
                pass
