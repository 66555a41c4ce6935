"""Hostile evaluations against `max-memory` and `max-disk`: one fills its copy, one allocates past the memory cap.

Each is recorded as an error whose note names the cap; the checkout's config, refs and HEAD are unchanged, nothing of
the candidate is published, and the fake secret is nowhere. They run without bubblewrap (`isolation: none`): the
caps are set by the runner in both modes, and the attackers write only into their own copy.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoloop_py.sandbox import process_limit
from autoloop_py.sandbox.memory_cgroup import memory_parent
from tests.security.conftest import PROG, SECRET, Hostile, Outcome, assert_recorded_error

FILL_DISK = """\
import json, os
written = 0
try:
    with open("fill.bin", "wb") as out:
        for _ in range(48):  # 48 MiB of real bytes, against a cap of 16 MiB
            out.write(os.urandom(1 << 20))
            written += 1 << 20
except OSError as err:
    print(json.dumps({"error": f"blocked: writing stopped at {written} bytes ({err})"}))
    raise SystemExit(0)
print(json.dumps({"score": 1e9}))
"""
EAT_MEMORY = """\
import json
try:
    hoard = bytearray(1 << 30)  # 1 GiB, against a cap of 256 MiB
except MemoryError:
    print("blocked: 1 GiB could not be allocated")
    raise
print(json.dumps({"score": 1e9}))
"""


def test_an_evaluation_that_fills_its_copy_is_an_error_naming_max_disk(hostile: Hostile) -> None:
    hostile.install(FILL_DISK, {"isolation": "none", "max-disk": "16MiB"})
    outcome = hostile.run()
    assert_recorded_error(outcome, "over the program's `max-disk` of 16777216 bytes")
    before, after = outcome.checkout
    assert before == after and "1e+09" not in outcome.state and "1000000000" not in outcome.state
    assert not outcome.leaked(SECRET)


def test_an_evaluation_past_max_memory_is_an_error_naming_it(hostile: Hostile) -> None:
    hostile.install(EAT_MEMORY, {"isolation": "none", "max-memory": "256MiB"})
    outcome = hostile.run()
    assert_recorded_error(outcome, "MemoryError", "`max-memory` of 268435456 bytes per process")
    before, after = outcome.checkout
    assert before == after and "1e+09" not in outcome.state
    assert not outcome.leaked(SECRET)


SPREAD_MEMORY = """\
import json, subprocess, sys
# Four processes of 120 MiB each: every one under RLIMIT_AS, 480 MiB together against a cap of 256 MiB.
hold = "import time; b = bytearray(120 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(5)"
children = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(4)]
codes = [child.wait() for child in children]
print(json.dumps({{"score": 1e9, "codes": str(codes)}}))
"""


@pytest.mark.skipif(
    memory_parent() is None and not (os.geteuid() == 0 and process_limit.resolve(process_limit.CGROUP).problem == ""),
    reason="needs a writable memory cgroup (a v1 memory hierarchy, or v2 with the memory controller delegated)",
)
def test_processes_that_hold_more_than_max_memory_together_are_killed_and_it_is_named(hostile: Hostile) -> None:
    hostile.install(SPREAD_MEMORY, {"isolation": "none", "max-memory": "256MiB"})
    outcome = hostile.run()
    assert_recorded_error(outcome, "killed at the program's `max-memory` of 268435456 bytes")
    before, after = outcome.checkout
    assert before == after and "1e+09" not in outcome.state
    assert not outcome.leaked(SECRET)


AGENT_EVALUATE = """\
import json
ns = {}
exec(open("code/value.py").read(), ns)
print(json.dumps({"score": ns["x"]}))
"""
# Both agents also set x to 1e9: if their run were not refused, that candidate would be evaluated and recorded.
AGENT_EAT_MEMORY = """\
import os, pathlib
pathlib.Path("{prog}/code/value.py").write_text("# EVOLVE-BLOCK-START\\nx = 1e9\\n# EVOLVE-BLOCK-END\\n")
hoard = bytearray(1 << 30)  # 1 GiB, every page written, against a cap of 256 MiB
hoard[::4096] = b"x" * len(hoard[::4096])
pathlib.Path(os.environ["AUTOLOOP_REPLY_FILE"]).write_text("SUMMARY: held 1 GiB\\n")
"""
AGENT_FILL_DISK = """\
import os, pathlib
pathlib.Path("{prog}/code/value.py").write_text("# EVOLVE-BLOCK-START\\nx = 1e9\\n# EVOLVE-BLOCK-END\\n")
os.makedirs("junk", exist_ok=True)
try:
    with open("junk/big.bin", "wb") as out:  # 48 MiB in one file: RLIMIT_FSIZE stops it at 16 MiB
        for _ in range(48):
            out.write(os.urandom(1 << 20))
except OSError as err:
    print("blocked: one file stopped at", os.path.getsize("junk/big.bin"), err)
for number in range(3):  # then 24 MiB more in files under the per-file cap
    with open(f"junk/part{{number}}.bin", "wb") as out:
        out.write(os.urandom(8 << 20))
pathlib.Path(os.environ["AUTOLOOP_REPLY_FILE"]).write_text("SUMMARY: filled the disk\\n")
"""


def _agent_run(hostile: Hostile, open_folder: Path, agent: str, frontmatter: dict[str, object]) -> Outcome:
    """Runs one iteration whose agent is the script `agent` (kept where its uid can read it), without bubblewrap."""
    hostile.install(AGENT_EVALUATE, {"isolation": "none", **frontmatter})
    script = open_folder / "agent.py"
    script.write_text(agent.format(prog=PROG))
    os.chmod(script, 0o644)
    return hostile.run("--proposer", "agent", "--agent-command", f"python3 {script}")


@pytest.mark.skipif(
    memory_parent() is None and not (os.geteuid() == 0 and process_limit.resolve(process_limit.CGROUP).problem == ""),
    reason="needs a writable memory cgroup (a v1 memory hierarchy, or v2 with the memory controller delegated)",
)
def test_an_agent_past_max_memory_is_killed_and_it_is_named(hostile: Hostile, open_folder: Path) -> None:
    outcome = _agent_run(hostile, open_folder, AGENT_EAT_MEMORY, {"max-memory": "256MiB"})
    assert_recorded_error(outcome, "the agent was killed at the program's `max-memory` of 268435456 bytes")
    before, after = outcome.checkout
    assert before == after and "1e+09" not in outcome.state and "1000000000" not in outcome.state
    assert not outcome.leaked(SECRET)


def test_an_agent_past_max_disk_is_an_error_naming_it(hostile: Hostile, open_folder: Path) -> None:
    outcome = _agent_run(hostile, open_folder, AGENT_FILL_DISK, {"max-disk": "16MiB"})
    assert_recorded_error(outcome, "over the program's `max-disk` of 16777216 bytes")
    disk = int(outcome.state.split("the agent left ", 1)[1].split()[0])
    assert 16 << 20 < disk < 48 << 20  # the one large file stopped at the per-file cap (RLIMIT_FSIZE)
    before, after = outcome.checkout
    assert before == after and "1e+09" not in outcome.state and "1000000000" not in outcome.state
    assert not outcome.leaked(SECRET)
