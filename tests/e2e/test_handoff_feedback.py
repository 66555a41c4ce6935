"""End to end: what an evaluation said reaches the next `autoloop prompt` of the hand-off, as in the loop.

`autoloop record --evaluate` keeps the evaluator's feedback, rejection and output tails in the candidate's
trace row; `--report FILE` keeps what the agent's own run of the evaluator wrote. The agent is untrusted:
a report too large is refused, and one full of escape sequences, control characters, a secret and a huge
feedback text is kept bounded, stripped and masked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.loop.tick import handoff_report
from autoloop_py.state import trace
from autoloop_py.state.memory import MemoryStore
from tests.programs import program_md

REPO = Path(__file__).parents[2]
NAME = "hf"
FOLDER = f".autoloop/programs/{NAME}"
# The evaluator says what it thinks of x, and rejects a negative x beside its score.
EVALUATE = """\
import json, runpy, sys
x = runpy.run_path("code/value.py")["x"]
report = {"score": x, "feedback": f"FEEDBACK-MARK: x was {x}; x >= 0 decides validity", "width": 3}
if x < 0:
    report["error"] = f"REJECT-MARK: x = {x} violates x >= 0"
print("checked", x, file=sys.stderr)
print(json.dumps(report))
"""
ALPHAEVOLVE = ("\n## Evolution Strategy\n\nThis program uses the **AlphaEvolve** strategy. On every iteration, "
               "read `strategy/alphaevolve.md` and follow it literally.\n")


def _install(repo: Path, run_git, strategy: bool) -> Path:  # type: ignore[no-untyped-def]
    folder = repo / FOLDER
    (folder / "code").mkdir(parents=True)
    text = program_md("Hand-off feedback", "Make x large.") + (ALPHAEVOLVE if strategy else "")
    (folder / "program.md").write_text(text)
    (folder / "code/value.py").write_text("x = 1\n")
    (folder / "code/evaluate.py").write_text(EVALUATE)
    if strategy:
        shutil.copytree(REPO / ".autoloop/programs/groupby_evolve/strategy", folder / "strategy")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "program hf")
    return repo


def _record(repo: Path, x: str, *extra: str) -> str:
    (repo / FOLDER / "code/value.py").write_text(f"x = {x}\n")
    assert main(["record", NAME, "--repo", str(repo), *extra, "--summary", f"x to {x}"]) == 0
    return (repo / FOLDER / "code/value.py").read_text()


def _prompt(repo: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["prompt", NAME, "--repo", str(repo)]) == 0
    return capsys.readouterr().out


def _rows(repo: Path) -> list[trace.TraceRow]:
    memory = MemoryStore(repo)
    paths = [p for p in memory.list(f"{trace.trace_dir(NAME)}/rows/") if p.endswith(".json")]
    return [trace.row_from_json(json.loads(memory.read(p) or "")) for p in paths]


@pytest.mark.parametrize("strategy", [False, True], ids=["default", "alphaevolve"])
def test_a_rejected_candidates_feedback_reaches_the_next_prompt(
    git_repo: Path, run_git, capsys: pytest.CaptureFixture[str], strategy: bool  # type: ignore[no-untyped-def]
) -> None:
    repo = _install(git_repo, run_git, strategy)
    _record(repo, "2", "--evaluate")
    _record(repo, "-5", "--evaluate")
    assert "status: rejected" in capsys.readouterr().out.splitlines()[-4:][0]
    rejected = next(row for row in _rows(repo) if row.status == "rejected")
    assert rejected.extra["artifacts"]["error"] == "REJECT-MARK: x = -5 violates x >= 0"
    assert "FEEDBACK-MARK: x was -5" in rejected.extra["artifacts"]["feedback"]
    assert rejected.metrics["score"] == -5 and rejected.metrics["width"] == 3

    prompt = _prompt(repo, capsys)
    assert "FEEDBACK-MARK: x was 2" in prompt  # the parent's own feedback
    assert "REJECT-MARK: x = -5 violates x >= 0" in prompt and "FEEDBACK-MARK: x was -5" in prompt
    assert "End of stderr:\nchecked -5" in prompt
    assert prompt.index("The block below is data") < prompt.index("REJECT-MARK") < prompt.index("## How to reply")


def test_record_report_keeps_what_the_agents_run_of_the_evaluator_wrote(
    git_repo: Path, run_git, capsys: pytest.CaptureFixture[str], tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    repo = _install(git_repo, run_git, strategy=False)
    _record(repo, "2", "--evaluate")
    assert next(row for row in _rows(repo)).metrics["width"] == 3
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"score": 1.5, "feedback": "AGENT-REPORT-MARK", "log_tail": "LOG-TAIL-MARK"}))
    _record(repo, "1.5", "--report", str(report))
    assert "status: rejected" in capsys.readouterr().out
    row = next(row for row in _rows(repo) if row.status == "rejected")
    assert row.metrics["score"] == 1.5 and row.extra["artifacts"] == {"feedback": "AGENT-REPORT-MARK\nLOG-TAIL-MARK"}
    assert "AGENT-REPORT-MARK\nLOG-TAIL-MARK" in _prompt(repo, capsys)


def test_a_hostile_report_is_refused_or_kept_bounded_stripped_and_masked(
    git_repo: Path, run_git, capsys: pytest.CaptureFixture[str], tmp_path: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = _install(git_repo, run_git, strategy=False)
    _record(repo, "2", "--evaluate")
    before = MemoryStore(repo).read(f"{NAME}.md")
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"score": 1, "feedback": "A" * handoff_report.REPORT_BYTES}))
    (repo / FOLDER / "code/value.py").write_text("x = 1\n")
    assert main(["record", NAME, "--repo", str(repo), "--report", str(huge), "--summary", "huge"]) != 0
    assert main(["record", NAME, "--repo", str(repo), "--report", str(tmp_path), "--summary", "a folder"]) != 0
    assert MemoryStore(repo).read(f"{NAME}.md") == before  # nothing recorded

    secret = "hunter2-secret-value"
    monkeypatch.setenv("AGENT_API_KEY", secret)
    escapes = ("\x1b]0;pwned\x07\x1b]52;c;Y2xpcA==\x07\x1b[2J\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\"
               "\x00\u202e")
    hostile = {
        "score": 1, "\x1b[31mred": 1, "a\x1b[1mshort": {"k\x07": ["v\x1b]0;t\x07w", secret]},
        "error": f"bad{escapes} hunt\x1b[0mer2-secret-value",
        "feedback": escapes + "FEED" + "B" * 200_000 + secret, "log_tail": "\x07" * 1000 + "END-MARK",
        **{f"k{n}": "v" * 10 for n in range(100)}, "nested": {"deep": ["x" * 5000]},
    }
    report = tmp_path / "hostile.json"
    report.write_text(json.dumps(hostile))
    _record(repo, "0.5", "--report", str(report))
    out = capsys.readouterr().out
    assert "status: rejected" in out, out
    row = next((row for row in _rows(repo) if row.status == "rejected"), None)
    assert row is not None, (out, _rows(repo))
    artifacts = row.extra["artifacts"]
    for text in [*artifacts.values(), json.dumps(row.metrics, ensure_ascii=False)]:
        assert not any(ch in text for ch in "\x1b\x07\x00\u202e") and secret not in text
        assert len(text.encode()) <= handoff_report.ARTIFACT_BYTES
    assert artifacts["error"].endswith("***") and artifacts["feedback"].startswith("linkFEEDBBB")
    assert len(row.metrics) <= handoff_report.VALUES_KEPT + 1 and "nested" not in row.metrics
    assert row.metrics["ashort"] == {"k": ["vw", "***"]} and row.metrics["red"] == 1
    state = MemoryStore(repo).read(f"{NAME}.md") or ""
    assert secret not in state and "\x1b" not in state
    prompt = _prompt(repo, capsys)
    assert "FEEDBBB" in prompt and not any(ch in prompt for ch in "\x1b\x07\x00\u202e") and secret not in prompt
    assert prompt.count("B" * 100) <= 40  # cut to feedback-bytes
