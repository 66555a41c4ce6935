"""End to end: program files that used to hang, run twice or run unbounded are errors naming the file.

Each case writes a program into a repository with a bare origin and drives `autoloop run`, `check`
or `schedule --matrix` through the CLI: the broken program never runs (nothing on origin), the
error names its file (and line), and the other programs still run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from tests.programs import program_md

EVALUATE = 'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n'


def _add(repo: Path, rel: str, text: str, folder: bool = True) -> None:
    """Writes a program at .autoloop/programs/<rel> (a folder with code/, or a bare file)."""
    path = repo / ".autoloop/programs" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if folder:
        (path.parent / "code").mkdir(exist_ok=True)
        (path.parent / "code/value.py").write_text("# EVOLVE-BLOCK-START\nx = 1.0\n# EVOLVE-BLOCK-END\n")
        (path.parent / "code/evaluate.py").write_text(EVALUATE)


def _commit(repo: Path) -> None:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "programs"], cwd=repo, check=True)
    subprocess.run(["git", "push", "-q", "origin", "main"], cwd=repo, check=True)


def _origin_branches(origin: Path) -> list[str]:
    out = subprocess.run(["git", "for-each-ref", "--format=%(refname:short)"], cwd=origin, capture_output=True,
                         text=True, check=True).stdout
    return sorted(out.split())


@pytest.fixture
def repo(git_repo_with_origin: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose program `counter` is fine."""
    for name in ("AUTOLOOP_PROGRAM", "AUTOLOOP_FAULT", "AUTOLOOP_MODEL", "AUTOLOOP_MOCK_RESPONSE"):
        monkeypatch.delenv(name, raising=False)
    _add(git_repo_with_origin, "counter/program.md", program_md("Counter", "Make `x` large."))
    return git_repo_with_origin


