"""End to end: `evaluation-holdout` on the counter program, with the loopback GitHub and the real PyGithub.

The search metric is x; the held-out one is −|x − 3|, which x = 5 worsens while improving the search metric.
With `holdout-must-not-drop: true` that candidate is not kept; the kept ones carry both values to the history,
the Machine State, the PR body, the status comment and `autoloop status`, and no prompt shows a held-out value.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))
from fakegithub import FakeGitHub  # noqa: E402
from test_run import PROG, _git, _plan, _state, _value, counter_repo  # noqa: E402,F401

from autoloop_py.cli import main  # noqa: E402
from autoloop_py.state.memory import MemoryStore  # noqa: E402
from tests.programs import program_md  # noqa: E402

REPO = "octo/counter"
TOKEN = "t0ken"
HOLDOUT = """\
import json, os
ns = {}
exec(open(os.path.join(os.environ["AUTOLOOP_PROGRAM_DIR"], "code/value.py")).read(), ns)
print(json.dumps({"score": -abs(ns["x"] - 3)}))
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as server:
        for name, value in {"GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": server.url,
                            "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "77"}.items():
            monkeypatch.setenv(name, value)
        yield server


def _with_holdout(repo: Path, must_not_drop: str) -> None:
    frontmatter = {"evaluation-timeout": 3, "ci-gate": "false",
                   "evaluation-holdout": 'python3 "$AUTOLOOP_PROGRAM_DIR/code/holdout.py"'}
    if must_not_drop:
        frontmatter["holdout-must-not-drop"] = must_not_drop
    text = program_md("Counter", "Make `x` as large as possible.", frontmatter=frontmatter,
                      protected=("code/evaluate.py", "code/holdout.py"))
    (repo / PROG / "program.md").write_text(text)
    (repo / PROG / "code/holdout.py").write_text(HOLDOUT)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "held-out evaluation")
    _git(repo, "push", "-q", "origin", "main")


def _run(repo: Path, command: str) -> None:
    assert main(["run", "--repo", str(repo), "--program", "counter", "--proposer", "agent",
                 "--agent-command", command, "--ci"]) == 0


def test_a_candidate_that_drops_the_held_out_metric_is_not_kept(
    counter_repo: Path, fake: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_holdout(counter_repo, "true")
    command = _plan(tmp_path, [_value(2.0), _value(5.0), _value(3.0)])
    _run(counter_repo, command)
    state = _state(counter_repo)
    assert state.machine.best_metric == 2.0 and state.machine.holdout_metric == -1.0
    first = state.history[0].text
    # The baseline x = 1 was measured held out (−2) to compare with; the candidate's −1 does not drop from it.
    assert "- **Holdout**: -1 (`score` held out; search 2, gap +3)" in first
    assert "- **Incumbent holdout**: -2" in first
    [pull] = fake.pulls[REPO]
    assert "| Held-out metric | -1 (search 2, gap +3) |" in pull["body"]

    _run(counter_repo, command)  # x = 5: search 5 beats 2, held out −2 drops from −1
    state = _state(counter_repo)
    rejected = state.history[0]
    assert rejected.status == "rejected" and state.machine.best_metric == 2.0
    assert "its held-out value drops below the best's" in rejected.text
    assert "drops from the best's -1 by more than `holdout-must-not-drop` allows (0)" in rejected.text
    assert "x = 5.0" not in _git(counter_repo, "show", f"autoloop/counter:{PROG}/code/value.py")
    capsys.readouterr()

    _run(counter_repo, command)  # x = 3: search 3, held out 0
    state = _state(counter_repo)
    assert state.history[0].status == "accepted"
    assert state.machine.best_metric == 3.0 and state.machine.holdout_metric == 0.0
    assert "| Holdout Metric | 0 |" in _git(counter_repo, "show", "memory/autoloop:counter.md")
    [pull] = fake.pulls[REPO]
    assert "| Held-out metric | 0 (search 3, gap +3) |" in pull["body"]
    [issue] = [i for i in fake.issues[REPO] if "pull_request" not in i]
    [status] = [c["body"] for c in fake.comments[REPO][issue["number"]] if "<!-- AUTOLOOP:STATUS -->" in c["body"]]
    assert "| Held-out metric | 0 (search 3, gap +3) |" in status

    capsys.readouterr()
    assert main(["status", "--repo", str(counter_repo)]) == 0
    out = capsys.readouterr().out
    assert "held-out" in out, out  # its value below it, in the column as wide as its widest figure
    assert main(["status", "counter", "--repo", str(counter_repo)]) == 0
    assert "Held out: 0 (search 3, gap +3)" in capsys.readouterr().out
    # No prompt the agent got shows a held-out value or bullet (the history it quotes leaves them out).
    memory = MemoryStore(counter_repo)
    prompts = [memory.read(path) or "" for path in memory.list("traces/counter/prompts/")]
    assert len(prompts) == 3
    shown = "\n".join(prompts)
    assert "set x to 5.0" in shown and "not kept: its held-out value drops below the best's" in shown
    for secret in ("**Holdout**", "**Incumbent holdout**", "held out;", "drops from the best's", "Holdout Metric"):
        assert secret not in shown


def test_without_must_not_drop_the_drop_is_recorded_and_the_candidate_kept(
    counter_repo: Path, fake: FakeGitHub, tmp_path: Path
) -> None:
    _with_holdout(counter_repo, "")
    command = _plan(tmp_path, [_value(5.0)])
    _run(counter_repo, command)
    state = _state(counter_repo)
    assert state.history[0].status == "accepted" and state.machine.best_metric == 5.0
    assert state.machine.holdout_metric == -2.0
    assert "- **Holdout**: -2 (`score` held out; search 5, gap +7)" in state.history[0].text
    assert "Incumbent holdout" not in state.history[0].text  # nothing to compare: the incumbent is not measured
