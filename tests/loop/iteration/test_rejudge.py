"""Tests for rejudge.py: the best a candidate must beat, and accepted records re-judged when the best moved."""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from autoloop_py.git.command import open_repo
from autoloop_py.git.objects import GitSession
from autoloop_py.loop.iteration import rejudge
from autoloop_py.loop.iteration.rejudge import TipClaim
from autoloop_py.loop.record.recording import record_iteration
from autoloop_py.program.model import Program, load_program
from autoloop_py.state import file as statefile
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.memory import MemoryStore
from tests.conftest import GitRunner
from tests.programs import program_md, small_program

WHEN = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def program(tmp_path: Path) -> Program:
    return small_program(tmp_path / "p")


@pytest.mark.parametrize(
    "best, claim, recorded, direction, expected",
    [
        (4.0, TipClaim("demo:2:b", 7.0), (), "higher", 7.0),  # built on an unrecorded better candidate
        (4.0, TipClaim("demo:2:b", 7.0), ("demo:2:b",), "higher", 4.0),  # its record landed: the state decides
        (4.0, TipClaim("demo:2:b", 3.0), (), "higher", 4.0),  # never lower than the recorded best
        (4.0, TipClaim("demo:2:b", 3.0), (), "lower", 3.0),
        (4.0, None, (), "higher", 4.0),
        (None, TipClaim("demo:2:b", 3.0), (), "higher", None),  # no best yet: the baseline is measured
    ],
)
def test_bar(best: float | None, claim: TipClaim | None, recorded: tuple[str, ...], direction: str,
             expected: float | None) -> None:
    assert rejudge.bar(best, claim, recorded, direction) == expected


def _best(metric: float | None, front: tuple[dict[str, float], ...] = ()) -> statefile.StateFile:
    state = statefile.new_state("demo", "Grow x.", "score", "higher", None)
    kept = tuple(tuple(member.items()) for member in front)
    return statefile.with_machine(state, replace(state.machine, best_metric=metric, kept_front=kept))


def test_an_accepted_record_that_no_longer_beats_the_fresh_best_is_recorded_as_lost(program: Program) -> None:
    record = IterationRecord("accepted", WHEN, "raise x", 5.0, commit="abc", notes="score improved to 5")
    assert rejudge.recheck(program, 4.0, record, _best(4.0)) is record
    assert rejudge.recheck(program, 4.0, record, _best(None)) is record
    assert rejudge.recheck(program, 4.0, IterationRecord("rejected", WHEN, "x", 3.0), _best(9.0)).status == "rejected"
    lost = rejudge.recheck(program, 4.0, record, _best(7.0))
    assert lost.status == "rejected" and lost.metric == 5.0 and lost.commit == "abc"
    assert lost.notes == ("improved on the best it was judged against (4) but lost to a concurrent better candidate "
                          "(best is now 7); it was recorded after that one, so its commit stays on autoloop/demo")
    assert rejudge.recheck(program, 4.0, record, _best(5.0)).status == "rejected"  # a tie is no improvement


def test_under_objectives_a_record_is_rejudged_by_dominance(tmp_path: Path) -> None:
    """Kept for (score 3, cost 3); a machine that kept (score 4, cost 2) meanwhile dominates it (issue 37)."""
    root = tmp_path / "o"
    (root / ".autoloop/programs/demo/code").mkdir(parents=True)
    (root / ".autoloop/programs/demo/code/value.py").write_text("x = 1\n")
    head = {"objectives": "[{score: higher}, {cost: lower}]"}
    (root / ".autoloop/programs/demo/program.md").write_text(program_md("Demo", "Grow x.", frontmatter=head))
    program = load_program(root, Path(".autoloop/programs/demo/program.md"))
    record = IterationRecord("accepted", WHEN, "x", 3.0, extra=(("Objectives", "score 3 · cost 3"),))
    assert rejudge.recheck(program, 1.0, record, _best(4.0, ({"score": 1.0, "cost": 1.0},))) is record  # a trade-off
    assert rejudge.recheck(program, 1.0, record, _best(1.0)) is record  # nothing kept yet to compare with
    lost = rejudge.recheck(program, 1.0, record, _best(4.0, ({"score": 4.0, "cost": 2.0},)))
    assert lost.status == "rejected" and "lost to a concurrent better candidate (pareto: dominated by" in lost.notes
    assert rejudge.recheck(program, 1.0, record, _best(3.0, ({"score": 3.0, "cost": 3.0},))).status == "rejected"


