"""Tests for autoloop_py.sandbox.slot_user: a uid of its own per command of a root runner without bubblewrap."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from autoloop_py import tempdirs
from autoloop_py.errors import SandboxError
from autoloop_py.sandbox import process_limit, slot_user
from autoloop_py.sandbox.candidate_dir import copy_of

ROOT = process_limit.Facts(root=True, setpriv=True, can_setuid=True, own_copy=True)


def test_only_a_root_runner_without_bwrap_gives_commands_a_uid_of_their_own() -> None:
    assert slot_user.wanted(False, {}, ROOT) == ""
    assert slot_user.wanted(True, {}, ROOT) == "not needed"
    assert slot_user.wanted(False, {}, process_limit.Facts(root=False)) == "not needed"
    assert slot_user.wanted(False, {slot_user.ENV_VAR: "off"}, ROOT) == f"{slot_user.ENV_VAR}=off"
    no_setpriv = process_limit.Facts(root=True, setpriv=False, can_setuid=True)
    assert "setpriv" in slot_user.wanted(False, {}, no_setpriv)
    outside = process_limit.Facts(root=True, setpriv=True, can_setuid=True, own_copy=False)
    assert "not one of autoloop's temporary copies" in slot_user.wanted(False, {}, outside)


def test_a_world_writable_checkout_is_named(tmp_path: Path) -> None:
    (tmp_path / "open").mkdir()
    (tmp_path / "closed").mkdir()
    os.chmod(tmp_path / "open", 0o777)
    os.chmod(tmp_path / "closed", 0o755)
    assert slot_user.exposed([tmp_path / "open", tmp_path / "closed", tmp_path / "missing"]) == [str(tmp_path / "open")]


def test_the_environment_points_home_and_tmp_at_the_private_folder(tmp_path: Path) -> None:
    env = slot_user.SlotUser(1_500_000_007, tmp_path).environment({"HOME": "/root", "PATH": "/usr/bin"})
    assert env == {"PATH": "/usr/bin", **{name: str(tmp_path) for name in ("HOME", "TMPDIR", "TMP", "TEMP")}}
    assert slot_user.SlotUser(1_500_000_007, tmp_path).prefix()[:3] == [
        "setpriv", "--reuid=1500000007", "--regid=1500000007"
    ]


def test_a_lock_folder_someone_else_could_touch_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / slot_user.LOCK_FOLDER
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    with pytest.raises(SandboxError, match="mode 0700"):
        with copy_of(_tree(tmp_path)) as tree:
            with slot_user.slot_user(tree, [], lock_root=tmp_path):
                pass


def test_a_folder_outside_autoloops_copies_is_never_handed_over(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not one of autoloop's temporary copies"):
        with slot_user.slot_user(tmp_path, [], lock_root=tmp_path):
            pass


def _tree(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir(exist_ok=True)
    (source / "value.py").write_text("x = 1\n")
    return source


def _root_skip() -> str:
    if os.geteuid() != 0:
        return "needs a root runner (only root gives commands a uid of their own)"
    return slot_user.wanted(False, os.environ, process_limit.facts())


@pytest.mark.skipif(bool(_root_skip()), reason=_root_skip() or "runs")
def test_each_command_gets_its_own_uid_owning_its_copy_and_nothing_survives_it(tmp_path: Path) -> None:
    with copy_of(_tree(tmp_path)) as first, copy_of(_tree(tmp_path)) as second:
        with slot_user.slot_user(first, [], lock_root=tmp_path) as one, \
                slot_user.slot_user(second, [], lock_root=tmp_path) as two:
            assert one.uid != two.uid  # two slots at once never share a uid
            for user, tree in ((one, first), (two, second)):
                assert slot_user.FIRST_UID <= user.uid < slot_user.FIRST_UID + slot_user.UID_COUNT
                info = tree.stat()
                assert (info.st_uid, info.st_mode & 0o777) == (user.uid, 0o700)
                assert (tree / "value.py").stat().st_uid == user.uid
                assert user.home.stat().st_uid == user.uid and user.home.stat().st_mode & 0o777 == 0o700
                assert tempdirs.PREFIX in str(user.home.parent)
            # A process of the first uid, left running in its own session: it goes with the block.
            stray = subprocess.Popen([*one.prefix(), "sleep", "60"], start_new_session=True)
            # The second uid cannot enter the first one's copy.
            peek = subprocess.run([*two.prefix(), "ls", str(first)], capture_output=True, text=True)
            assert peek.returncode != 0 and "Permission denied" in peek.stderr
        assert stray.wait(timeout=10) == -9
        assert not one.home.exists() and process_limit.pids_of(one.uid) == []
        assert first.stat().st_uid == os.geteuid()  # handed back: a later holder of the uid cannot enter it


def test_hard_link_protection_is_read_from_its_sysctl(tmp_path: Path) -> None:
    setting = tmp_path / "protected_hardlinks"
    setting.write_text("1\n")
    assert slot_user.hardlinks_protected(setting)
    setting.write_text("0\n")
    assert not slot_user.hardlinks_protected(setting)
    assert not slot_user.hardlinks_protected(tmp_path / "missing")


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder every user may pass (pytest's own temporary folders sit under a 0700 one)."""
    folder = Path(tempfile.mkdtemp(prefix="autoloop-slot-path-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def _python(folder: Path, mode: int, text: bytes = b"#!/bin/sh\nexec true\n") -> Path:
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)
    path = folder / "python3"
    path.write_bytes(text)
    path.chmod(mode)
    return path


def test_a_python3_under_a_closed_folder_or_unreadable_as_a_script_is_closed_to_a_slot_uid(open_folder: Path) -> None:
    assert slot_user.closed_to_others(_python(open_folder / "open", 0o755)) is None
    assert slot_user.closed_to_others(_python(open_folder / "binary", 0o711, b"\x7fELF")) is None
    script = _python(open_folder / "script", 0o711)
    assert slot_user.closed_to_others(script) == script  # a script must be readable to run
    hidden = _python(open_folder / "home", 0o755)
    (open_folder / "home").chmod(0o700)
    assert slot_user.closed_to_others(hidden) == open_folder / "home"
    link = open_folder / "open" / "python"
    link.symlink_to(hidden)
    assert slot_user.closed_to_others(link) == open_folder / "home"  # the folders of what a link points to count too


def test_a_slot_uid_that_would_get_another_python3_is_told_which(open_folder: Path) -> None:
    closed, reachable = open_folder / "closed", open_folder / "shared"
    _python(closed, 0o755)
    _python(reachable, 0o755)
    closed.chmod(0o700)
    why = slot_user.unreachable_python(f"{closed}:{reachable}")
    assert f"cannot reach {closed}/python3, the first python3 on PATH ({closed} is closed" in why
    assert f"they get {reachable}/python3 instead" in why and "AUTOLOOP_SLOT_USER=off" in why
    assert "they find no python3 at all" in slot_user.unreachable_python(str(closed))
    assert slot_user.unreachable_python(f"{reachable}:{closed}") == ""
    assert slot_user.unreachable_python(str(open_folder / "nothing")) == ""


def test_the_run_warns_once_per_path_that_a_slot_uid_gets_another_python3(
    open_folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from autoloop_py.sandbox import run

    closed = open_folder / "closed"
    _python(closed, 0o755)
    closed.chmod(0o700)
    with caplog.at_level("WARNING", logger="autoloop_py.sandbox.run"):
        run._warn_unreachable_python(str(closed))
        run._warn_unreachable_python(str(closed))
    assert [r.getMessage().split(", the first")[0] for r in caplog.records] == [  # the line check and status print
        "NOT the runner's python3: evaluations and agents run as a uid of their own, which cannot reach "
        f"{closed}/python3"]