def test_a_program_named_worktrees_is_an_error_not_a_hang(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _add(repo, "worktrees/program.md", program_md("Worktrees", "Make `x` large."))
    _commit(repo)
    assert main(["run", "--repo", str(repo), "--program", "worktrees"]) == 1
    err = capsys.readouterr().err
    assert ".autoloop/programs/worktrees/program.md: program name 'worktrees' is reserved" in err
    assert "rename the folder" in err
    assert _origin_branches(repo.parent / "origin.git") == ["main"]
    assert main(["run", "--repo", str(repo)]) == 0  # counter still runs
    assert "skipping a broken program: .autoloop/programs/worktrees/program.md" in capsys.readouterr().out


@pytest.mark.parametrize("second", ["counter.md", "Counter/program.md"])
def test_two_programs_with_one_name_never_run_nor_appear_in_the_matrix(
    repo: Path, second: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _add(repo, second, program_md("Counter again", "Make `x` large.", target=(".autoloop/programs/counter/code/value.py",),
                                  protected=()), folder=second.endswith("program.md"))
    _add(repo, "other/program.md", program_md("Other", "Make `x` large."))
    _commit(repo)
    assert main(["schedule", "--repo", str(repo), "--matrix"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["program"] == ["other"]
    assert "two programs are named 'counter'" in err and f".autoloop/programs/{second}" in err
    assert main(["run", "--repo", str(repo), "--program", "counter"]) == 1
    assert "two programs are named 'counter'" in capsys.readouterr().err
    assert main(["check", "--repo", str(repo)]) == 1
    assert "neither runs until one is renamed" in capsys.readouterr().out
    assert _origin_branches(repo.parent / "origin.git") == ["main"]


@pytest.mark.parametrize(
    "frontmatter, message",
    [
        ({"evaluation-timeout": ".inf"}, "program.md:2: frontmatter `evaluation-timeout`: must be a finite number"),
        ({"evaluation-timeout": 0}, "program.md:2: frontmatter `evaluation-timeout`: must be a number above 0"),
        ({"schedule": "every 0m"}, "program.md:2: frontmatter `schedule`: schedule 'every 0m' is zero"),
        ({"schedule": "sometimes"}, "program.md:2: frontmatter `schedule`: unparseable schedule 'sometimes'"),
    ],
)
def test_unbounded_timeouts_and_zero_schedules_are_errors(
    repo: Path, frontmatter: dict[str, object], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _add(repo, "counter/program.md", program_md("Counter", "Make `x` large.", frontmatter=frontmatter))
    _commit(repo)
    assert main(["run", "--repo", str(repo), "--program", "counter"]) == 1
    assert f".autoloop/programs/counter/{message}" in capsys.readouterr().err
    assert _origin_branches(repo.parent / "origin.git") == ["main"]


@pytest.mark.parametrize(
    "target, message",
    [
        ("../../../../outside.py", "holds `..`"),
        ("/etc/hostname", "is an absolute path"),
        ("code/link.py", "leads outside the repository through a symbolic link"),
    ],
)
def test_target_paths_outside_the_repository_are_errors(
    repo: Path, tmp_path_factory: pytest.TempPathFactory, target: str, message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.py"
    outside.write_text("token = 'x'\n")
    _add(repo, "counter/program.md", program_md("Counter", "Make `x` large.", target=("code/value.py", target)))
    (repo / ".autoloop/programs/counter/code/link.py").symlink_to(outside)
    _commit(repo)
    assert main(["run", "--repo", str(repo), "--program", "counter"]) == 1
    assert f".autoloop/programs/counter/program.md:10: Target `{target}` {message}" in capsys.readouterr().err
    assert outside.read_text() == "token = 'x'\n"
    assert _origin_branches(repo.parent / "origin.git") == ["main"]


@pytest.mark.parametrize("name, reason", [("worktrees", "is reserved"), ("a..b", "holds `..`")])
def test_autoloop_new_refuses_the_same_names(repo: Path, name: str, reason: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", name, "--repo", str(repo)]) == 1
    assert f"'{name}' is not a usable program name (program name '{name}' {reason}" in capsys.readouterr().err
    assert not (repo / ".autoloop/programs" / name).exists()


def test_runner_labels_and_container_reach_the_matrix_and_check_names_a_bad_one(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gpu = {"runs-on": "[self-hosted, gpu]", "container": "nvidia/cuda:12.4.1-runtime-ubuntu22.04"}
    _add(repo, "gpu/program.md", program_md("Gpu", "Make `x` large.", frontmatter=gpu))
    _commit(repo)
    assert main(["check", "--repo", str(repo)]) == 0
    capsys.readouterr()
    assert main(["schedule", "--repo", str(repo), "--matrix", "--runs-on", "self-hosted,cpu"]) == 0
    matrix = json.loads(capsys.readouterr().out)
    entries = {e["program"]: e for e in matrix["include"]}
    assert sorted(matrix["program"]) == ["counter", "gpu"]
    assert entries["gpu"] == {"program": "gpu", "runs-on": ["self-hosted", "gpu"],
                              "container": "nvidia/cuda:12.4.1-runtime-ubuntu22.04"}
    # A program without its own runs on the default labels, on the runner itself (no container).
    assert entries["counter"] == {"program": "counter", "runs-on": ["self-hosted", "cpu"], "container": ""}
    assert main(["schedule", "--repo", str(repo), "--matrix", "--slots", "2"]) == 0
    slots = json.loads(capsys.readouterr().out)["include"]
    assert [(e["program"], e["slot"], e["runs-on"], e["container"]) for e in slots if e["program"] == "gpu"] == [
        ("gpu", i, ["self-hosted", "gpu"], gpu["container"]) for i in range(2)]

    _add(repo, "gpu/program.md", program_md("Gpu", "Make `x` large.", frontmatter={"container": "{options: x}"}))
    _commit(repo)
    assert main(["check", "--repo", str(repo)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert ".autoloop/programs/gpu/program.md:2" in out and "`container`: a container mapping needs `image:`" in out
