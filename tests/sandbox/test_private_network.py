"""Tests for autoloop_py.sandbox.private_network: what `status` and `check` say, and the refusal without slirp4netns.

The network itself is attacked in tests/security/test_agent_network.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoloop_py.errors import SandboxError
from autoloop_py.sandbox import private_network
from autoloop_py.sandbox.private_network import network_report, require_slirp


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
