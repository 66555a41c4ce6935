"""Tests for autoloop_py.sandbox.private_network: what `status` and `check` say, and the refusal without slirp4netns.

The network itself is attacked in tests/security/test_agent_network.py.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from autoloop_py.errors import SandboxError
from autoloop_py.sandbox import private_network
from autoloop_py.sandbox.private_network import network_report, require_slirp
from autoloop_py.sandbox.run import bwrap_status, isolation_for, run_sandboxed


def _without_slirp(monkeypatch: pytest.MonkeyPatch) -> None:
    real = private_network.shutil.which
    monkeypatch.setattr(private_network.shutil, "which", lambda name: None if name == "slirp4netns" else real(name))


def test_a_missing_slirp4netns_is_refused_with_its_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_slirp(monkeypatch)
    with pytest.raises(SandboxError, match=r"needs slirp4netns, but slirp4netns is not installed; install slirp4netns"):
        require_slirp("agent-network: outside-only")
    with pytest.raises(SandboxError, match="apt-get install slirp4netns"):
        with private_network.private_network():
            pass


def test_the_report_names_each_program_that_cannot_have_its_network(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_slirp(monkeypatch)
    lines, problems = network_report([("a.md", "outside-only", ""), ("b.md", "host", ""), ("c.md", "outside-only",
                                                                                          "isolation: none")])
    assert lines == [
        "sandbox: agents of a.md, c.md get a network of their own through slirp4netns (no host loopback service, "
        "no abstract UNIX socket of the host)"
    ]
    assert any(p.startswith("a.md: agent-network: outside-only needs slirp4netns") for p in problems)
    assert "c.md: agent-network: outside-only needs bubblewrap, but isolation: none" in problems
    assert not any(p.startswith("b.md") for p in problems)


def test_host_networks_say_nothing() -> None:
    assert network_report([("a.md", "host", "")]) == ([], [])


def test_the_network_folder_and_descriptors_go_away(tmp_path: Path) -> None:
    if not private_network.slirp_status()[0]:
        pytest.skip("needs slirp4netns")
    with private_network.private_network() as network:
        folder = network.folder
        assert network.resolv.read_text() == "nameserver 10.0.2.3\n"
        fds = network.pass_fds
    assert not folder.exists()
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_the_network_is_attached_on_every_start(tmp_path: Path) -> None:
    # bubblewrap reports its pid before its loopback is up; slirp4netns configuring tap0 at that moment made half the
    # starts fail (`loopback: Failed RTM_NEWADDR`) before the runner waited for the loopback.
    if not (bwrap_status()[0] and private_network.slirp_status()[0]):
        pytest.skip("needs bubblewrap and slirp4netns")
    policy = replace(isolation_for("bwrap", network=False).agent, outside_only=True)
    # Relative names: a file the command names by absolute path is bound into the sandbox from the runner's side.
    command = "cd /proc/net && grep -q tap0 dev && cd /etc && grep -q 10.0.2.3 resolv.conf"
    results = [run_sandboxed(command, tmp_path, policy, env=dict(os.environ), timeout=60) for _ in range(12)]
    assert [(r.returncode, r.stderr) for r in results] == [(0, "")] * 12
