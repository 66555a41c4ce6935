"""End to end: under concurrency a record is never "accepted" with a metric worse than the best.

Two clones of one origin run the program `counter`. Run B is slipped into run A at the worst moment
(A has loaded the state file, B's candidate lands before A prepares its branch), the interleaving
that once recorded "✅ Accepted, 5 (previous best 7, delta -2)" with 8 clones. Then the best moves by
another way while A's kept candidate waits to be recorded: A's record must say it lost, and its
commit must leave the branch.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py import faults
from autoloop_py.cli import main
from autoloop_py.loop.checkout.workspace import Workspace
from autoloop_py.state import file as statefile
from tests.programs import program_md

PROG = ".autoloop/programs/counter"
VALUE = f"{PROG}/code/value.py"
EVALUATE = 'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n'


def _git(cwd: Path, *args: str, data: bytes | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, check=True)
    return done.stdout.decode().strip()


def block(x: float) -> str:
    return f"# EVOLVE-BLOCK-START\nx = {x}\n# EVOLVE-BLOCK-END\n"


def _run(repo: Path, tmp_path: Path, x: float) -> int:
    """Runs one iteration in `repo` whose agent writes x into value.py."""
    source = tmp_path / f"candidate-{x}.py"
    source.write_text(block(x))
    return main(["run", "--repo", str(repo), "--program", "counter", "--proposer", "agent",
                 "--agent-command", f"cp {source} {VALUE}"])


def _state(origin: Path) -> statefile.StateFile:
    return statefile.parse_state(_git(origin, "cat-file", "blob", "memory/autoloop:counter.md"), "counter.md")


@pytest.fixture
def clones(git_repo_with_origin: Path, clone_origin: Callable[[str], Path], tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """Returns (clone A, clone B, origin) after A accepted x = 4 over the baseline x = 1."""
    for name in ("AUTOLOOP_PROGRAM", "AUTOLOOP_FAULT", "AUTOLOOP_MODEL", "AUTOLOOP_MOCK_RESPONSE"):
        monkeypatch.delenv(name, raising=False)
    a = git_repo_with_origin
    (a / PROG / "code").mkdir(parents=True)
    (a / PROG / "program.md").write_text(program_md("Counter", "Make `x` large."))
    (a / VALUE).write_text(block(1.0))
    (a / PROG / "code/evaluate.py").write_text(EVALUATE)
    _git(a, "add", "-A")
    _git(a, "commit", "-qm", "counter")
    _git(a, "push", "-q", "origin", "main")
    assert _run(a, tmp_path, 4.0) == 0
    origin = tmp_path / "origin.git"
    assert _state(origin).machine.best_metric == 4.0
    return a, clone_origin("b"), origin


def test_a_run_that_builds_on_an_unrecorded_better_candidate_is_judged_against_it(
    clones: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, origin = clones
    prepare = Workspace.prepare
    slipped: list[int] = []

    def prepare_after_b(self: Workspace):  # type: ignore[no-untyped-def]
        if self.repo_root == a and not slipped:  # A has loaded best 4; B keeps 7 and records it now
            slipped.append(_run(b, tmp_path, 7.0))
        return prepare(self)

    monkeypatch.setattr(Workspace, "prepare", prepare_after_b)
    assert _run(a, tmp_path, 5.0) == 0
    assert slipped == [0]
    state = _state(origin)
    assert [e.status for e in state.history[:2]] == ["rejected", "accepted"]
    assert "metric 5 did not improve on best 7" in state.history[0].text
    assert state.machine.best_metric == 7.0
    assert "x = 7.0" in _git(origin, "show", f"autoloop/counter:{VALUE}")
    for entry in state.history:
        assert entry.status != "accepted" or "delta: -" not in entry.text, entry.text


def test_a_kept_candidate_whose_best_moved_before_its_record_says_it_lost_and_leaves_the_branch(
    clones: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, origin = clones
    before = _git(origin, "rev-parse", "autoloop/counter")
    checkpoint = faults.checkpoint

    def raise_the_best(step: str) -> None:
        if step == "after-candidate-push":  # A's candidate (5) is pushed; the best becomes 9 before A records
            text = _git(origin, "cat-file", "blob", "memory/autoloop:counter.md")
            blob = _git(origin, "hash-object", "-w", "--stdin", data=text.replace("| Best Metric | 4 |",
                                                                                   "| Best Metric | 9 |").encode())
            tree = _git(origin, "mktree", data=f"100644 blob {blob}\tcounter.md\n".encode())
            parent = _git(origin, "rev-parse", "memory/autoloop")
            commit = _git(origin, "-c", "user.name=p", "-c", "user.email=p@x", "commit-tree", tree, "-p", parent,
                          "-m", "a better best")
            _git(origin, "update-ref", "refs/heads/memory/autoloop", commit, parent)
        checkpoint(step)

    monkeypatch.setattr(faults, "checkpoint", raise_the_best)
    assert _run(a, tmp_path, 5.0) == 0
    entry = _state(origin).history[0]
    assert entry.status == "rejected", entry.text
    assert "improved on the best it was judged against (4) but lost to a concurrent better candidate " \
           "(best is now 9); its commit was withdrawn from autoloop/counter (kept at refs/autoloop/orphaned/counter-" \
           in entry.text
    assert _git(origin, "rev-parse", "autoloop/counter") == before
    assert _git(a, "rev-parse", "autoloop/counter") == before
    assert _state(origin).machine.best_metric == 9.0
