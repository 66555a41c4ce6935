"""A hostile agent's summary and lesson carry terminal escapes (a window title, an OSC 8 link, a clipboard write, a
screen clear), bidirectional overrides and a mention: none of them reaches the run's output, the state file or the
program branch's `git log`; the candidate is still kept (the text is cleaned, not the change refused)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoloop_py.github.render import ProgramView, render_pull_request
from autoloop_py.state import file as statefile
from tests.security.counter_checkout import PROG, VALUE, counter_checkout

HOSTILE = "set x to 5\x1b]0;pwned\x07\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\\x1b]52;c;ZXZpbA==\x07\x1b[2J\u202e @octocat"
AGENT = """
cat > {prog}/code/value.py <<'VALUE_END'
{value}VALUE_END
printf 'SUMMARY: %s\\nLESSON: larger\\033[31m x\\033[0m wins\\n' "$(cat {summary})" > "$AUTOLOOP_REPLY_FILE"
"""
ESCAPES = ("\x1b", "\x07", "\u202e", "\x9b")


@pytest.fixture
def world(tmp_path: Path, isolated_git_config: None, run_git) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    work, origin = counter_checkout(tmp_path, run_git)
    summary = tmp_path / "summary.txt"
    summary.write_text(HOSTILE)
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT.format(prog=PROG, value=VALUE.format(x=5.0), summary=summary))
    return {"work": work, "origin": origin, "agent": agent}


def test_escapes_in_a_summary_reach_no_terminal_state_file_or_commit(world: dict[str, Path]) -> None:
    work, origin = world["work"], world["origin"]
    config, main = (work / ".git/config").read_bytes(), subprocess.check_output(["git", "rev-parse", "main"], cwd=origin)
    # As the runner's user: the agent's script lies in tmp_path, which a root runner's uid per agent cannot enter.
    env = {**os.environ, "AUTOLOOP_ISOLATION": "none", "AUTOLOOP_AGENT_COMMAND": f"bash {world['agent']}",
           "AUTOLOOP_SLOT_USER": "off"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "autoloop_py", "run", "--repo", str(work), "--program", "counter", "--proposer", "agent",
         "--iterations", "1"], env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    state_text = subprocess.check_output(["git", "show", "refs/heads/memory/autoloop:counter.md"], cwd=origin, text=True)
    log = subprocess.check_output(["git", "log", "--format=%B", "refs/heads/autoloop/counter", "refs/heads/memory/autoloop"],
                                  cwd=origin, text=True)  # fmt: skip
    for name, text in (("output", done.stdout + done.stderr), ("state file", state_text), ("git log", log)):
        assert not [c for c in ESCAPES if c in text], f"an escape reached the {name}: {text!r}"
    state = statefile.parse_state(state_text, "counter.md")
    assert state.machine.recent_statuses == ("accepted",) and state.machine.best_metric == 5.0
    assert "set x to 5" in state.history[0].text and "larger x wins" in state_text and "set x to 5" in log
    assert (work / ".git/config").read_bytes() == config
    assert subprocess.check_output(["git", "rev-parse", "main"], cwd=origin) == main
    # The draft PR body that would show the change names nobody and links nowhere.
    view = ProgramView("counter", "score", state.machine, latest_change=state.history[0].change, latest_iteration=1)
    body = render_pull_request(view)
    assert "`@octocat`" in body and "\x1b" not in body
