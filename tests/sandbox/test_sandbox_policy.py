"""Tests for autoloop_py.sandbox.policy: the bubblewrap options and the rlimits a policy stands for."""

from __future__ import annotations

from autoloop_py.sandbox.policy import (
    BWRAP, GIB, Limits, SandboxPolicy, agent_limits, bwrap_args, evaluation_limits, limit_args,
)

PRESENT = ["/usr", "/bin", "/lib", "/etc/passwd", "/etc/resolv.conf"]


def _pairs(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == flag]


def test_evaluation_has_no_network_and_only_workdir_is_writable() -> None:
    policy = SandboxPolicy(mode=BWRAP, read_only=("/opt/py",), hidden=("/home/me/repo",), home="/home/me")
    args = bwrap_args(policy, "/tmp/w", cwd="/tmp/w/prog", links=[("/bin", "usr/bin")], present=PRESENT)
    assert "--unshare-net" in args and "--unshare-pid" in args and "--die-with-parent" in args
    assert "--new-session" in args and "--unshare-user" in args
    assert _pairs(args, "--bind") == ["/tmp/w"]
    assert _pairs(args, "--ro-bind") == ["/usr", "/lib", "/etc/passwd", "/etc/resolv.conf"]
    assert "/home/me" in _pairs(args, "--tmpfs") and "/tmp" in _pairs(args, "--tmpfs")
    assert args[args.index("--symlink") + 1 : args.index("--symlink") + 3] == ["usr/bin", "/bin"]
    assert args[-2:] == ["--chdir", "/tmp/w/prog"]


def test_network_kept_when_asked() -> None:
    assert "--unshare-net" not in bwrap_args(SandboxPolicy(mode=BWRAP, network=True), "/w", present=PRESENT)


def test_an_outside_only_network_is_a_namespace_of_its_own() -> None:
    policy = SandboxPolicy(mode=BWRAP, network=True, outside_only=True)
    assert "--unshare-net" in bwrap_args(policy, "/w", present=PRESENT)


def test_a_read_only_path_that_holds_a_hidden_one_is_not_shown() -> None:
    policy = SandboxPolicy(mode=BWRAP, read_only=("/home/me", "/home/me/repo/.venv", "/srv"), hidden=("/home/me/repo",))
    shown = _pairs(bwrap_args(policy, "/tmp/w", present=PRESENT), "--ro-bind-try")
    # The checkout's own virtualenv is shown (read-only); the home that holds the checkout is not.
    assert shown == ["/srv", "/home/me/repo/.venv"]


def test_private_home_is_mounted_before_what_shows_through_it() -> None:
    policy = SandboxPolicy(mode=BWRAP, read_only=("/home/me/.pyenv",), home="/home/me")
    args = bwrap_args(policy, "/tmp/w", present=PRESENT)
    assert args.index("/home/me") < args.index("/home/me/.pyenv") < args.index("--bind")


def test_limits_count_processes_on_top_of_the_present_ones() -> None:
    assert limit_args(Limits(processes=100, address_space=None, file_size=10), 30, 250, 2) == ["--nproc=350", "--fsize=10"]
    agent = Limits(processes=100, address_space=None, file_size=10, cpu_from_timeout=True)
    assert limit_args(agent, 30, 250, 2) == ["--nproc=350", "--fsize=10", "--cpu=70"]
    assert limit_args(Limits(address_space=8), 1, 0, 1)[-1] == "--as=8"


def test_limits_without_a_process_count_set_no_process_limit() -> None:
    assert limit_args(Limits(processes=100, address_space=None, file_size=10), 30, None, 2) == ["--fsize=10"]


def test_a_command_that_becomes_another_uid_gets_privileged_bwrap_and_reachable_directories() -> None:
    policy = SandboxPolicy(mode=BWRAP, read_only=("/root/.pyenv/versions/3.11",), home="/root")
    args = bwrap_args(policy, "/tmp/autoloop-eval-x/repo", links=[("/bin", "usr/bin")], present=PRESENT, as_user=True)
    # A user namespace maps one uid, and to the kernel its root is still uid 0: RLIMIT_NPROC would not hold.
    assert "--unshare-user" not in args and "--unshare-pid" in args
    made = [args[i + 3] for i, arg in enumerate(args) if arg == "--perms" and args[i + 2] == "--dir"]
    assert made == ["/etc", "/root/.pyenv", "/root/.pyenv/versions", "/tmp/autoloop-eval-x"]
    # Each parent before what is bound below it, and after the private mounts that would hide it.
    assert args.index("/root/.pyenv") < args.index("/root/.pyenv/versions/3.11")
    assert args.index("/root") < args.index("/root/.pyenv")
    assert args[args.index("/tmp") - 3 : args.index("/tmp")] == ["--perms", "1777", "--tmpfs"]
    assert args[args.index("/root") - 3 : args.index("/root")] == ["--perms", "1777", "--tmpfs"]
    assert "--perms" not in bwrap_args(policy, "/tmp/w", present=PRESENT)


def test_evaluation_limits_follow_max_memory_and_max_disk() -> None:
    half = 23 * GIB // 2
    assert evaluation_limits(None, 2 * GIB, 23 * GIB) == Limits(address_space=half, file_size=1 * GIB, memory=half)
    assert evaluation_limits(None, 2 * GIB, 2 * GIB).address_space == 4 * GIB  # at least 4 GiB
    assert evaluation_limits(None, 2 * GIB, 512 * GIB).address_space == 32 * GIB  # at most 32 GiB
    assert evaluation_limits(None, 2 * GIB, None).address_space == 32 * GIB
    assert evaluation_limits(256 << 20, 16 << 20, 23 * GIB) == Limits(
        address_space=256 << 20, file_size=16 << 20, memory=256 << 20
    )


def test_an_agent_gets_the_evaluations_memory_and_file_caps_but_no_address_space_limit() -> None:
    evaluation = evaluation_limits(256 << 20, 16 << 20, 8 * GIB)
    agent = agent_limits(evaluation, explicit_memory=True)
    assert (agent.memory, agent.file_size, agent.address_space) == (256 << 20, 16 << 20, None)
    assert agent.cpu_from_timeout and agent.memory_fallback
    assert not agent_limits(evaluation, explicit_memory=False).memory_fallback  # a default cap needs the cgroup
