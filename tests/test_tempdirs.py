"""Tests for tempdirs.py: a run's temporary folders carry their owner, and a later run removes a dead owner's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from autoloop_py import tempdirs
from autoloop_py.tempdirs import OWNER_FILE, Owner


def _dead_pid() -> int:
    """Returns the pid of a process that has exited (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _folder(base: Path, name: str, owner: str | None) -> Path:
    path = base / name
    (path / "worktree").mkdir(parents=True)
    (path / "worktree/file.txt").write_text("left behind\n")
    if owner is not None:
        (path / OWNER_FILE).write_text(owner)
    return path


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempdirs.tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_make_marks_the_folder_with_this_process(base: Path) -> None:
    path = tempdirs.make("autoloop-demo-")
    assert path.parent == base and path.name.startswith("autoloop-demo-")
    owner = tempdirs.read_owner((path / OWNER_FILE).read_text())
    assert owner == Owner(os.getpid(), tempdirs.current_owner().started, socket.gethostname())
    assert owner is not None and (owner.started is not None or not Path("/proc").is_dir())
    with pytest.raises(ValueError, match="named autoloop-"):
        tempdirs.make("other-")


def test_temporary_removes_its_folder(base: Path) -> None:
    with tempdirs.temporary("autoloop-agent-") as path:
        assert (path / OWNER_FILE).is_file()
    assert not path.exists()


def test_sweep_removes_only_dead_owners_folders(base: Path) -> None:
    dead = _dead_pid()
    host = socket.gethostname()
    gone = _folder(base, "autoloop-demo-dead", f"{dead} - {host}\n")
    old_format = _folder(base, "autoloop-agent-old", f"{dead}\n")
    alive = _folder(base, "autoloop-demo-alive", tempdirs.current_owner().render())
    elsewhere = _folder(base, "autoloop-demo-elsewhere", f"{dead} - another-host\n")
    unmarked = _folder(base, "autoloop-demo-unmarked", None)
    not_ours = _folder(base, "something-else", f"{dead}\n")
    link = base / "autoloop-link"
    link.symlink_to(gone)
    killed: list[int] = []
    removed = tempdirs.sweep(before_remove=killed.append)
    assert sorted(removed) == sorted([gone, old_format])
    assert killed == [dead]  # once per dead run
    assert not gone.exists() and not old_format.exists()
    assert all(p.exists() for p in (alive, elsewhere, unmarked, not_ours))
    assert link.is_symlink()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times come from /proc")
def test_a_reused_pid_does_not_keep_a_dead_runs_folder(base: Path) -> None:
    # This process's pid, but another start time: the owner died and its pid now names us.
    reused = _folder(base, "autoloop-demo-reused", Owner(os.getpid(), "1", socket.gethostname()).render())
    assert tempdirs.sweep() == [reused]
