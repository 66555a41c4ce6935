"""An evaluation's network (none by default, loopback server unreachable) and a secret it prints (masked everywhere)."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Iterator

import pytest

from tests.security.conftest import SECRET, Hostile, assert_recorded_error

CONNECT = """\
import json, socket
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=5) as conn:
        conn.sendall(b"exfiltrated")
except OSError as err:
    print(json.dumps({{"error": f"blocked: no connection to the loopback server ({{err.strerror or err}})"}}))
    raise SystemExit(0)
print(json.dumps({{"score": 1.0}}))
"""

PRINT_SECRET = """\
import json, sys
stolen = open({path!r}).read().strip()
print("here it is:", stolen)
print("on stderr too:", stolen, file=sys.stderr)
print(json.dumps({{"error": "leaking " + stolen, "note": stolen}}))
"""


class _Server:
    """A loopback TCP server that counts what connects to it."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(100))


@pytest.fixture
def server() -> Iterator[_Server]:
    """Returns a running loopback server (closed afterwards)."""
    running = _Server()
    yield running
    running.socket.close()


def test_evaluation_has_no_network(hostile: Hostile, bwrap: None, server: _Server) -> None:
    hostile.install(CONNECT.format(port=server.port))
    outcome = hostile.run()
    assert_recorded_error(outcome, "blocked: no connection to the loopback server")
    assert server.received == []


def test_evaluation_network_true_keeps_the_network(hostile: Hostile, bwrap: None, server: _Server) -> None:
    hostile.install(CONNECT.format(port=server.port), frontmatter={"evaluation-network": "true"})
    outcome = hostile.run()
    assert outcome.process.returncode == 0, outcome.log
    assert "blocked" not in outcome.state and "| Best Metric | 1 |" in outcome.state, outcome.state
    assert b"exfiltrated" in server.received


def test_a_printed_secret_never_leaves_the_runner(hostile: Hostile, open_folder: Path) -> None:
    # Unsandboxed, the evaluation can read a world-readable file holding the runner's secret; what it prints is masked.
    leak = open_folder / "leak.txt"
    leak.write_text(SECRET)
    os.chmod(leak, 0o644)
    hostile.install(PRINT_SECRET.format(path=str(leak)), frontmatter={"isolation": "none"})
    outcome = hostile.run("--verbose")
    assert_recorded_error(outcome, "evaluation reported an error: leaking ***")
    assert outcome.leaked(SECRET) == []
    assert "NOT SANDBOXED" in outcome.log or "not sandboxed" in outcome.log.lower()
