"""A hostile agent writes paths git refuses or misstores inside a glob Target: a `.GIT` folder with a config that
names a payload, a `git~1` folder (`.git` on NTFS), a second spelling of a Target file (`Helper.py` beside
`helper.py`). Each is refused before evaluation (the candidate's code, which would write a marker, never runs), the
iteration is recorded as rejected naming each path, and the checkout and its origin are unchanged but for the
runner's own record."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoloop_py.state import file as statefile
from tests.programs import program_md

PROG = ".autoloop/programs/counter"
VALUE = "# EVOLVE-BLOCK-START\nx = {x}\n# EVOLVE-BLOCK-END\n"
EVALUATE = 'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n'
AGENT = r"""
set -u
mkdir -p {prog}/code/lib/.GIT {prog}/code/lib/git~1
printf '[core]\n\tfsmonitor = {payload}\n' > {prog}/code/lib/.GIT/config
printf '[core]\n\tfsmonitor = {payload}\n' > {prog}/code/lib/git~1/config
echo 'def helper(): return 9' > {prog}/code/lib/Helper.py
cat > {prog}/code/value.py <<'VALUE_END'
# EVOLVE-BLOCK-START
x = 5.0
open("{marker}", "w").write("the candidate was evaluated")
# EVOLVE-BLOCK-END
VALUE_END
echo "SUMMARY: paths git refuses" > "$AUTOLOOP_REPLY_FILE"
"""


@pytest.fixture
def world(tmp_path: Path, isolated_git_config: None, run_git) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    run_git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    run_git(tmp_path, "init", "-q", "-b", "main", str(work))
    run_git(work, "config", "user.name", "Test")
    run_git(work, "config", "user.email", "test@example.invalid")
    folder = work / PROG
    (folder / "code/lib").mkdir(parents=True)
    front = {"evaluation-timeout": 20}
    (folder / "program.md").write_text(
        program_md("Counter", "Make `x` large.", frontmatter=front, target=("code/value.py", "code/lib/**"))
    )
    (folder / "code/value.py").write_text(VALUE.format(x=1.0))
    (folder / "code/lib/helper.py").write_text("def helper(): return 1\n")
    (folder / "code/evaluate.py").write_text(EVALUATE)
    run_git(work, "add", "-A")
    run_git(work, "commit", "-qm", "initial")
    run_git(work, "remote", "add", "origin", str(origin))
    run_git(work, "push", "-q", "origin", "main")
    marker, payload = tmp_path / "MARKER", tmp_path / "payload.sh"
    payload.write_text(f"#!/bin/sh\necho payload >> {marker}\n")
    payload.chmod(0o755)
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT.format(prog=PROG, payload=payload, marker=marker))
    return {"work": work, "origin": origin, "marker": marker, "agent": agent}


def _checkout(work: Path) -> bytes:
    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=work, capture_output=True, check=True).stdout

    refs = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/main", "refs/tags")
    return (work / ".git/config").read_bytes() + (work / ".git/HEAD").read_bytes() + refs + git(
        "status", "--porcelain", "--ignored"
    )


def test_paths_git_refuses_are_rejected_before_evaluation(world: dict[str, Path]) -> None:
    work, origin = world["work"], world["origin"]
    before, origin_main = _checkout(work), subprocess.check_output(["git", "rev-parse", "main"], cwd=origin)
    # As the runner's user: the agent's script lies in tmp_path, which a root runner's uid per agent cannot enter.
    env = {**os.environ, "AUTOLOOP_ISOLATION": "none", "AUTOLOOP_AGENT_COMMAND": f"bash {world['agent']}",
           "AUTOLOOP_SLOT_USER": "off"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "autoloop_py", "run", "--repo", str(work), "--program", "counter", "--proposer", "agent",
         "--iterations", "1"], env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert not world["marker"].exists(), world["marker"].read_text()
    state = statefile.parse_state(
        subprocess.check_output(["git", "show", "refs/heads/memory/autoloop:counter.md"], cwd=origin, text=True),
        "counter.md",
    )
    note = state.history[0].text
    assert state.machine.recent_statuses == ("rejected",) and state.machine.best_metric == 1.0
    assert "Rejected before evaluation" in note
    assert "`.GIT` is git's own directory name" in note and "`git~1` is git's own directory name" in note
    assert f"'{PROG}/code/lib/Helper.py' and '{PROG}/code/lib/helper.py' differ only in case" in note
    assert _checkout(work) == before
    assert subprocess.check_output(["git", "rev-parse", "main"], cwd=origin) == origin_main
    refs = subprocess.check_output(["git", "for-each-ref", "--format=%(refname)"], cwd=origin, text=True).split()
    assert set(refs) == {"refs/heads/main", "refs/heads/memory/autoloop"}  # no program branch: nothing kept
