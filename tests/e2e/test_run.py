"""End to end: `autoloop run` against a temporary repository with a bare origin.

The candidates come from the `agent` proposer driven by a scripted agent, so every path of an
iteration (accepted, rejected, rejected before evaluation, hanging and garbage evaluations,
pause after three errors) runs through the real CLI, git and evaluation code.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest

from autoloop_py.cli import main
from autoloop_py.errors import GitError
from autoloop_py.loop.iteration import attempt
from autoloop_py.state import file as statefile
from tests.programs import program_md

PROGRAM_MD = program_md("Counter", "Make `x` as large as possible.",
    frontmatter={"schedule": "every 6h", "evaluation-timeout": 3})

VALUE = "# EVOLVE-BLOCK-START\nx = {x}\n# EVOLVE-BLOCK-END\n"

EVALUATE = """\
import json, time
src = open("code/value.py").read()
if "HANG" in src:
    time.sleep(60)
if "GARBAGE" in src:
    print("not json at all")
    raise SystemExit(0)
ns = {}
exec(src, ns)
print("some log line")
print(json.dumps({"score": ns["x"], "note": "ok"}))
"""

AGENT = """\
import json, os, sys
plan_path = sys.argv[1]
plan = json.load(open(plan_path))
step = plan.pop(0)
json.dump(plan, open(plan_path, "w"))
for path, content in step["write"].items():
    with open(path, "w") as handle:
        handle.write(content)
with open(os.environ["AUTOLOOP_REPLY_FILE"], "w") as reply:
    reply.write("SUMMARY: " + step["summary"] + "\\n")
    if step.get("lesson"):
        reply.write("LESSON: " + step["lesson"] + "\\n")
