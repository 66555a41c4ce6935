"""Tests for evaluation_python.py: a root runner's evaluations, run as a uid of their own without bubblewrap, get the
program's packages from the evaluation venv `autoloop deps --install` fills, and check/status say which python3."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.loop.evaluation.fresh_copies import evaluate_copy
from autoloop_py.program.model import load_program
from autoloop_py.sandbox import evaluation_python, process_limit, slot_user
from tests.programs import program_md
from tests.security.conftest import open_folder  # noqa: F401  (a folder every user may enter)

PROG = Path(".autoloop/programs/needs_pkg")
EVALUATE = "import json, evalpkg\nprint(json.dumps({'score': evalpkg.VALUE}))\n"


def _wheel(folder: Path) -> Path:
    """Writes a one-module wheel (evalpkg.VALUE = 1.0): pip installs it without an index."""
    path = folder / "evalpkg-1.0-py3-none-any.whl"
    info = "evalpkg-1.0.dist-info"
    files = {
        "evalpkg/__init__.py": "VALUE = 1.0\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: evalpkg\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(name, text)
    path.chmod(0o644)
    return path


def test_as_root_a_venv_closed_to_others_still_gives_the_evaluation_its_packages(
    git_repo: Path, tmp_path: Path, open_folder: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only a root runner's evaluations run as a uid of their own")
    why = slot_user.wanted(False, os.environ, process_limit.facts())
    if why:
        pytest.skip(f"evaluations would not run as a uid of their own here: {why}")
    # The runner's python3: a venv under a folder closed to others, as a pyenv or venv under a 0700 /root.
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(closed / "venv")], check=True)
    venv = open_folder / "evaluation-venv"
    monkeypatch.setenv("PATH", f"{closed / 'venv/bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(evaluation_python.VENV_ENV, str(venv))
    monkeypatch.setenv("AUTOLOOP_ISOLATION", "none")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    folder = git_repo / PROG
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(program_md("Needs a package", "Import evalpkg.", frontmatter={
        "evaluation-timeout": 30, "isolation": "none", "requirements": [str(_wheel(open_folder))]}))
    (folder / "code/value.py").write_text("# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n")
    (folder / "code/evaluate.py").write_text(EVALUATE)
    program = load_program(git_repo, PROG / "program.md")

    before = evaluate_copy(program, git_repo)  # their uid finds another python3, without evalpkg
    assert not before.ok and "No module named 'evalpkg'" in (before.error or ""), before
    assert main(["status", "--repo", str(git_repo)]) == 0
    told = " ".join(capsys.readouterr().out.split())
    assert f"NOT the runner's python3: evaluations and agents run as a uid of their own, which cannot reach " \
           f"{closed}/venv/bin/python3" in told and "`autoloop deps needs_pkg --install`" in told, told

    assert main(["deps", "needs_pkg", "--install", "--repo", str(git_repo)]) == 0
    assert f"installing into {venv}, whose python3 they run" in " ".join(capsys.readouterr().out.split())
    after = evaluate_copy(program, git_repo)
    assert after.ok and after.metric == 1.0, after
    assert main(["status", "--repo", str(git_repo)]) == 0
    told = " ".join(capsys.readouterr().out.split())
    assert f"python3: evaluations run {venv}/bin/python3, the evaluation venv" in told, told
    assert "as a uid of their own" in told and "NOT the runner's python3" not in told and " as you" not in told, told


def test_the_venv_comes_first_only_for_a_runner_python3_out_of_their_reach(open_folder: Path) -> None:
    venv, closed, shared = open_folder / "venv", open_folder / "closed", open_folder / "shared"
    for folder in (venv / "bin", closed, shared):
        folder.mkdir(parents=True, mode=0o755)
        (folder / "python3").write_bytes(b"\x7fELF")
        (folder / "python3").chmod(0o755)
    closed.chmod(0o700)
    environ = {evaluation_python.VENV_ENV: str(venv)}
    assert evaluation_python.search_path(environ, f"{closed}:{shared}") == f"{venv}/bin:{closed}:{shared}"
    assert evaluation_python.search_path(environ, f"{shared}:{closed}") == f"{shared}:{closed}"
    assert evaluation_python.describe({**environ, "PATH": f"{shared}"}) == \
        f"python3: evaluations run the runner's {shared}/python3"
    assert evaluation_python.search_path({evaluation_python.VENV_ENV: str(open_folder / "none")}, str(closed)) == \
        str(closed)
