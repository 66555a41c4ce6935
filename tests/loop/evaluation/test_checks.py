"""Tests for checks.py: the Target allowlist follows the file system's case rules."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from autoloop_py.loop.evaluation import checks
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import Program, load_program
from autoloop_py.proposers.base import Proposal, ProposalRequest
from tests.conftest import GitRunner
from tests.programs import program_md

PROG = ".autoloop/programs/demo"
PROGRAM_MD = program_md("Demo", "Grow x.", target=("code/*.py",))
EVALUATE = "import re\nx = re.search(r'x = (\\d+)', open('code/solution.py').read()).group(1)\nprint('{\"score\": %s}' % x)\n"
SOLUTION = "# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\nprint(x)\n"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / PROG
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(PROGRAM_MD)
    (folder / "code/solution.py").write_text(SOLUTION)
    (folder / "code/evaluate.py").write_text(EVALUATE)
    return tmp_path


@pytest.fixture
def program(workdir: Path) -> Program:
    return load_program(workdir, Path(PROG) / "program.md")


def _files(workdir: Path) -> dict[str, str]:
    return {f"{PROG}/code/solution.py": SOLUTION}


def _insensitive(_: Path) -> bool:
    return True


def _sensitive(_: Path) -> bool:
    return False


def test_this_linux_file_system_is_probed_as_case_sensitive(tmp_path: Path) -> None:
    assert checks.case_insensitive(tmp_path) is False  # empty: probed with a temporary file
    (tmp_path / "Name.txt").write_text("x")
    assert checks.case_insensitive(tmp_path) is False
    assert [p.name for p in tmp_path.iterdir()] == ["Name.txt"]


def test_a_case_swapped_twin_that_is_the_same_file_means_insensitive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "Name.txt").write_text("x")
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self: self.name == "nAME.TXT" or real_exists(self))
    monkeypatch.setattr(checks.os.path, "samefile", lambda a, b: True)
    assert checks.case_insensitive(tmp_path) is True


def test_on_case_insensitive_systems_other_spellings_resolve_to_the_real_file(workdir: Path, program: Program) -> None:
    new = SOLUTION.replace("x = 1", "x = 2")
    for spelled in (f"{PROG}/Code/Solution.py", f"{PROG}/code/SOLUTION.py", f"{PROG.upper()}/CODE/solution.PY"):
        real, clashes = checks.real_paths(workdir, {spelled: new}, _insensitive)
        assert real == {f"{PROG}/code/solution.py": new} and clashes == []
        assert checks.violations(program, _files(workdir), real) == []


def test_on_case_insensitive_systems_an_excluded_file_cannot_hide_behind_its_case(workdir: Path, program: Program) -> None:
    real, _ = checks.real_paths(workdir, {f"{PROG}/code/Evaluate.py": "print('{\"score\": 99}')\n"}, _insensitive)
    assert real == {f"{PROG}/code/evaluate.py": "print('{\"score\": 99}')\n"}
    assert checks.violations(program, _files(workdir), real) == [
        f"{PROG}/code/evaluate.py is not in the program's Target list; change only the Target files"
    ]


def test_on_case_insensitive_systems_the_evolve_block_is_checked_on_the_real_file(workdir: Path, program: Program) -> None:
    outside = SOLUTION.replace("print(x)", "print(x * 1000)")
    real, _ = checks.real_paths(workdir, {f"{PROG}/code/SOLUTION.py": outside}, _insensitive)
    problems = checks.violations(program, _files(workdir), real)
    assert len(problems) == 1 and problems[0].startswith(f"{PROG}/code/solution.py: ")


def test_two_spellings_of_one_file_are_a_clash_not_a_second_file(workdir: Path) -> None:
    changes = {f"{PROG}/code/solution.py": SOLUTION, f"{PROG}/code/SOLUTION.py": SOLUTION}
    real, clashes = checks.real_paths(workdir, changes, _insensitive)
    assert list(real) == [f"{PROG}/code/solution.py"]
    assert clashes == [
        f"{PROG}/code/SOLUTION.py and {PROG}/code/solution.py name the same file on this case-insensitive file system"
    ]


def test_new_files_keep_their_spelling_below_the_existing_folders(workdir: Path) -> None:
    real, _ = checks.real_paths(workdir, {f"{PROG}/CODE/Helper.py": "y = 1\n", "/etc/passwd": None}, _insensitive)
    assert list(real) == [f"{PROG}/code/Helper.py", "/etc/passwd"]


def test_on_case_sensitive_systems_other_spellings_are_other_files_outside_the_target(
    workdir: Path, program: Program
) -> None:
    changes = {f"{PROG}/Code/Solution.py": SOLUTION.replace("x = 1", "x = 2")}
    real, clashes = checks.real_paths(workdir, changes, _sensitive)
    assert real == changes and clashes == []
    # Another file here, but the same one on a case-insensitive checkout of the branch: refused as well.
    assert checks.violations(program, _files(workdir), real) == [
        f"'{PROG}/Code/Solution.py' and '{PROG}/code/solution.py' differ only in case: one file on a case-insensitive "
        "checkout",
        f"{PROG}/Code/Solution.py is not in the program's Target list; change only the Target files",
    ]


def test_the_detector_is_looked_up_at_call_time(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "case_insensitive", _insensitive)
    real, _ = checks.real_paths(workdir, {f"{PROG}/Code/Solution.py": SOLUTION})
    assert list(real) == [f"{PROG}/code/solution.py"]


class _Respell:
    """A proposer that writes the Target file under another spelling."""

    name = "respell"

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        return Proposal({f"{PROG}/Code/SOLUTION.py": SOLUTION.replace("x = 1", "x = 2")}, "respelled")


def test_a_run_on_a_case_insensitive_system_writes_the_existing_file(
    git_repo: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch, run_git: GitRunner
) -> None:
    shutil.copytree(workdir / ".autoloop", git_repo / ".autoloop")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "demo")
    monkeypatch.setattr(checks, "case_insensitive", _insensitive)
    program = load_program(git_repo, Path(PROG) / "program.md")
    outcome = run_iteration(git_repo, program, RunOptions(proposer_factory=lambda name, **_: _Respell()))
    assert outcome.status == "accepted" and outcome.metric == 2
    tree = run_git(git_repo, "ls-tree", "-r", "--name-only", "autoloop/demo", f"{PROG}/")
    assert tree.splitlines() == [f"{PROG}/code/evaluate.py", f"{PROG}/code/solution.py", f"{PROG}/program.md"]
    assert "x = 2" in run_git(git_repo, "show", f"autoloop/demo:{PROG}/code/solution.py")
    monkeypatch.setattr(checks, "case_insensitive", _sensitive)
    outcome = run_iteration(git_repo, program, RunOptions(proposer_factory=lambda name, **_: _Respell()))
    assert outcome.status == "rejected" and "Code/SOLUTION.py is not in the program's Target list" in (outcome.reason or "")


def test_deleting_a_file_with_evolve_block_markers_is_a_violation(program: Program) -> None:
    path = f"{PROG}/code/solution.py"
    assert checks.violations(program, _files(Path()), {path: None}) == [
        f"{path}: deleting a file with EVOLVE-BLOCK markers; edit only between the markers"
    ]
    plain = f"{PROG}/code/plain.py"
    assert checks.violations(program, {plain: "x = 1\n"}, {plain: None}) == []  # no markers: its own to delete


def test_a_target_file_over_the_size_cap_is_a_violation(program: Program) -> None:
    path = f"{PROG}/code/solution.py"
    cap = program.config.max_file_bytes
    assert cap == 1 << 20
    inside = SOLUTION.replace("x = 1", "x = 1  # " + "é" * ((cap - len(SOLUTION)) // 2 - 10))
    assert checks.violations(program, _files(Path()), {path: inside}) == []
    over = SOLUTION.replace("x = 1", "x = 1  # " + "é" * (cap // 2))
    size = len(over.encode())
    assert checks.violations(program, _files(Path()), {path: over}) == [
        f"{path} is {size} bytes, over the program's limit of {cap} (`max-file-bytes`)"
    ]
    new = f"{PROG}/code/new.py"
    assert checks.violations(program, {}, {new: "y" * (cap + 1)})[0].startswith(f"{new} is {cap + 1} bytes")
