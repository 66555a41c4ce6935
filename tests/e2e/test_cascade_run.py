"""End to end: circle_packing's two stages. An invalid packing stops at the validity stage (a rejection, no pause),
the state file and the HTML report say which stage stopped it, and a valid one goes through both stages. Under the
documented stage example, wrong candidates are rejections with the stage's reason, however many in a row."""

from __future__ import annotations

import random
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from autoloop_py.cli import main
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.proposers.base import Proposal, ProposalRequest, Proposer
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from tests.programs import program_md

REPO = Path(__file__).parents[2]
NAME = "circle_packing"
FOLDER = f".autoloop/programs/{NAME}"
PACKING = f"{FOLDER}/code/packing.py"
START = datetime(2026, 3, 4, 5, 6, tzinfo=timezone.utc)


class _Overlap:
    """Grows every radius past what fits (an invalid packing), or shrinks them a little (valid, worse)."""

    name = "tune"

    def __init__(self, grow: bool) -> None:
        self.grow = grow

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        source = request.files[PACKING]
        change = "[r + 0.05 for r in radii]" if self.grow else "[r * 0.99 for r in radii]"
        # The candidate's own output carries a terminal escape (it reaches the trace's stdout tail).
        source = source.replace("def construct_packing", "print('\\x1b]0;pwned\\x07 hi')\n\n\ndef construct_packing", 1)
        return Proposal({PACKING: source.replace("    return radii\n", f"    return {change}\n")}, f"radii {change}")


def _factory(grow: bool) -> Any:
    def make(name: str, **kwargs: object) -> Proposer:
        return _Overlap(grow)

    return make


def test_an_invalid_packing_stops_at_the_validity_stage(git_repo: Path, run_git, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.copytree(REPO / FOLDER, git_repo / FOLDER, ignore=shutil.ignore_patterns("__pycache__"))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "circle packing")
    program = load_program(git_repo, Path(FOLDER) / "program.md")
    for i, grow in enumerate([True, True, True, False]):
        run_iteration(git_repo, program, RunOptions(proposer_factory=_factory(grow)), START + timedelta(minutes=i))
    state = statefile.parse_state(MemoryStore(git_repo).read(f"{NAME}.md") or "", f"{NAME}.md")
    assert not state.machine.paused  # three invalid packings in a row are rejections, not errors
    entries = {e.iteration: e.text for e in state.history if e.is_detailed}
    for iteration in (1, 2, 3):
        assert "stopped at stage 1 of 2 (validity): circle" in entries[iteration], entries[iteration]
        assert "(metric 0); later stages not run" in entries[iteration]
    assert "saved about" in entries[3]  # the baseline ran both stages: their time is known
    assert "did not improve on best" in entries[4] and "stopped at" not in entries[4]
    out = tmp_path / "report.html"
    assert main(["report", NAME, "--repo", str(git_repo), "--out", str(out)]) == 0
    page = out.read_text()
    assert '"stg": "1 \\u2717' in page or '"stg": "1 ✗' in page
    assert "invalid packing, rejected: circle" in page


def test_trace_show_prints_a_candidates_stage_and_feedback(git_repo: Path, run_git, capsys) -> None:  # type: ignore[no-untyped-def]
    shutil.copytree(REPO / FOLDER, git_repo / FOLDER, ignore=shutil.ignore_patterns("__pycache__"))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "circle packing")
    program = load_program(git_repo, Path(FOLDER) / "program.md")
    run_iteration(git_repo, program, RunOptions(proposer_factory=_factory(True)), START)
    capsys.readouterr()
    assert main(["trace", "show", NAME, "it1", "--repo", str(git_repo)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Candidate it1 · iteration 1 · rejected · parent seed\n")
    assert "  combined_score: 0.0\n" in out and "  stage 1: stopped the candidate in " in out
    assert "Feedback:\n  invalid packing, rejected: circle" in out
    assert main(["trace", "show", NAME, "seed", "--repo", str(git_repo)]) == 0
    assert "  stage 2: passed in " in capsys.readouterr().out
    # The candidate's print stays in its own process (autoloop_py.candidate): it is no output of the evaluation.
    assert " hi" not in out and "pwned" not in out and "\x1b" not in out and "\x07" not in out
    assert main(["trace", "show", NAME, "it99", "--repo", str(git_repo)]) == 1
    assert "no candidate 'it99' in the trace of 'circle_packing'" in capsys.readouterr().err


# The documented example (docs/configuration.md, "Evaluation stages"): stage 1 only validates and reports
# `{"error": …}` for a wrong candidate; stage 2 scores. Before issue 37 three wrong candidates paused the program.
DOCUMENTED = """\
import json, os
ns = {}
exec(open("code/value.py").read(), ns)
x = ns["x"]
if os.environ["AUTOLOOP_STAGE"] == "1":
    report = {"error": f"x is {x}, it must be positive"} if x <= 0 else {}
else:
    report = {"score": x}
json.dump(report, open(os.environ["AUTOLOOP_RESULT"], "w"))
"""


def test_five_wrong_candidates_under_the_documented_stages_never_pause_the_program(
    git_repo: Path, run_git, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    folder = git_repo / ".autoloop/programs/valid"
    (folder / "code").mkdir(parents=True)
    stages = {"evaluation-stages": "\n  - name: validity\n  - name: score"}
    (folder / "program.md").write_text(program_md("Valid", "Make `x` large.", frontmatter=stages))
    (folder / "code/value.py").write_text("# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n")
    (folder / "code/evaluate.py").write_text(DOCUMENTED)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "a program with a validity stage")
    wrong = tmp_path / "wrong.py"
    wrong.write_text("# EVOLVE-BLOCK-START\nx = -3\n# EVOLVE-BLOCK-END\n")
    agent = f"cp {wrong} .autoloop/programs/valid/code/value.py"
    assert main(["run", "--repo", str(git_repo), "--program", "valid", "--iterations", "5", "--proposer", "agent",
                 "--agent-command", agent]) == 0
    state = statefile.parse_state(MemoryStore(git_repo).read("valid.md") or "", "valid.md")
    assert not state.machine.paused and state.machine.pause_reason is None
    assert state.machine.consecutive_errors == 0
    assert state.machine.recent_statuses == ("rejected",) * 5
    entries = {e.iteration: e.text for e in state.history if e.is_detailed}
    assert sorted(entries) == [1, 2, 3, 4, 5]
    for text in entries.values():
        assert "❌ Rejected" in text and "⚠️" not in text, text
        assert "stopped at stage 1 of 2 (validity): x is -3, it must be positive; later stages not run" in text, text
    assert state.machine.best_metric == 1.0  # the baseline, measured through both stages