"""

PROG = ".autoloop/programs/counter"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def counter_repo(tmp_path: Path) -> Path:
    origin = tmp_path / "origin.git"
    work = tmp_path / "work"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(tmp_path, "init", "-q", "-b", "main", str(work))
    _git(work, "config", "user.name", "Test")
    _git(work, "config", "user.email", "test@example.invalid")
    (work / PROG / "code").mkdir(parents=True)
    (work / PROG / "program.md").write_text(PROGRAM_MD)
    (work / PROG / "code/value.py").write_text(VALUE.format(x=1.0))
    (work / PROG / "code/evaluate.py").write_text(EVALUATE)
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "initial")
    _git(work, "remote", "add", "origin", str(origin))
    _git(work, "push", "-q", "origin", "main")
    return work


def _plan(tmp_path: Path, steps: list[dict[str, object]]) -> str:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(steps))
    return f"{sys.executable} {agent} {plan}"


def _value(x: object) -> dict[str, object]:
    return {"write": {f"{PROG}/code/value.py": VALUE.format(x=x)}, "summary": f"set x to {x}"}


def _run(repo: Path, command: str, iterations: int) -> int:
    return main(["run", "--repo", str(repo), "--program", "counter", "--proposer", "agent",
                 "--agent-command", command, "--iterations", str(iterations)])


def _state(repo: Path, ref: str = "memory/autoloop") -> statefile.StateFile:
    return statefile.parse_state(_git(repo, "show", f"{ref}:counter.md") + "\n", "counter.md")


def test_accept_reject_error_paths(counter_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = [
        {**_value(2.0), "lesson": "Larger x scores higher."},
        _value(0.5),
        {"write": {f"{PROG}/code/evaluate.py": "print('{\"score\": 99}')\n"}, "summary": "rewrite the evaluator"},
        {"write": {f"{PROG}/code/value.py": VALUE.format(x="HANG")}, "summary": "hang"},
        {"write": {f"{PROG}/code/value.py": VALUE.format(x="GARBAGE")}, "summary": "garbage"},
        _value(3.0),
    ]
    assert _run(counter_repo, _plan(tmp_path, steps), 6) == 0
    out = capsys.readouterr().out

    state = _state(counter_repo, "origin/memory/autoloop")
    machine = state.machine
    assert machine.iteration_count == 6
    assert machine.best_metric == 3.0
    assert machine.initial_metric == 1.0
    assert machine.recent_statuses == ("accepted", "rejected", "rejected", "error", "error", "accepted")
    assert machine.consecutive_errors == 0
    assert machine.paused is False and machine.completed is False
    assert machine.last_run is not None
    assert [e.iteration for e in state.history] == [6, 5, 4, 3, 2, 1]
    assert [e.status for e in state.history] == ["accepted", "error", "error", "rejected", "rejected", "accepted"]
    assert state.lessons == ("Larger x scores higher.",)
    text = _git(counter_repo, "show", "origin/memory/autoloop:counter.md")
    assert "Rejected before evaluation" in text and "code/evaluate.py" in text
    assert "timed out" in text
    assert "no JSON object" in text
    assert "(previous best: 1, delta: +1)" in text

    log = _git(counter_repo, "log", "--format=%s", "origin/autoloop/counter")
    assert log.splitlines()[:2] == [
        "[Autoloop: counter] Iteration 6: set x to 3.0",
        "[Autoloop: counter] Iteration 1: set x to 2.0",
    ]
    assert "x = 3.0" in _git(counter_repo, "show", f"origin/autoloop/counter:{PROG}/code/value.py")
    memory_log = _git(counter_repo, "log", "--format=%s", "origin/memory/autoloop").splitlines()
    assert len(memory_log) == 6
    # The user's checkout is untouched: still on main, clean, value unchanged.
    assert _git(counter_repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert _git(counter_repo, "status", "--porcelain") == ""
    assert (counter_repo / PROG / "code/value.py").read_text() == VALUE.format(x=1.0)
    assert "✅ counter · iteration 1 · accepted" in out
    # The summary ends with the next steps.
    said = " ".join(out.split())
    assert "next: `autoloop status counter` (its history), `autoloop edit counter` (steer it)" in said
    assert "kept changes are on branch autoloop/counter" in said
    # Run again without --program: nothing is due, and the message says how to run one anyway.
    assert main(["run", "--repo", str(counter_repo)]) == 1
    said = " ".join(capsys.readouterr().out.split())
    assert "nothing is due: counter (not due yet); `autoloop run --program NAME` runs one now" in said


def test_three_errors_pause_the_program(counter_repo: Path, tmp_path: Path) -> None:
    garbage = {"write": {f"{PROG}/code/value.py": VALUE.format(x="GARBAGE")}, "summary": "garbage"}
    assert _run(counter_repo, _plan(tmp_path, [garbage] * 4), 4) == 0
    machine = _state(counter_repo).machine
    assert machine.iteration_count == 3  # the run stops once the program is paused
    assert machine.paused is True
    assert machine.pause_reason and machine.pause_reason.startswith("3 consecutive errors")
    assert main(["schedule", "--repo", str(counter_repo), "--json"]) == 1


def test_pause_means_pause(counter_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pause", "counter", "--repo", str(counter_repo), "--reason", "holiday"]) == 0
    capsys.readouterr()
    # Naming the program is not enough: nothing runs, and the message says how to go on.
    assert _run(counter_repo, _plan(tmp_path, [_value(2.0)]), 1) == 1
    assert "counter is paused (holiday): `autoloop resume counter` clears the pause, or add --force" in (
        capsys.readouterr().out)
    assert _state(counter_repo).machine.iteration_count == 0
    # A forced run runs every iteration asked for, and its accepted candidate does not clear the pause.
    forced = ["run", "--repo", str(counter_repo), "--program", "counter", "--proposer", "agent", "--agent-command",
              _plan(tmp_path, [_value(2.0), _value(3.0)]), "--iterations", "2", "--force"]
    assert main(forced) == 0
    machine = _state(counter_repo).machine
    assert machine.recent_statuses == ("accepted", "accepted") and machine.best_metric == 3.0
    assert machine.paused is True and machine.pause_reason == "holiday"
    # Resume clears the pause and keeps the statuses as they happened.
    assert main(["resume", "counter", "--repo", str(counter_repo)]) == 0
    machine = _state(counter_repo).machine
    assert not machine.paused and machine.recent_statuses == ("accepted", "accepted")


def test_dry_run_records_nothing(counter_repo: Path, tmp_path: Path) -> None:
    command = _plan(tmp_path, [_value(5.0)])
    assert main(["run", "--repo", str(counter_repo), "--program", "counter", "--proposer", "agent",
                 "--agent-command", command, "--dry-run"]) == 0
    refs = _git(counter_repo, "for-each-ref", "--format=%(refname)")
    assert "memory/autoloop" not in refs
    assert "refs/heads/autoloop/counter" not in refs or _git(counter_repo, "rev-parse", "autoloop/counter") == _git(counter_repo, "rev-parse", "main")


def test_unknown_program_is_an_error(counter_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--repo", str(counter_repo), "--program", "nope"]) == 1
    assert "requested program 'nope' not found. Available programs: counter" in capsys.readouterr().err


def test_repo_origin_main_untouched(counter_repo: Path, tmp_path: Path) -> None:
    before = _git(counter_repo, "rev-parse", "origin/main")
    assert _run(counter_repo, _plan(tmp_path, [_value(4.0)]), 1) == 0
    _git(counter_repo, "fetch", "-q", "origin")
    assert _git(counter_repo, "rev-parse", "origin/main") == before
    assert git.Repo(counter_repo).active_branch.name == "main"


def test_symlink_out_of_the_worktree_is_rejected(counter_repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me")
    agent = tmp_path / "link_agent.sh"
    agent.write_text(f"rm {PROG}/code/value.py && ln -s {secret} {PROG}/code/value.py\n")
    assert _run(counter_repo, f"bash {agent}", 1) == 0
    text = _git(counter_repo, "show", "memory/autoloop:counter.md")
    assert "code/value.py is a symbolic link" in text and "do not read me" not in text
    assert _state(counter_repo).machine.recent_statuses == ("rejected",)


def test_same_program_race_keeps_one_candidate_and_both_records(counter_repo: Path, tmp_path: Path) -> None:
    origin = counter_repo.parent / "origin.git"
    clones = []
    for name in ("slow", "fast"):
        clone = tmp_path / name
        _git(tmp_path, "clone", "-q", str(origin), str(clone))
        _git(clone, "config", "user.name", name)
        _git(clone, "config", "user.email", f"{name}@example.invalid")
        clones.append(clone)
    slow_agent = tmp_path / "slow.sh"
    slow_agent.write_text(f"sleep 4\nprintf '{VALUE.format(x=5.0)}' > {PROG}/code/value.py\n")
    fast_agent = tmp_path / "fast.sh"
    fast_agent.write_text(f"printf '{VALUE.format(x=3.0)}' > {PROG}/code/value.py\n")

    def spawn(clone: Path, agent: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "autoloop_py", "run", "--repo", str(clone), "--program", "counter",
             "--proposer", "agent", "--agent-command", f"bash {agent}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )

    slow = spawn(clones[0], slow_agent)
    time.sleep(2)  # the slow run has prepared its branch and is inside its agent
    fast = spawn(clones[1], fast_agent)
    for run in (fast, slow):
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err.decode()
    reader = tmp_path / "reader"
    _git(tmp_path, "clone", "-q", str(origin), str(reader))
    _git(reader, "fetch", "-q", "origin", "memory/autoloop:memory/autoloop")
    state = statefile.parse_state(_git(reader, "show", "memory/autoloop:counter.md") + "\n")
    assert state.machine.iteration_count == 2
    assert sorted(state.machine.recent_statuses) == ["accepted", "rejected"]
    assert state.machine.best_metric == 3.0
    assert "another run advanced autoloop/counter first" in state.history[0].text
    assert "x = 3.0" in _git(reader, "show", f"origin/autoloop/counter:{PROG}/code/value.py")
    kept = _git(clones[0], "for-each-ref", "--format=%(refname)", "refs/autoloop/orphaned/")
    assert kept.startswith("refs/autoloop/orphaned/autoloop-counter-")


def test_a_candidate_that_cannot_be_committed_after_evaluation_is_recorded_as_an_error(
    counter_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Git refusing the evaluated candidate (a path no check foresaw, a full disk) loses neither the iteration nor its
    # cost: it is recorded as an error with the metric it scored, and nothing reaches the program branch.
    def refused(*_args: object, **_kwargs: object) -> None:
        raise GitError("`git commit` failed (exit 128): error: invalid path 'code/x'")

    monkeypatch.setenv("AUTOLOOP_ISOLATION", "none")
    monkeypatch.setattr(attempt, "keep_candidate", refused)
    assert _run(counter_repo, _plan(tmp_path, [_value(2.0)]), 1) == 0
    state = _state(counter_repo, "origin/memory/autoloop")
    entry = state.history[0]
    assert state.machine.recent_statuses == ("error",) and state.machine.best_metric == 1.0
    assert entry.metric == 2.0 and "could not be committed" in entry.text and "invalid path" in entry.text
    assert "autoloop/counter" not in _git(counter_repo, "ls-remote", "origin")
