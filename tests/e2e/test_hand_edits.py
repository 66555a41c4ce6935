"""End to end: hand edits of memory/autoloop, safe (`autoloop edit`) and unsafe (a stale worktree's commit).

- A person keeps `memory/autoloop` checked out in a worktree; the runner moves the branch under it; the
  person's `git commit -am` there puts back the older file. The next `autoloop run` stops, names the
  commit and how to restore it, and reuses no iteration number; after the suggested revert it runs on.
- `autoloop edit --file` during an iteration, and an editor that stays open while an iteration commits:
  both land. A real conflict, an unreadable edit and an edit removing the runner's newest record are
  refused with nothing written.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.proposers.base import Proposal, ProposalRequest
from autoloop_py.proposers.tune import TuneProposer
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from tests.programs import program_md

NAME = "counter"
FOLDER = f".autoloop/programs/{NAME}"
STATE = f"{NAME}.md"
REPO_ROOT = Path(__file__).parents[2]


@pytest.fixture
def repo(git_repo_with_origin: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    folder = git_repo_with_origin / FOLDER
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(program_md("Counter", "Make x large.", frontmatter={"evaluation-timeout": 20}))
    (folder / "code/value.py").write_text("# EVOLVE-BLOCK-START\nx = 1.5\n# EVOLVE-BLOCK-END\n")
    (folder / "code/evaluate.py").write_text(
        'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n'
    )
    run_git(git_repo_with_origin, "add", "-A")
    run_git(git_repo_with_origin, "commit", "-qm", "counter program")
    run_git(git_repo_with_origin, "push", "-q", "origin", "main")
    return git_repo_with_origin


def _run(repo: Path, iterations: int = 1) -> int:
    return main(["run", "--repo", str(repo), "--program", NAME, "--iterations", str(iterations)])


def _state(repo: Path) -> statefile.StateFile:
    return statefile.parse_state(MemoryStore(repo).read(STATE) or "", STATE)


def _headings(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"^### Iteration (\d+)", text, re.MULTILINE)]


def _with_priority(text: str, item: str) -> str:
    return re.sub(r"(## 🎯 Current Priorities\n)", rf"\1\n- {item}\n", text, count=1)


def test_a_stale_worktree_commit_stops_the_run_and_reuses_no_number(repo: Path, run_git, capsys) -> None:  # type: ignore[no-untyped-def]
    assert _run(repo, 2) == 0
    mem = repo.parent / "mem"
    run_git(repo, "worktree", "add", "-q", str(mem), "memory/autoloop")
    assert _run(repo, 2) == 0  # the runner moves the branch under the person's worktree
    assert _state(repo).machine.iteration_count == 4
    # The person edits the (stale) file in their worktree and commits: iterations 3 and 4 are reverted.
    stale = (mem / STATE).read_text()
    assert _headings(stale) == [2, 1]
    (mem / STATE).write_text(_with_priority(stale, "Try a larger x"))
    run_git(mem, "commit", "-qam", "my priorities")
    culprit = run_git(mem, "rev-parse", "HEAD")
    run_git(mem, "push", "-q", "origin", "memory/autoloop")
    assert _state(repo).machine.iteration_count == 2
    program_tip = run_git(repo, "rev-parse", f"autoloop/{NAME}")
    capsys.readouterr()

    assert _run(repo) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "records the runner wrote are missing" in err
    assert "Iteration Count is 2, but iteration 4 was already recorded" in err
    assert culprit[:12] in err and "my priorities" in err
    assert f"git revert --no-edit {culprit[:12]}" in err
    # Nothing ran: neither branch moved, so iteration 3 was not recorded a second time.
    assert MemoryStore(repo).tip() == culprit
    assert run_git(repo, "rev-parse", f"autoloop/{NAME}") == program_tip

    # The suggested restore, then the run goes on at iteration 5.
    run_git(mem, "revert", "--no-edit", culprit[:12])
    run_git(mem, "push", "-q", "origin", "memory/autoloop")
    assert _run(repo) == 0
    text = MemoryStore(repo).read(STATE) or ""
    assert _headings(text) == [5, 4, 3, 2, 1]
    assert _state(repo).machine.iteration_count == 5


def test_the_restore_advice_works_in_the_worktree_holding_the_branch_and_status_shows_blocked(
    repo: Path, run_git, capsys  # type: ignore[no-untyped-def]
) -> None:
    assert _run(repo, 2) == 0
    mem = repo.parent / "mem"
    run_git(repo, "worktree", "add", "-q", str(mem), "memory/autoloop")
    assert _run(repo, 2) == 0
    stale = (mem / STATE).read_text()
    (mem / STATE).write_text(_with_priority(stale, "Try a larger x"))
    run_git(mem, "commit", "-qam", "my priorities")
    run_git(mem, "push", "-q", "origin", "memory/autoloop")
    capsys.readouterr()

    assert main(["status", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "│" in line and line.split("│")[0].strip() == NAME)
    assert "🛑 blocked" in row and "🟢" not in row
    assert "records the runner wrote are missing" in " ".join(out.split())

    assert _run(repo) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"memory/autoloop is checked out in the worktree {mem}; run there `" in err
    # `git checkout memory/autoloop` would fail here ("already checked out"): the advice runs as given.
    advice = err.split("; run there `", 1)[1].split("`", 1)[0]
    done = subprocess.run(["bash", "-c", advice], cwd=repo.parent, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _run(repo) == 0
    assert _headings(MemoryStore(repo).read(STATE) or "") == [5, 4, 3, 2, 1]
    assert main(["status", "--repo", str(repo)]) == 0
    assert "🛑" not in capsys.readouterr().out


class _EditsWhileProposing:
    """A proposer that runs `autoloop edit --file` in the middle of the iteration, then proposes as tune does."""

    name = "tune"

    def __init__(self, repo: Path, edited: Path) -> None:
        self.repo, self.edited = repo, edited
        self.exit_code: int | None = None

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        text = MemoryStore(self.repo).read(STATE) or ""
        self.edited.write_text(_with_priority(text, "Keep x below 1000"))
        self.exit_code = main(["edit", NAME, "--repo", str(self.repo), "--file", str(self.edited), "-m", "priority"])
        return TuneProposer().propose(request, rng)


def test_an_edit_during_an_iteration_and_the_iteration_both_land(repo: Path, tmp_path: Path) -> None:
    assert _run(repo) == 0
    proposer = _EditsWhileProposing(repo, tmp_path / "edited.md")
    program = load_program(repo, Path(FOLDER) / "program.md")
    outcome = run_iteration(repo, program, RunOptions(proposer_factory=lambda name, **_: proposer))
    assert proposer.exit_code == 0
    assert outcome.iteration == 2
    text = MemoryStore(repo).read(STATE) or ""
    assert "- Keep x below 1000" in text
    assert _headings(text) == [2, 1]
    log = subprocess.run(["git", "log", "--format=%s", "memory/autoloop"], cwd=repo, capture_output=True, text=True)
    assert any("edited by hand: priority" in line for line in log.stdout.splitlines())


EDITOR = """\
import os, re, subprocess, sys, time
path = sys.argv[1]
if os.environ["EDIT_MODE"] == "conflict":
    # Last Run has one-second resolution: the iteration below must record another second than the opened file.
    opened = re.search(r"\\| Last Run \\| (\\S+) \\|", open(path).read()).group(1)
    while time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) <= opened:
        time.sleep(0.05)
