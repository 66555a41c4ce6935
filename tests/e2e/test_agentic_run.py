"""End to end: GitHub Agentic Workflows runs simulated, where the repo-memory folder is the only thing kept.

Each run starts from a fresh clone of an origin that refuses every push (the agent job is read-only),
clones nothing else, and hands the next run only the memory folder, as gh-aw's repo-memory does.
The scheduler step, `autoloop prompt`, the agent's edit and `autoloop record` run as the workflow runs
them; state must survive across runs and selection must honour paused and completed programs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from programs import program_md

from autoloop_py.cli import main
from autoloop_py.github import agentic_scheduler

EVALUATE = 'import json, runpy\nprint(json.dumps({"score": runpy.run_path("code/value.py")["x"]}))\n'


@pytest.fixture
def origin(git_repo: Path, tmp_path: Path, run_git: Callable[..., str]) -> Path:
    """Returns a bare origin holding programs alpha (target-metric 3) and beta, which rejects every push."""
    for name, front in (("alpha", {"target-metric": 3}), ("beta", {})):
        folder = git_repo / ".autoloop" / "programs" / name
        (folder / "code").mkdir(parents=True)
        (folder / "program.md").write_text(program_md(name.title(), f"Raise x of {name}.", frontmatter=front))
        (folder / "code" / "value.py").write_text("x = 1\n")
        (folder / "code" / "evaluate.py").write_text(EVALUATE)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "two programs")
    bare = tmp_path / "origin.git"
    run_git(tmp_path, "clone", "-q", "--bare", str(git_repo), str(bare))
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho push >> '{tmp_path / 'push-attempts'}'\necho 'read-only' >&2\nexit 1\n")
    hook.chmod(0o755)
    return bare


def fresh_checkout(origin: Path, where: Path, run_git: Callable[..., str]) -> Path:
    """Returns a new clone of origin, as the agent job's checkout."""
    run_git(where.parent, "clone", "-q", str(origin), str(where))
    run_git(where, "config", "user.name", "agent")
    run_git(where, "config", "user.email", "agent@example.invalid")
    return where


