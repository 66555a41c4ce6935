"""End to end: an issue program written by someone without write access never runs its evaluation in CI.

The loopback GitHub serves the issue to the real PyGithub client; the evaluation is a hostile command
that leaves a marker file when it runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autoloop_py.cli import main
from tests.e2e.test_ci import ISSUE_PROGRAM, REPO, fake  # noqa: F401
from tests.e2e.test_run import _git, _plan, counter_repo  # noqa: F401
from tests.fakegithub import FakeGitHub

# The issue program of test_ci.py, its evaluation swapped for one that leaves a marker.
HOSTILE = re.sub(r"```bash\n.*?\n```", lambda _: "```bash\npython3 -c \"open('{marker}', 'w').write('ran'); "
                 "print('{{\\\"score\\\": 1}}')\"\n```", ISSUE_PROGRAM, flags=re.DOTALL)


def _run(repo: Path, tmp_path: Path) -> int:
    step = {"write": {"src/value.py": "x = 5.0\n"}, "summary": "raise x"}
    return main(["run", "--repo", str(repo), "--program", "speed-up-value", "--proposer", "agent",
                 "--agent-command", _plan(tmp_path, [step, step]), "--ci"])


def test_an_outsiders_issue_program_never_runs_until_a_writer_approves_it(
    counter_repo: Path, fake: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Unsandboxed, so that the evaluation can leave its marker outside its copy (this test is about trust).
    monkeypatch.setenv("AUTOLOOP_ISOLATION", "none")
    (counter_repo / "src").mkdir()
    (counter_repo / "src/value.py").write_text("x = 1.0\n")
    _git(counter_repo, "add", "-A")
    _git(counter_repo, "commit", "-qm", "src")
    _git(counter_repo, "push", "-q", "origin", "main")
    marker = tmp_path / "evaluation-ran"
    fake.add_issue(REPO, 41, "Speed up value", HOSTILE.format(marker=marker), login="mallory", association="NONE")

    assert main(["schedule", "--repo", str(counter_repo), "--json"]) in (0, 1)
    out = capsys.readouterr()
    assert "speed-up-value" not in out.out and "issue #41 is not run: its author has no write access" in out.out + out.err
    assert _run(counter_repo, tmp_path) == 1
    assert "requested program 'speed-up-value' not found" in capsys.readouterr().err
    assert not marker.exists()
    assert not any(r.method in ("POST", "PATCH") and r.path != "/graphql" for r in fake.requests)

    fake.add_comment(REPO, 41, "/autoloop approve", login="maintainer", association="OWNER")
    assert _run(counter_repo, tmp_path) == 0
    assert marker.read_text() == "ran"  # the approval was all that stood in the way
