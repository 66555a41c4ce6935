"""The charts where maintainers already look: status comment, draft PR body and job summary, via loopback GitHub."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))
from fakegithub import FakeGitHub  # noqa: E402
from test_run import PROG, _git, _plan, _value, counter_repo  # noqa: E402,F401

from autoloop_py.cli import main  # noqa: E402
from tests.mermaid_grammar import check, mermaid_blocks  # noqa: E402

REPO = "octo/counter"
TOKEN = "t0ken"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as server:
        for name, value in {"GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": server.url,
                            "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "77",
                            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}.items():
            monkeypatch.setenv(name, value)
        yield server


def test_status_comment_pr_and_job_summary_carry_valid_mermaid(counter_repo: Path, fake: FakeGitHub, tmp_path: Path) -> None:
    path = counter_repo / PROG / "program.md"
    path.write_text(path.read_text().replace("evaluation-timeout: 3\n", "evaluation-timeout: 3\nci-gate: false\n"))
    _git(counter_repo, "commit", "-qam", "configure")
    _git(counter_repo, "push", "-q", "origin", "main")
    command = _plan(tmp_path, [_value(2.0), _value(0.5), _value(3.0)])
    for _ in range(3):
        assert main(["run", "--repo", str(counter_repo), "--program", "counter", "--proposer", "agent",
                     "--agent-command", command, "--ci"]) == 0
    [issue] = [i for i in fake.issues[REPO] if "pull_request" not in i]
    [status] = [c["body"] for c in fake.comments[REPO][issue["number"]] if "<!-- AUTOLOOP:STATUS -->" in c["body"]]
    [pull] = fake.pulls[REPO]
    summary = (tmp_path / "summary.md").read_text()
    newest_summary = summary[summary.rindex("## 🤖 Autoloop"):]
    for text in (status, pull["body"], newest_summary):
        blocks = mermaid_blocks(text)
        assert [b.splitlines()[0] for b in blocks] == ["xychart-beta", "flowchart LR"], text
        assert [check(b) for b in blocks] == [[], []]
    chart, lineage = mermaid_blocks(status)
    # The baseline and three candidates were evaluated; 3.0 is the best and descends from 2.0.
    assert chart.count(",") >= 3 * 3 and "line [" in chart and ", 3]" in chart
    assert "<br/>3" in lineage and "<br/>2" in lineage
    assert summary.count("## 🤖 Autoloop: `counter`") == 3  # one section per job
