"""The outside agent's network: `host` reaches this machine's loopback services and abstract UNIX sockets,
`outside-only` (its own namespace through slirp4netns) reaches neither, and cannot be had without slirp4netns.

No test sends a packet beyond this machine's loopback: the hostile agent only tries 127.0.0.1 and an abstract
socket, and reads its interface list from /proc/net/dev.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

from autoloop_py.errors import SandboxError
from autoloop_py.sandbox import private_network
from autoloop_py.sandbox.run import isolation_for
from tests.security.conftest import PROG, Hostile

EVALUATE = """\
import json
ns = {}
exec(open("code/value.py").read(), ns)
print(json.dumps({"score": ns["x"]}))
"""

AGENT = """\
import os, pathlib, socket
seen = []
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=5) as conn:
        conn.sendall(b"loopback")
    seen.append("loopback=REACHED")
except OSError:
    seen.append("loopback=blocked")
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
        unix.settimeout(5)
        unix.connect({abstract!r})
        unix.sendall(b"abstract")
    seen.append("abstract=REACHED")
except OSError:
    seen.append("abstract=blocked")
devices = [line.split(":")[0].strip() for line in pathlib.Path("/proc/net/dev").read_text().splitlines()[2:]]
seen.append("tap0=" + ("yes" if "tap0" in devices else "no"))
pathlib.Path("{prog}/code/value.py").write_text("# EVOLVE-BLOCK-START\\nx = 2.0\\n# EVOLVE-BLOCK-END\\n")
pathlib.Path(os.environ["AUTOLOOP_REPLY_FILE"]).write_text("SUMMARY: " + " ".join(seen) + "\\n")
"""


class _Listeners:
    """A loopback TCP server and an abstract UNIX socket server of the test, recording what reached them."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.abstract = b"\0autoloop-test-" + secrets.token_hex(8).encode()
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.abstract)
        self.unix.listen()
        self.received: list[bytes] = []
        for server in (self.tcp, self.unix):
            threading.Thread(target=self._serve, args=(server,), daemon=True).start()

    def _serve(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(100))

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()


@pytest.fixture
def listeners() -> Iterator[_Listeners]:
    running = _Listeners()
    yield running
    running.close()


@pytest.fixture
def slirp() -> None:
    usable, why = private_network.slirp_status()
    if not usable:
        pytest.skip(f"needs slirp4netns: {why}")


def _run_agent(hostile: Hostile, tmp_path: Path, listeners: _Listeners, network: str) -> str:
    hostile.install(EVALUATE, frontmatter={"agent-network": network})
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT.format(port=listeners.port, abstract=listeners.abstract, prog=PROG))
    outcome = hostile.run("--proposer", "agent", "--agent-command", f"python3 {agent}")
    assert outcome.process.returncode == 0, outcome.log
    assert outcome.checkout[0] == outcome.checkout[1]
    return outcome.state


def test_outside_only_reaches_no_host_loopback_service_nor_abstract_socket(
    hostile: Hostile, bwrap: None, slirp: None, tmp_path: Path, listeners: _Listeners
) -> None:
    state = _run_agent(hostile, tmp_path, listeners, "outside-only")
    assert "loopback=blocked abstract=blocked tap0=yes" in state, state
    assert listeners.received == []
    assert "| Best Metric | 2 |" in state, state  # the agent still worked: its candidate was kept


def test_host_network_reaches_both_which_is_what_outside_only_removes(
    hostile: Hostile, bwrap: None, tmp_path: Path, listeners: _Listeners
) -> None:
    state = _run_agent(hostile, tmp_path, listeners, "host")
    assert "loopback=REACHED abstract=REACHED tap0=no" in state, state
    assert sorted(listeners.received) == [b"abstract", b"loopback"]


def test_the_command_line_overrides_the_program(
    hostile: Hostile, bwrap: None, slirp: None, tmp_path: Path, listeners: _Listeners
) -> None:
    hostile.install(EVALUATE)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT.format(port=listeners.port, abstract=listeners.abstract, prog=PROG))
    outcome = hostile.run(
        "--proposer", "agent", "--agent-command", f"python3 {agent}", "--agent-network", "outside-only"
    )
    assert "loopback=blocked abstract=blocked tap0=yes" in outcome.state, outcome.log
    assert listeners.received == []


def test_without_slirp4netns_the_run_refuses_and_names_the_fix(
    hostile: Hostile, bwrap: None, tmp_path: Path, listeners: _Listeners
) -> None:
    # A PATH holding every tool the runner needs but slirp4netns.
    tools = tmp_path / "bin"
    tools.mkdir()
    for directory in ("/usr/local/bin", "/usr/bin", "/bin"):
        for tool in sorted(Path(directory).iterdir()) if Path(directory).is_dir() else ():
            if tool.name != "slirp4netns" and not (tools / tool.name).exists():
                (tools / tool.name).symlink_to(tool)
    hostile.install(EVALUATE, frontmatter={"agent-network": "outside-only"})
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT.format(port=listeners.port, abstract=listeners.abstract, prog=PROG))
    outcome = hostile.run("--proposer", "agent", "--agent-command", f"python3 {agent}", env={"PATH": str(tools)})
    assert outcome.process.returncode != 0
    assert "agent-network: outside-only needs slirp4netns" in outcome.log, outcome.log
    assert "apt-get install slirp4netns" in outcome.log
    assert listeners.received == []  # the agent never ran on the host's network instead
    assert outcome.state == ""  # nothing recorded
    assert outcome.checkout[0] == outcome.checkout[1]


def test_outside_only_never_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxError, match="needs bubblewrap .*isolation: none"):
        isolation_for("none", network=False, agent_network="outside-only")
    monkeypatch.setattr(private_network.shutil, "which", lambda name: None)
    usable, _ = private_network.slirp_status()
    assert not usable
    with pytest.raises(SandboxError, match="bogus"):
        isolation_for("none", network=False, agent_network="bogus")


def test_check_names_a_program_whose_outside_only_network_cannot_be_had(hostile: Hostile) -> None:
    hostile.install(EVALUATE, frontmatter={"agent-network": "outside-only", "isolation": "none"})
    env = {**os.environ, "AUTOLOOP_ISOLATION": "", "COLUMNS": "1000"}  # one message, one line
    done = subprocess.run([sys.executable, "-m", "autoloop_py", "check", "--repo", str(hostile.repo)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "agent-network: outside-only needs bubblewrap, but isolation: none" in done.stdout, done.stdout