def _commit(repo: Path, run_git: GitRunner, message: str) -> str:
    (repo / "f.txt").write_text(message)
    run_git(repo, "add", "f.txt")
    run_git(repo, "commit", "-qm", message)
    return run_git(repo, "rev-parse", "HEAD")


def test_tip_claim_reads_the_newest_keyed_commit(git_repo: Path, run_git: GitRunner) -> None:
    repo = open_repo(git_repo)
    with GitSession(git_repo) as session:
        def claim() -> TipClaim | None:
            return rejudge.tip_claim(repo, "refs/heads/main", session)

        assert claim() is None
        _commit(git_repo, run_git, "[Autoloop: demo] Iteration 1: a\n\nAutoloop-Key: demo:1:a\nAutoloop-Metric: 4.0")
        _commit(git_repo, run_git, "a person's commit")
        assert claim() == TipClaim("demo:1:a", 4.0)
        _commit(git_repo, run_git, "[Autoloop: demo] Iteration 2: b\n\nAutoloop-Key: demo:2:b\nAutoloop-Metric: nan")
        assert claim() == TipClaim("demo:1:a", 4.0)  # an unreadable metric claims nothing


def test_withdraw_takes_a_candidate_at_the_tip_off_the_branch(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    parent = run_git(git_repo_with_origin, "rev-parse", "HEAD")
    sha = _commit(git_repo_with_origin, run_git, "candidate")
    run_git(git_repo_with_origin, "push", "-q", "origin", "HEAD:refs/heads/autoloop/demo")
    run_git(git_repo_with_origin, "update-ref", "refs/heads/autoloop/demo", sha)
    said = rejudge.withdraw(git_repo_with_origin, "demo", sha)
    assert said == f"its commit was withdrawn from autoloop/demo (kept at refs/autoloop/orphaned/demo-{sha[:12]})"
    origin = git_repo_with_origin.parent / "origin.git"
    assert run_git(origin, "rev-parse", "autoloop/demo") == parent
    assert run_git(git_repo_with_origin, "rev-parse", "autoloop/demo") == parent
    assert run_git(git_repo_with_origin, "rev-parse", f"refs/autoloop/orphaned/demo-{sha[:12]}") == sha


def test_withdraw_leaves_a_candidate_another_one_builds_on(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    sha = _commit(git_repo_with_origin, run_git, "candidate")
    later = _commit(git_repo_with_origin, run_git, "a better candidate built on it")
    run_git(git_repo_with_origin, "push", "-q", "origin", "HEAD:refs/heads/autoloop/demo")
    said = rejudge.withdraw(git_repo_with_origin, "demo", sha)
    assert said == f"a later candidate builds on its commit {sha[:12]}, which stays on autoloop/demo"
    assert run_git(git_repo_with_origin.parent / "origin.git", "rev-parse", "autoloop/demo") == later


def test_record_iteration_rechecks_against_the_state_it_lands_on(
    git_repo: Path, program: Program
) -> None:
    memory = MemoryStore(git_repo)
    state = statefile.new_state("demo", "Grow x.", "score", "higher", None)
    best7 = IterationRecord("accepted", WHEN, "to seven", 7.0, commit="b" * 40, notes="improved")
    memory.commit({"demo.md": statefile.render_state(statefile.apply_iteration(state, best7, direction="higher",
                                                                               target_metric=None))}, "seed")
    record = IterationRecord("accepted", WHEN, "to five", 5.0, commit="a" * 40, notes="improved", key="demo:2:k")
    applied = record_iteration(memory, program, record, statefile.DEFAULT_BUDGET,
                               recheck=functools.partial(rejudge.recheck, program, 4.0))
    assert applied.status == "rejected"
    entry = statefile.parse_state(memory.read("demo.md") or "").history[0]
    assert entry.status == "rejected" and entry.key == "demo:2:k"
    assert "lost to a concurrent better candidate (best is now 7)" in entry.text
