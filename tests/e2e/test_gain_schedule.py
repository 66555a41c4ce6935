"""End to end: `schedule-policy: gain` orders `schedule` by schedule.md, caps a tick, and a run counts itself."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.schedule_table import Arm, parse_schedule_table, render_schedule_table
from tests.programs import program_md

EVALUATE = 'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n'


def _program(repo: Path, name: str) -> None:
    folder = repo / ".autoloop/programs" / name
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(program_md(name.title(), "Make `x` large."))
    (folder / "code/value.py").write_text("# EVOLVE-BLOCK-START\nx = 1.0\n# EVOLVE-BLOCK-END\n")
    (folder / "code/evaluate.py").write_text(EVALUATE)


def _matrix(repo: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["schedule", "--repo", str(repo), "--matrix"]) == 0
    return json.loads(capsys.readouterr().out)["program"]


def test_gain_policy_follows_the_table_caps_the_tick_and_records_runs(
    git_repo_with_origin: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = git_repo_with_origin
    for name in ("AUTOLOOP_PROGRAM", "AUTOLOOP_SCHEDULE_POLICY", "AUTOLOOP_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name in ("alpha", "beta"):
        _program(repo, name)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "programs"], cwd=repo, check=True)
    subprocess.run(["git", "push", "-q", "origin", "main"], cwd=repo, check=True)
    # Most overdue first (both never ran: by name) is the default.
    assert _matrix(repo, capsys) == ["alpha", "beta"]

    (repo / ".autoloop/config.yaml").write_text("schedule-policy: gain\nmax-programs-per-tick: 1\n")
    # A table edited by hand: alpha gained nothing in 20 iterations, beta kept improving.
    table = {"alpha": Arm("alpha", 20, 0.0, 20, 0.0), "beta": Arm("beta", 20, 2.0, 20, 0.0)}
    MemoryStore(repo).commit({"schedule.md": render_schedule_table(table)}, "a hand-edited schedule")
    assert _matrix(repo, capsys) == ["beta"]
    monkeypatch.setenv("AUTOLOOP_SCHEDULE_POLICY", "overdue")
    assert _matrix(repo, capsys) == ["alpha"]
    monkeypatch.delenv("AUTOLOOP_SCHEDULE_POLICY")

    # A run counts itself in the table: one more iteration of alpha, the other row as it was.
    assert main(["run", "--repo", str(repo), "--program", "alpha", "--proposer", "tune"]) == 0
    arms = parse_schedule_table(MemoryStore(repo).read("schedule.md") or "")
    assert arms["beta"] == table["beta"]
    assert arms["alpha"].iterations == pytest.approx(20 * 0.95 + 1) and arms["alpha"].minutes == pytest.approx(20)
