"""End to end: circle_packing's two stages. An invalid packing stops at the validity stage (a rejection, no pause),
the state file and the HTML report say which stage stopped it, and a valid one goes through both stages."""

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
