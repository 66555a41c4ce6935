"""Tests for autoloop_py.sandbox.run: choosing bwrap or none, and what a sandboxed command can reach."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from autoloop_py.errors import SandboxError
from autoloop_py.sandbox import candidate_dir, process_limit, slot_user
from autoloop_py.sandbox import run as sandbox_run
from autoloop_py.sandbox.policy import Limits
from autoloop_py.sandbox.run import bwrap_status, isolation_for, resolve_mode, run_sandboxed


def test_bwrap_requested_but_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_run.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="bubblewrap .* is not installed; install bubblewrap or set isolation: none"):
        resolve_mode("bwrap")
    assert resolve_mode("auto") == ("none", "bubblewrap (`bwrap`) is not installed")
    assert resolve_mode("none")[0] == "none"
    with pytest.raises(SandboxError, match="isolation must be one of"):
        resolve_mode("docker")


def test_none_still_applies_the_limits(tmp_path: Path) -> None:
    policy = isolation_for("none", network=False).evaluation
    result = run_sandboxed("ulimit -f; ulimit -v", tmp_path, policy, env={"PATH": os.environ["PATH"]}, timeout=30)
    file_blocks, memory_kb = result.stdout.split()
    assert int(file_blocks) * 512 == policy.limits.file_size or int(file_blocks) * 1024 == policy.limits.file_size
    assert int(memory_kb) * 1024 == policy.limits.address_space


@pytest.mark.parametrize("fallback", [True, False])
def test_without_a_memory_cgroup_an_explicit_agent_cap_falls_back_to_the_address_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fallback: bool
) -> None:
    @contextmanager
    def no_cgroup(limit: int | None, group: object) -> Iterator[None]:
        yield None

    monkeypatch.setattr(sandbox_run, "memory_limit", no_cgroup)
    limits = Limits(address_space=None, memory=256 << 20, memory_fallback=fallback)
    policy = replace(isolation_for("none", network=False).agent, limits=limits)
    result = run_sandboxed("ulimit -v", tmp_path, policy, env={"PATH": os.environ["PATH"]}, timeout=30)
    assert result.stdout.strip() == (str(256 << 10) if fallback else "unlimited")
    assert result.memory_rlimit == (256 << 20 if fallback else None)


def test_the_agent_is_bound_by_the_programs_memory_and_file_caps() -> None:
    limits = Limits(address_space=256 << 20, file_size=16 << 20, memory=256 << 20)
    agent = isolation_for("none", network=False, limits=limits, explicit_memory=True).agent
    assert (agent.limits.memory, agent.limits.file_size, agent.limits.address_space) == (256 << 20, 16 << 20, None)
    assert agent.network and agent.limits.memory_fallback


def test_inside_bwrap_only_the_workdir_is_writable(tmp_path: Path) -> None:
    if not bwrap_status()[0]:
        pytest.skip(f"needs a working bubblewrap sandbox: {bwrap_status()[1]}")
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    policy = isolation_for("bwrap", network=False, hidden=[outside]).evaluation
    command = f"echo in > inside.txt; echo out > {outside}/x.txt; ls {outside}; echo home > $HOME/h.txt; ls /"
    result = run_sandboxed(command, work, policy, env={"PATH": os.environ["PATH"], "HOME": "/root"}, timeout=30)
    assert (work / "inside.txt").read_text() == "in\n"
    assert not (outside / "x.txt").exists()
    assert "No such file or directory" in result.stderr


def test_an_evaluation_imports_the_runners_autoloop_py_even_inside_a_hidden_checkout(tmp_path: Path) -> None:
    """An evaluator calls its candidate through autoloop_py.candidate: the runner's package is shown read-only, also
    when it lives in the user's checkout (an editable install there), whose other files stay hidden."""
    if not bwrap_status()[0]:
        pytest.skip(f"needs a working bubblewrap sandbox: {bwrap_status()[1]}")
    work = tmp_path / "work"
    work.mkdir()
    checkout = sandbox_run.PACKAGE_DIR.parent
    policy = isolation_for("bwrap", network=False, hidden=[checkout]).evaluation
    command = (f"python3 -c 'import autoloop_py.candidate as c; print(c.__file__)'; ls {checkout}; "
               f"echo x > {sandbox_run.PACKAGE_DIR}/planted.py")  # fmt: skip
    env = {"PATH": os.environ["PATH"], "HOME": "/root", "PYTHONPATH": str(checkout)}
    result = run_sandboxed(command, work, policy, env=env, timeout=30)
    assert result.stdout.splitlines() == [str(sandbox_run.PACKAGE_DIR / "candidate.py"), "autoloop_py"], result.stderr
    assert "Read-only file system" in result.stderr and not (sandbox_run.PACKAGE_DIR / "planted.py").exists()


