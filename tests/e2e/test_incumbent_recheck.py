"""End to end: the default branch moves under the best (its evaluator halves every score); the next tick
re-evaluates the branch's tip once, re-bases Best Metric, and the state, the PR body, the status comment and
`autoloop status` say the PR is stale and why. Loopback GitHub, real PyGithub."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))
from fakegithub import FakeGitHub  # noqa: E402
from test_run import EVALUATE, PROG, _git, _plan, _state, _value, counter_repo  # noqa: E402,F401

from autoloop_py.cli import main  # noqa: E402

REPO = "octo/counter"
TOKEN = "t0ken"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as server:
        for name, value in {"GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": server.url,
                            "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "77"}.items():
            monkeypatch.setenv(name, value)
        yield server


def _run(repo: Path, command: str) -> None:
    assert main(["run", "--repo", str(repo), "--program", "counter", "--proposer", "agent",
                 "--agent-command", command, "--ci"]) == 0


def _comment_and_pr(fake: FakeGitHub) -> tuple[str, str]:
    [issue] = [i for i in fake.issues[REPO] if "pull_request" not in i]
    [status] = [c["body"] for c in fake.comments[REPO][issue["number"]] if "<!-- AUTOLOOP:STATUS -->" in c["body"]]
    [pull] = fake.pulls[REPO]
    return status, pull["body"]


def test_a_moved_main_that_breaks_the_best_is_reported_on_the_next_tick(
    counter_repo: Path, fake: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = counter_repo / PROG / "program.md"
    program.write_text(program.read_text().replace("evaluation-timeout: 3\n", "evaluation-timeout: 3\nci-gate: false\n"))
    _git(counter_repo, "commit", "-qam", "no CI gate")
    _git(counter_repo, "push", "-q", "origin", "main")
    first_base = _git(counter_repo, "rev-parse", "HEAD")
    command = _plan(tmp_path, [_value(4.0), _value(3.0), _value(2.5), _value(5.0)])
    _run(counter_repo, command)
    state = _state(counter_repo)
    assert state.machine.best_metric == 4.0 and state.machine.best_base == first_base
    assert state.machine.stale_reason is None
    _run(counter_repo, command)  # main has not moved: nothing is re-checked (x = 3 is simply worse)
    assert _state(counter_repo).machine.best_metric == 4.0

    # Main moves: the evaluator now halves every score, so the kept x = 4 scores 2.
    (counter_repo / PROG / "code/evaluate.py").write_text(EVALUATE.replace('ns["x"]', 'ns["x"] / 2'))
    _git(counter_repo, "commit", "-qam", "evaluator: halve the score")
    _git(counter_repo, "push", "-q", "origin", "main")
    moved = _git(counter_repo, "rev-parse", "HEAD")
    _run(counter_repo, command)  # x = 2.5 scores 1.25: judged against the re-based 2, not the stale 4
    state = _state(counter_repo)
    machine = state.machine
    assert machine.best_metric == 2.0 and machine.best_base == moved and machine.iteration_count == 3
    assert machine.stale_reason is not None
    assert f"the default branch moved from {first_base[:12]} to {moved[:12]}" in machine.stale_reason
    assert "the best's code now scores 2, short of the recorded 4: Best Metric re-based" in machine.stale_reason
    assert "did not improve on best 2" in state.history[0].text
    status, body = _comment_and_pr(fake)
    assert "> This PR is stale: the default branch moved from" in body and "| ⚠️ Stale |" in body
    assert "| Current metric | 2 |" in body
    assert "| ⚠️ Stale | the default branch moved" in status and "| Best metric | 2 |" in status
    capsys.readouterr()
    assert main(["status", "counter", "--repo", str(counter_repo)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "⚠️ stale: the default branch moved" in out and "Best Metric re-based" in out

    # x = 5 scores 2.5: it beats the re-based best (not the stale 4), is kept, and the PR is no longer stale.
    _run(counter_repo, command)
    machine = _state(counter_repo).machine
    assert machine.best_metric == 2.5 and machine.stale_reason is None and machine.best_base == moved
    status, body = _comment_and_pr(fake)
    assert "stale" not in body.lower() and "Stale" not in status
