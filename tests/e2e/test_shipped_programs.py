"""End to end (issue 37): `autoloop check`, evaluations included, passes on this repository's own programs.

A clone of this repository failed `check` (sqrt_tradeoff's prose about `cost` read as its metric's direction) and
nothing ran it. This test copies the repository as a clone holds it (tracked files, and untracked ones not
ignored, so uncommitted work is checked too) into a fresh repository and runs `check` there: every program under
`.autoloop/programs/` must load and its baseline must report its metric and objectives in the sandbox.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.program.model import discover
from tests.programs import REPO


def _files(repo: Path) -> list[str]:
    """Returns the files a clone of repo would hold, plus the untracked ones not ignored (empty: not a git checkout)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            capture_output=True, check=False)
    return [name for name in listed.stdout.decode().split("\0") if name] if listed.returncode == 0 else []


def test_check_passes_on_the_shipped_programs(  # type: ignore[no-untyped-def]
    tmp_path: Path, isolated_git_config: None, run_git, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _files(REPO)
    if not files:
        pytest.skip("not run from a git checkout of autoloop")
    copy = tmp_path / "clone"
    for name in files:
        if (REPO / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, copy / name)
    run_git(tmp_path, "init", "-q", "-b", "main", str(copy))
    run_git(copy, "add", "-A")
    run_git(copy, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "clone")
    names = [path.parent.name if path.name == "program.md" else path.stem for path in discover(copy)]
    assert len(names) >= 5

    code = main(["check", "--repo", str(copy)])
    out = capsys.readouterr().out
    assert code == 0, out
    for name in names:
        assert f"evaluating {name} (its baseline" in out and f"✓ {name} (baseline " in out, out