# An iteration commits while the file is open in the editor.
subprocess.run([sys.executable, "-m", "autoloop_py", "run", "--repo", os.environ["REPO"], "--program", "counter"],
               check=True, capture_output=True)
text = open(path).read()
mode = os.environ["EDIT_MODE"]
if mode == "merge":
    text = text.replace("## 🚧 Foreclosed Avenues\\n", "## 🚧 Foreclosed Avenues\\n\\n- Negative x: the metric is a max\\n", 1)
    text = re.sub(r"\\| Pause Reason \\| [^|]* \\|", "| Pause Reason | checking the evaluator |", text)
    text = re.sub(r"\\| Paused \\| false \\|", "| Paused | true |", text)
else:
    text = re.sub(r"\\| Last Run \\| [^|]* \\|", "| Last Run | 2020-01-01T00:00:00Z |", text)
open(path, "w").write(text)
"""


def _editor(tmp_path: Path, repo: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("REPO", str(repo))
    monkeypatch.setenv("EDIT_MODE", mode)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))


def test_an_editor_left_open_over_an_iteration_is_merged_onto_it(repo: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert _run(repo) == 0
    _editor(tmp_path, repo, "merge", monkeypatch)
    assert main(["edit", NAME, "--repo", str(repo)]) == 0
    state = _state(repo)
    assert state.machine.iteration_count == 2  # the iteration that ran inside the editor is kept
    assert state.machine.paused and state.machine.pause_reason == "checking the evaluator"
    assert "Negative x: the metric is a max" in state.foreclosed
    assert _headings(MemoryStore(repo).read(STATE) or "") == [2, 1]


def test_a_real_conflict_is_refused_and_nothing_is_written(repo: Path, tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    assert _run(repo) == 0
    _editor(tmp_path, repo, "conflict", monkeypatch)
    capsys.readouterr()
    assert main(["edit", NAME, "--repo", str(repo)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "both changed the Machine State's last run" in err and "Nothing was written" in err
    kept = re.search(r"your edit is in (\S+): fix it", err)
    assert kept and "2020-01-01T00:00:00Z" in Path(kept.group(1)).read_text()
    state = _state(repo)
    assert state.machine.iteration_count == 2 and state.machine.last_run is not None
    assert state.machine.last_run.year != 2020


def test_an_unreadable_edit_names_its_line_and_writes_nothing(repo: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert _run(repo) == 0
    tip = MemoryStore(repo).tip()
    text = MemoryStore(repo).read(STATE) or ""
    line = next(i for i, l in enumerate(text.splitlines(), 1) if l.startswith("| Iteration Count"))
    broken = tmp_path / "broken.md"
    broken.write_text(text.replace("| Iteration Count | 1 |", "| Iteration Count | one |"))
    capsys.readouterr()
    assert main(["edit", NAME, "--repo", str(repo), "--file", str(broken)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"{STATE}:{line}:" in err and "'Iteration Count' is 'one'" in err and "Nothing was written" in err
    assert MemoryStore(repo).tip() == tip


def test_an_edit_may_not_remove_the_newest_record(repo: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert _run(repo, 2) == 0
    tip = MemoryStore(repo).tip()
    text = MemoryStore(repo).read(STATE) or ""
    start = text.index("### Iteration 2")
    end = text.index("### Iteration 1")
    edited = tmp_path / "edited.md"
    edited.write_text(text[:start] + text[end:])
    capsys.readouterr()
    assert main(["edit", NAME, "--repo", str(repo), "--file", str(edited)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "the edit removes records the runner wrote" in err and "iteration 2" in err
    assert MemoryStore(repo).tip() == tip
    # An older entry may go.
    start = text.index("### Iteration 1")
    edited.write_text(text[:start].rstrip("\n") + "\n")
    assert main(["edit", NAME, "--repo", str(repo), "--file", str(edited)]) == 0
    assert _headings(MemoryStore(repo).read(STATE) or "") == [2]
    assert _run(repo) == 0
    assert _state(repo).machine.iteration_count == 3


def test_deleting_the_state_file_starts_afresh_without_an_error(repo: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    assert _run(repo, 2) == 0
    mem = repo.parent / "mem"
    run_git(repo, "worktree", "add", "-q", str(mem), "memory/autoloop")
    run_git(mem, "rm", "-q", STATE)
    run_git(mem, "commit", "-qm", "start counter afresh")
    assert _run(repo) == 0
    assert _run(repo) == 0
    assert _headings(MemoryStore(repo).read(STATE) or "") == [2, 1]
