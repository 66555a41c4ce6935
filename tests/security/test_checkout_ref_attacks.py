"""An agent with no sandbox (`isolation: none`) finds the user's checkout through `/proc/<ancestor>/cwd` and moves the
runner's own refs there: the local memory branch (which the runner pushes after its record) and a tick's side ref
`refs/autoloop/slots/<name>/<iteration>` (pushed after a tick). The runner's refs are left out of the checkout's
whole-run snapshot, since the run moves them itself; over the proposer's window it moves none, so the run stops,
naming both refs, and records and pushes nothing.

The attacker only looks at ancestors whose working directory lies in the test's own tmp folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.security.counter_checkout import PROG, VALUE, counter_checkout

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
  main=$(git -C "$checkout" rev-parse refs/heads/main)
  git -C "$checkout" update-ref refs/heads/memory/autoloop "$main"
  mkdir -p "$checkout/.git/refs/autoloop/slots/x"
  echo "$main" > "$checkout/.git/refs/autoloop/slots/x/7"
  echo "$checkout" > {found}
fi
cat > {prog}/code/value.py <<'EOF'
{value}EOF
echo "SUMMARY: set x to {x}" > "$AUTOLOOP_REPLY_FILE"
"""
HONEST = "cat > {prog}/code/value.py <<'EOF'\n{value}EOF\necho 'SUMMARY: x = 2' > \"$AUTOLOOP_REPLY_FILE\"\n"


def _run(work: Path, agent: Path) -> subprocess.CompletedProcess[str]:
    """Runs one iteration as its own process, in the checkout (as a user would), without a sandbox."""
    # The agent plays a user running autoloop on their own checkout (a root runner would give it a uid of its own).
    env = {**os.environ, "AUTOLOOP_ISOLATION": "none", "AUTOLOOP_AGENT_COMMAND": f"bash {agent}", "AUTOLOOP_SLOT_USER": "off"}
    return subprocess.run(
        [sys.executable, "-m", "autoloop_py", "run", "--program", "counter", "--proposer", "agent", "--iterations", "1"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _refs(repo: Path) -> bytes:
    done = subprocess.run(["git", "for-each-ref", "--format=%(refname) %(objectname)"], cwd=repo, capture_output=True,
                          check=True)  # fmt: skip
    return done.stdout


def test_an_agent_moving_the_memory_branch_and_planting_a_slot_ref_stops_the_run(
    tmp_path: Path, isolated_git_config: None, run_git  # type: ignore[no-untyped-def]
) -> None:
    work, origin = counter_checkout(tmp_path, run_git)
    agent = tmp_path / "agent.sh"
    # A first, honest iteration: the memory branch exists here and on origin.
    agent.write_text(HONEST.format(prog=PROG, value=VALUE.format(x=2.0)))
    first = _run(work, agent)
    assert first.returncode == 0, first.stdout + first.stderr
    memory_before = run_git(work, "rev-parse", "refs/heads/memory/autoloop").strip()
    origin_before = _refs(origin)
    agent.write_text(AGENT.format(tmp=tmp_path, found=tmp_path / "FOUND", prog=PROG, value=VALUE.format(x=5.0), x=5))
    done = _run(work, agent)
    assert (tmp_path / "FOUND").read_text().strip() == str(work)  # the attacker found the checkout
    log = done.stdout + done.stderr
    assert done.returncode != 0, log
    assert "autoloop refs changed while the proposer ran" in log, log
    assert "refs/autoloop/slots/x/7 was created" in log and "refs/heads/memory/autoloop moved" in log
    assert "not recorded and nothing was pushed" in log
    assert _refs(origin) == origin_before  # nothing published: no record, no branch, no slot ref
    # The runner moved nothing back or forth itself: the refs are as the attacker left them, for the user to see.
    main = run_git(work, "rev-parse", "refs/heads/main").strip()
    assert run_git(work, "rev-parse", "refs/heads/memory/autoloop").strip() == main != memory_before
