"""End to end: the default branch moves under the best (its evaluator halves every score); the next tick
re-evaluates the branch's tip once, re-bases Best Metric, and the state, the PR body, the status comment and
`autoloop status` say the PR is stale and why. Loopback GitHub, real PyGithub."""

from __future__ import annotations

import json
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


def test_the_split_flow_with_a_ci_gate_re_checks_the_best_and_publish_records_it(tmp_path: Path,
                                                                                   fake: FakeGitHub) -> None:
    """What the Actions workflow does: `run --outcome-dir --ci` proposes, `publish --ci` records; the CI gate is on."""
    from tests.e2e.test_publish import _clone, _origin_with_counter, _propose_ci
    from tests.e2e.test_publish import _state as origin_state

    origin = _origin_with_counter(tmp_path)
    command = _plan(tmp_path, [_value(4.0), _value(3.0), _value(2.5)])

    def tick(name: str) -> dict[str, object]:
        _propose_ci(origin, _clone(origin, tmp_path / f"p{name}"), command, tmp_path / f"o{name}", fake)
        assert main(["publish", "--repo", str(_clone(origin, tmp_path / f"q{name}")), str(tmp_path / f"o{name}"),
                     "--ci", "--program", "counter"]) == 0
        return json.loads((tmp_path / f"o{name}/outcome.json").read_text())

    assert tick("1")["recheck"] is None  # x = 4 is pending-ci
    fake.add_check_run(REPO, _git(origin, "rev-parse", "autoloop/counter"), "tests", conclusion="success")
    tick("2")  # x = 4 accepted once its checks passed; x = 3 is worse
    machine = origin_state(origin).machine
    first_base = _git(origin, "rev-parse", "main")
    assert machine.best_metric == 4.0 and machine.best_base == first_base and machine.stale_reason is None

    # Main moves: the evaluator now halves every score, so the kept x = 4 scores 2.
    seed = _clone(origin, tmp_path / "seed2")
    (seed / PROG / "code/evaluate.py").write_text(EVALUATE.replace('ns["x"]', 'ns["x"] / 2'))
    _git(seed, "commit", "-qam", "evaluator: halve the score")
    _git(seed, "push", "-q", "origin", "main")
    moved = _git(origin, "rev-parse", "main")
    recheck = tick("3")["recheck"]  # the proposing job measured the best again; x = 2.5 scores 1.25 < 2
    assert recheck is not None and recheck["base"] == moved and (recheck["recorded"], recheck["best"]) == (4.0, 2.0)
    state = origin_state(origin)
    machine = state.machine
    assert machine.best_metric == 2.0 and machine.best_base == moved and machine.iteration_count == 3
    assert machine.stale_reason is not None and f"moved from {first_base[:12]} to {moved[:12]}" in machine.stale_reason
    assert "did not improve on best 2" in state.history[0].text
    status, body = _comment_and_pr(fake)
    assert "> This PR is stale: the default branch moved from" in body and "| ⚠️ Stale |" in status