def test_extra_read_only_directories_are_shown_but_never_the_checkout(tmp_path: Path) -> None:
    tool, checkout = tmp_path / "tool", tmp_path / "checkout"
    (checkout / "bin").mkdir(parents=True)
    tool.mkdir()
    env = {"PATH": "/usr/bin", "AUTOLOOP_SANDBOX_READ_ONLY": f"{tool}, {checkout / 'bin'}"}
    shown = isolation_for("none", network=False, hidden=[checkout], environ=env).evaluation.read_only
    assert str(tool.resolve()) in shown and str((checkout / "bin").resolve()) not in shown


def test_files_a_command_names_are_found_next_to_shell_operators(tmp_path: Path) -> None:
    target = tmp_path / "where.txt"
    target.write_text("")
    assert sandbox_run.named_files(f"pwd > {target}; cat {target}|wc -l && ls /nonexistent") == [str(target)] * 2


def test_a_bad_process_limit_choice_stops_the_run_before_anything_runs() -> None:
    with pytest.raises(SandboxError, match="AUTOLOOP_PROCESS_LIMIT must be one of auto, cgroup, uid, off"):
        isolation_for("none", network=False, environ={"PATH": "/usr/bin", "AUTOLOOP_PROCESS_LIMIT": "docker"})


def _uid_skip() -> str:
    return process_limit.resolve(process_limit.UID).problem


@pytest.mark.xdist_group("uid-65534")  # beside the fork storms of tests/security/test_process_attacks.py
@pytest.mark.parametrize("mode", ["none", "bwrap"])
def test_under_the_uid_limit_the_command_runs_as_nobody_in_a_copy_it_owns(tmp_path: Path, mode: str) -> None:
    if _uid_skip():
        pytest.skip(_uid_skip())
    if mode == "bwrap" and not bwrap_status()[0]:
        pytest.skip(f"needs a working bubblewrap sandbox: {bwrap_status()[1]}")
    (tmp_path / "value.txt").write_text("1\n")
    policy = replace(isolation_for(mode, network=False).evaluation, process_limit=process_limit.UID)
    command = "id -u; echo 2 > value.txt; echo new > new.txt; ulimit -u"
    with candidate_dir.copy_of(tmp_path, prefix="autoloop-eval-") as tree:
        result = run_sandboxed(command, tree, policy, env={"PATH": "/usr/bin:/bin"}, timeout=30)
        uid, nproc = result.stdout.split()
        # What it wrote is read back by the runner as any file of the copy.
        assert (tree / "value.txt").read_text() == "2\n" and (tree / "new.txt").read_text() == "new\n"
    assert result.returncode == 0, result.stderr
    if mode == "none":  # without bwrap a root runner gives each command a uid of its own (slot_user.py) instead
        assert slot_user.FIRST_UID <= int(uid) < slot_user.FIRST_UID + slot_user.UID_COUNT
    else:
        assert uid == "65534"
    assert int(nproc) >= policy.limits.processes and nproc != "unlimited"
    assert (tmp_path / "value.txt").read_text() == "1\n"


def test_the_uid_limit_is_refused_outside_autoloops_copies(tmp_path: Path) -> None:
    if _uid_skip():
        pytest.skip(_uid_skip())
    policy = replace(isolation_for("none", network=False).evaluation, process_limit=process_limit.UID)
    with pytest.raises(SandboxError, match="not one of autoloop's temporary copies"):
        run_sandboxed("true", tmp_path, policy, env={"PATH": "/usr/bin"}, timeout=30)
    assert tmp_path.stat().st_uid == os.geteuid()  # nothing handed over


def test_a_named_interpreter_brings_its_virtualenv_and_its_base_installation(tmp_path: Path) -> None:
    base = tmp_path / "python" / "bin"
    base.mkdir(parents=True)
    (base / "python3.99").write_text("")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base}\ninclude-system-site-packages = false\n")
    (venv / "bin" / "python3").symlink_to(base / "python3.99")
    shown = sandbox_run.command_paths(f"cd here && {venv}/bin/python3 evaluate.py > out.json")
    assert shown == [str(venv.resolve()), str(base.parent.resolve()), f"{venv}/bin/python3"]
    # A link that is no interpreter shows the one file it points to, never that file's folder.
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "data.json").write_text("{}")
    (tmp_path / "data.json").symlink_to(tmp_path / "secrets" / "data.json")
    shown = sandbox_run.command_paths(f"cat {tmp_path}/data.json")
    assert shown == [str((tmp_path / "secrets" / "data.json").resolve()), f"{tmp_path}/data.json"]


def test_a_file_inside_a_shown_directory_is_not_bound_again() -> None:
    from autoloop_py.sandbox.policy import SandboxPolicy, bwrap_args

    policy = SandboxPolicy(mode="bwrap", read_only=("/tmp/t/venv", "/tmp/t/venv/bin/python3", "/tmp/t/tool"))
    args = bwrap_args(policy, "/tmp/t/work")
    bound = [args[i + 1] for i, arg in enumerate(args) if arg == "--ro-bind-try"]
    assert bound == ["/tmp/t/venv", "/tmp/t/tool"]
