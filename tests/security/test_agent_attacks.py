"""An outside agent inside the sandbox: network and its own key kept, the runner's secrets and the user's files not."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from tests.security.conftest import PROG, SECRET, Hostile

EVALUATE = """\
import json
ns = {}
exec(open("code/value.py").read(), ns)
print(json.dumps({"score": ns["x"]}))
"""

AGENT = """\
import os, pathlib, socket
seen = []
seen.append("key=" + ("yes" if os.environ.get("MY_AGENT_KEY") == "agent-key-123456" else "no"))
seen.append("token=" + ("LEAKED" if "FAKE_TOKEN" in os.environ else "absent"))
try:
    pathlib.Path({credentials!r}).read_text()
    seen.append("credentials=READ")
except OSError:
    seen.append("credentials=blocked")
try:
    pathlib.Path({checkout!r}, "PWNED.txt").write_text("x")
    seen.append("checkout=WRITTEN")
except OSError:
    seen.append("checkout=blocked")
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=5) as conn:
        conn.sendall(b"agent")
    seen.append("network=ok")
except OSError:
    seen.append("network=blocked")
print("my key is", os.environ.get("MY_AGENT_KEY"))
pathlib.Path("{prog}/code/value.py").write_text("# EVOLVE-BLOCK-START\\nx = 2.0\\n# EVOLVE-BLOCK-END\\n")
pathlib.Path(os.environ["AUTOLOOP_REPLY_FILE"]).write_text("SUMMARY: " + " ".join(seen) + "\\n")
"""


def test_agent_keeps_network_and_its_key_but_nothing_else(
    hostile: Hostile, bwrap: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            received.append(conn.recv(100))

    threading.Thread(target=serve, daemon=True).start()
    home = tmp_path / "home"
    home.mkdir()
    (home / ".git-credentials").write_text("https://x:GITCRED-SECRET-1@github.com\n")
    monkeypatch.setenv("HOME", str(home))
    hostile.install(EVALUATE)
    agent = tmp_path / "agent.py"
    port = listener.getsockname()[1]
    agent.write_text(AGENT.format(credentials=str(home / ".git-credentials"), checkout=str(hostile.repo), port=port, prog=PROG))
    env = {"MY_AGENT_KEY": "agent-key-123456", "AUTOLOOP_AGENT_ENV": "MY_AGENT_KEY"}
    try:
        outcome = hostile.run("--proposer", "agent", "--agent-command", f"python3 {agent}", env=env)
    finally:
        listener.close()
    assert outcome.process.returncode == 0, outcome.log
    assert "key=yes token=absent credentials=blocked checkout=blocked network=ok" in outcome.state, outcome.state
    assert received == [b"agent"]
    assert not (hostile.repo / "PWNED.txt").exists()
    for secret in (SECRET, "agent-key-123456", "GITCRED-SECRET-1"):
        assert outcome.leaked(secret) == [], secret
    assert outcome.checkout[0] == outcome.checkout[1]


PLANT_KEY = """\
import os, pathlib
key = os.environ["MY_AGENT_KEY"]
pathlib.Path("{prog}/code/value.py").write_text(f"# EVOLVE-BLOCK-START\\nx = 3.0  # {{key}}\\n# EVOLVE-BLOCK-END\\n")
pathlib.Path(os.environ["AUTOLOOP_REPLY_FILE"]).write_text("SUMMARY: hide the key in the code\\n")
"""


def test_a_candidate_holding_a_secret_is_rejected_and_never_pushed(hostile: Hostile, tmp_path: Path) -> None:
    hostile.install(EVALUATE)
    agent = tmp_path / "agent.py"
    agent.write_text(PLANT_KEY.format(prog=PROG))
    env = {"MY_AGENT_KEY": "agent-key-123456", "AUTOLOOP_AGENT_ENV": "MY_AGENT_KEY"}
    outcome = hostile.run("--proposer", "agent", "--agent-command", f"python3 {agent}", env=env)
    assert outcome.process.returncode == 0, outcome.log
    assert "code/value.py holds the value of a secret variable" in outcome.state, outcome.state
    assert outcome.leaked("agent-key-123456") == []


HUGE_FILES = """\
import os, pathlib
# A sparse 900 MiB Target file and reply (the sandbox caps files at 1 GiB): reading them whole would show.
with open("{prog}/code/value.py", "wb") as handle:
    handle.truncate(900 << 20)
with open(os.environ["AUTOLOOP_REPLY_FILE"], "wb") as handle:
    handle.write(b"SUMMARY: a very large file\\n")
    handle.truncate(900 << 20)
"""


def test_an_agent_planting_huge_files_is_rejected_without_reading_them(hostile: Hostile, tmp_path: Path) -> None:
    hostile.install(EVALUATE)
    agent = tmp_path / "agent.py"
    agent.write_text(HUGE_FILES.format(prog=PROG))
    outcome = hostile.run("--proposer", "agent", "--agent-command", f"python3 {agent}")
    assert outcome.process.returncode == 0, outcome.log
    # No process of the runner's tree ever held the 900 MiB.
    assert outcome.peak_rss_kib is not None and outcome.peak_rss_kib < 600 << 10
    assert f"code/value.py is {900 << 20} bytes, over the program's limit of 1048576 (`max-file-bytes`)" in outcome.state
    assert outcome.checkout[0] == outcome.checkout[1]
