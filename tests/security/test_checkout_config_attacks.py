"""An agent with no sandbox (`isolation: none`) finds the user's checkout through `/proc/<ancestor>/cwd` and writes
commands into its `.git/config` (a remote's uploadpack and receivepack, a filter switched on by `.git/info/attributes`,
`core.sshCommand`, a credential helper) and a ref. The runner stops after the proposer, saying what changed; none of
the planted commands runs, in that run or in the next; nothing is recorded or pushed.

The attacker only looks at ancestors whose working directory lies in the test's own tmp folder (the "user's
checkout" is a tmp repository), so it touches nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoloop_py.state import file as statefile
from tests.security.counter_checkout import PROG, VALUE, counter_checkout

# Appended to the checkout's .git/config by the agent: every key names the payload.
PLANTED = """[remote "origin"]
\tuploadpack = {payload}
\treceivepack = {payload}
[filter "evil"]
\tclean = {payload}
\tsmudge = {payload}
\tprocess = {payload}
\trequired = true
[diff "evil"]
\ttextconv = {payload}
[merge "evil"]
\tdriver = {payload}
[core]
\tsshCommand = {payload}
\taskPass = {payload}
[credential]
\thelper = !{payload}
"""
AGENT = r"""
set -u
pid=$$
checkout=
while [ "$pid" -gt 1 ]; do
  cwd=$(readlink /proc/$pid/cwd 2>/dev/null || true)
  case "$cwd" in {tmp}/*) if [ -d "$cwd/.git" ]; then checkout=$cwd; break; fi;; esac
  pid=$(awk '/^PPid:/ {{print $2}}' /proc/$pid/status)
done
if [ -n "$checkout" ]; then
  cat {planted} >> "$checkout/.git/config"
  echo '* filter=evil diff=evil merge=evil' >> "$checkout/.git/info/attributes"
  echo "$checkout" > {found}
fi
cat > {prog}/code/value.py <<'EOF'
{value}EOF
echo "SUMMARY: set x to 5" > "$AUTOLOOP_REPLY_FILE"
"""


@pytest.fixture
def world(tmp_path: Path, isolated_git_config: None, run_git) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    """Returns the user's checkout (`work`), its bare `origin`, the payload, its marker and the agent command file."""
    work, origin = counter_checkout(tmp_path, run_git)
    marker, payload = tmp_path / "PAYLOAD-RAN", tmp_path / "payload.sh"
    payload.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\nexit 1\n')
    payload.chmod(0o755)
    planted = tmp_path / "planted.cfg"
    planted.write_text(PLANTED.format(payload=payload))
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT.format(tmp=tmp_path, planted=planted, found=tmp_path / "FOUND", prog=PROG,
                                  value=VALUE.format(x=5.0)))  # fmt: skip
    return {"work": work, "origin": origin, "marker": marker, "agent": agent, "planted": planted, "tmp": tmp_path}


def _run(world: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    """Runs one iteration as its own process, in the checkout (as a user would), without a sandbox."""
    # The agent runs as the checkout's owner, as a non-root runner's does (as root it would get a uid of its own,
    # which cannot write the config at all: test_root_slot_users.py).
    env = {**os.environ, "AUTOLOOP_ISOLATION": "none", "AUTOLOOP_AGENT_COMMAND": f"bash {world['agent']}",
           "GITHUB_TOKEN": "ghs_fake_token_of_the_test", "AUTOLOOP_SLOT_USER": "off"}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "autoloop_py", "run", "--program", "counter", "--proposer", "agent", "--iterations", "1"],
        cwd=world["work"], env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _refs(repo: Path) -> bytes:
    done = subprocess.run(["git", "for-each-ref", "--format=%(refname) %(objectname)"], cwd=repo, capture_output=True,
                          check=True)  # fmt: skip
    return done.stdout


def _user_refs(repo: Path) -> list[bytes]:
    own = (b"refs/heads/autoloop/", b"refs/heads/memory/", b"refs/remotes/", b"refs/autoloop/")
    return [line for line in _refs(repo).splitlines() if not line.startswith(own)]


def test_an_agent_that_plants_commands_in_the_checkout_config_stops_the_run_and_none_runs(
    world: dict[str, Path],
) -> None:
    work, origin = world["work"], world["origin"]
    config_before, origin_before, refs_before = (work / ".git/config").read_bytes(), _refs(origin), _user_refs(work)
    head_before = (work / ".git/HEAD").read_bytes()
    done = _run(world)
    # The attacker found the checkout where a user's run would show it.
    assert (world["tmp"] / "FOUND").read_text().strip() == str(work)
    assert done.returncode != 0
    log = done.stdout + done.stderr
    assert "changed while the proposer ran" in log and "config changed" in log and "info/attributes appeared" in log
    assert "not recorded and nothing was pushed" in log
    assert not world["marker"].exists(), world["marker"].read_text()
    # The runner wrote nothing: the config is exactly the user's plus what the attacker appended; refs, HEAD, origin.
    assert (work / ".git/config").read_bytes() == config_before + world["planted"].read_bytes()
    assert _user_refs(work) == refs_before and (work / ".git/HEAD").read_bytes() == head_before
    assert _refs(origin) == origin_before  # no memory branch, no program branch: nothing published
    assert b"ghs_fake_token_of_the_test" not in log.encode()

    # The next run in that checkout (the planted config still there) runs none of it either, and records.
    (world["agent"]).write_text(f"cat > {PROG}/code/value.py <<'EOF'\n{VALUE.format(x=6.0)}EOF\n"
                                "echo 'SUMMARY: x = 6' > \"$AUTOLOOP_REPLY_FILE\"\n")  # fmt: skip
    again = _run(world)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not world["marker"].exists(), world["marker"].read_text()
    pushed = subprocess.run(["git", "show", "refs/heads/memory/autoloop:counter.md"], cwd=origin, capture_output=True,
                            text=True, check=True).stdout  # fmt: skip
    state = statefile.parse_state(pushed, "counter.md")
    assert state.machine.recent_statuses == ("accepted",) and state.machine.best_metric == 6.0
    assert (work / ".git/config").read_bytes() == config_before + world["planted"].read_bytes()