def schedule(repo: Path, memory: Path, output: Path) -> tuple[int, dict[str, object] | None]:
    """Runs the workflow's scheduler step; returns its exit code and JSON."""
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "AUTOLOOP_PROGRAM")}
    env.update(AUTOLOOP_MEMORY_DIR=str(memory), AUTOLOOP_OUTPUT=str(output),
               AUTOLOOP_ISSUE_PROGRAMS_DIR=str(output.parent / "issue-programs"))
    done = subprocess.run([sys.executable, "-m", agentic_scheduler.__name__, "--repo-root", str(repo)],
                          env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, json.loads(output.read_text()) if output.exists() else None


def agent_iteration(repo: Path, program: str, x: int, capsys: pytest.CaptureFixture[str]) -> str:
    """Runs what the prompt asks: `autoloop prompt`, an edit of the Target, `autoloop record --evaluate`."""
    assert main(["prompt", program, "--repo", str(repo)]) == 0
    assert "code/value.py" in capsys.readouterr().out
    (repo / ".autoloop" / "programs" / program / "code" / "value.py").write_text(f"x = {x}\n")
    assert main(["record", program, "--repo", str(repo), "--evaluate", "--summary", f"x to {x}"]) == 0
    return capsys.readouterr().out


def test_state_survives_runs_only_through_the_memory_folder(
    origin: Path, tmp_path: Path, run_git: Callable[..., str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    memory = tmp_path / "gh-aw" / "repo-memory" / "autoloop"
    memory.mkdir(parents=True)
    monkeypatch.setenv("AUTOLOOP_MEMORY_DIR", str(memory))  # the workflow's `env:`
    before = run_git(origin, "for-each-ref")

    # Run 1: nothing has run; alpha comes first. A maintainer pauses beta in the same run.
    repo = fresh_checkout(origin, tmp_path / "run1", run_git)
    code, selection = schedule(repo, memory, tmp_path / "run1.json")
    assert (code, selection["selected"], selection["head_branch"]) == (0, "alpha", "autoloop/alpha")
    out = agent_iteration(repo, "alpha", 2, capsys)
    assert "status: accepted" in out and "completed: false" in out
    assert main(["pause", "beta", "--repo", str(repo), "--reason", "flaky evaluator"]) == 0
    # The state files, and alpha's trace (its candidate's row, with what the evaluation said).
    assert sorted(p.name for p in memory.iterdir()) == ["alpha.md", "beta.md", "traces"]
    assert [p.name for p in (memory / "traces").iterdir()] == ["alpha"]
    assert run_git(repo, "branch", "--list", "memory/autoloop") == ""  # nothing was written to git

    # Run 2: a new checkout; only the folder carries state. beta is paused, alpha reaches its target.
    repo = fresh_checkout(origin, tmp_path / "run2", run_git)
    code, selection = schedule(repo, memory, tmp_path / "run2.json")
    assert (code, selection["selected"]) == (0, "alpha")
    assert {"name": "beta", "reason": "paused: flaky evaluator"} in selection["skipped"]
    assert main(["state", "alpha", "--repo", str(repo)]) == 0
    assert "| Iteration Count | 1 |" in capsys.readouterr().out
    out = agent_iteration(repo, "alpha", 3, capsys)
    assert "status: accepted" in out and "completed: true" in out

    # Run 3: alpha is completed and beta paused: nothing is due, the agent is skipped (exit 1).
    repo = fresh_checkout(origin, tmp_path / "run3", run_git)
    code, selection = schedule(repo, memory, tmp_path / "run3.json")
    assert code == 1 and selection["selected"] is None
    reasons = {s["name"]: s["reason"] for s in selection["skipped"]}
    assert reasons == {"alpha": "completed: target metric reached", "beta": "paused: flaky evaluator"}
    text = (memory / "alpha.md").read_text()
    assert "| Iteration Count | 2 |" in text and "| Best Metric | 3 |" in text

    assert run_git(origin, "for-each-ref") == before
    assert not (tmp_path / "push-attempts").exists(), "autoloop tried to push from the read-only job"


def test_the_ci_gate_keeps_a_candidate_pending_until_its_checks_are_read(
    origin: Path, tmp_path: Path, run_git: Callable[..., str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    memory = tmp_path / "gh-aw" / "repo-memory" / "autoloop"
    monkeypatch.setenv("AUTOLOOP_MEMORY_DIR", str(memory))
    repo = fresh_checkout(origin, tmp_path / "run", run_git)

    def record(x: int) -> str:
        (repo / ".autoloop/programs/beta/code/value.py").write_text(f"x = {x}\n")
        assert main(["record", "beta", "--repo", str(repo), "--evaluate", "--pending-ci", "--summary", f"x {x}"]) == 0
        return capsys.readouterr().out

    def ci(*args: str) -> str:
        assert main(["ci", "beta", "--repo", str(repo), *args]) == 0
        return capsys.readouterr().out

    assert "status: pending-ci" in record(2)
    assert ci("--checks", "pending").startswith("action: wait")
    out = ci("--checks", "failure", "--failing", "tests (3.12)", "--first-error", "E   assert 2 == 3")
    assert out.startswith("action: fix") and "attempt 1 of 5" in out
    assert "Failure signature: tests (3.12): E assert 2 == 3" in out
    assert "status: pending-ci" in record(4)  # the fix, kept and pushed again
    out = ci("--checks", "failure", "--failing", "tests (3.12)", "--first-error", "E   assert 2 == 3")
    assert out.startswith("action: paused") and "stuck in CI fix loop" in out

    code, selection = schedule(repo, memory, tmp_path / "sel.json")
    assert code == 0 and selection["selected"] == "alpha"
    assert any(s["name"] == "beta" and s["reason"].startswith("paused: stuck in CI fix loop") for s in selection["skipped"])

    assert main(["resume", "beta", "--repo", str(repo)]) == 0
    capsys.readouterr()
    assert "status: pending-ci" in record(6)
    out = ci("--checks", "success")
    assert out.startswith("action: accepted")
    text = (memory / "beta.md").read_text()
    assert "| Best Metric | 6 |" in text


def test_hand_off_commands_skip_a_broken_program_and_find_the_schedulers_issue_programs(
    origin: Path, tmp_path: Path, run_git: Callable[..., str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    memory = tmp_path / "memory"
    monkeypatch.setenv("AUTOLOOP_MEMORY_DIR", str(memory))
    repo = fresh_checkout(origin, tmp_path / "run", run_git)
    broken = repo / ".autoloop/programs/broken.md"
    broken.write_text("# Broken\n\n## Goal\n\nNothing to change.\n")
    issues = tmp_path / "gh-aw" / "issue-programs"
    issues.mkdir(parents=True)
    (issues / "tidy-readme.md").write_text(
        "## Goal\n\nShorten the README.\n\n## Target\n\n- `README.md`\n\n## Evaluation\n\n"
        "```bash\nwc -c < README.md | python3 -c \"import sys; print('{\\\"size\\\": %s}' % sys.stdin.read().strip())\"\n```\n\n"
        "The metric is `size`. Lower is better.\n"
    )
    (tmp_path / "gh-aw" / "autoloop.json").write_text(json.dumps({"issue_programs": {"tidy-readme": 42}}))
    monkeypatch.setenv("AUTOLOOP_ISSUE_PROGRAMS_DIR", str(issues))
    monkeypatch.setenv("AUTOLOOP_OUTPUT", str(tmp_path / "gh-aw" / "autoloop.json"))

    assert main(["prompt", "alpha", "--repo", str(repo)]) == 0
    captured = capsys.readouterr()
    assert "skipping a broken program:" in captured.err and "broken.md" in captured.err
    assert main(["pause", "alpha", "--repo", str(repo)]) == 0
    assert "alpha paused" in capsys.readouterr().out

    assert main(["state", "broken", "--repo", str(repo)]) == 1
    assert ".autoloop/programs/broken.md" in capsys.readouterr().err

    broken.unlink()  # an untracked file would count as a change outside the issue program's Target
    assert main(["prompt", "tidy-readme", "--repo", str(repo)]) == 0
    assert "Shorten the README." in capsys.readouterr().out
    (repo / "README.md").write_text("# r\n")
    assert main(["record", "tidy-readme", "--repo", str(repo), "--evaluate", "--summary", "shorter"]) == 0
    assert "status: accepted" in capsys.readouterr().out
    assert (memory / "tidy-readme.md").is_file()
