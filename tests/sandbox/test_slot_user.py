"""Tests for autoloop_py.sandbox.slot_user: a uid of its own per command of a root runner without bubblewrap."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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


def test_status_says_whether_unsandboxed_commands_get_their_own_uid() -> None:
    assert slot_user.describe("").startswith("sandbox: as root without bubblewrap, each evaluation and agent runs as")
    off = slot_user.describe(f"{slot_user.ENV_VAR}=off")
    assert off.startswith("NOT CONFINED") and f"({slot_user.ENV_VAR}=off)" in off


def test_hard_link_protection_is_read_from_its_sysctl(tmp_path: Path) -> None:
    setting = tmp_path / "protected_hardlinks"
    setting.write_text("1\n")
    assert slot_user.hardlinks_protected(setting)
    setting.write_text("0\n")
    assert not slot_user.hardlinks_protected(setting)
    assert not slot_user.hardlinks_protected(tmp_path / "missing")
