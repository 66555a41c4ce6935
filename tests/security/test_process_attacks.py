"""Attacks on other processes from an evaluation: environments in /proc, the process list, fork storms, memory.

Each evaluator is hostile and run by `autoloop run`; each test asserts the attack was blocked (the
evaluator says so in its recorded error), that nothing escaped, and that the checkout is untouched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoloop_py.sandbox import process_limit, slot_user
from autoloop_py.sandbox.cgroup import pids_limit
from autoloop_py.sandbox.run import bwrap_status
from tests.security.conftest import SECRET, Hostile, assert_recorded_error

# Fork storms as uid 65534 use up that user's RLIMIT_NPROC headroom: under pytest-xdist they run
# in one worker, never beside another test's commands as that uid.
pytestmark = pytest.mark.xdist_group("uid-65534")

STEAL_ENVIRON = """\
import json, os
found, readable = [], 0
chain, pid = [], os.getppid()
while pid > 1 and len(chain) < 20:  # the runner, its parent, and theirs
    chain.append(pid)
    try:
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except OSError:
        break
pids = {int(p) for p in os.listdir("/proc") if p.isdigit()} | set(chain)
for pid in sorted(pids):
    try:
        data = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        continue
    readable += 1
    found += [e.decode() for e in data.split(b"\\0") if e.startswith((b"FAKE_TOKEN=", b"AUTOLOOP_RUNNER_PID="))]
if found:
    print("stolen:", found)
    print(json.dumps({"error": "stole " + " ".join(sorted(set(found)))}))
else:
    print(json.dumps({"error": f"blocked: no secret in the environment of the {readable} processes it could read"}))
"""

LIST_PROCESSES = """\
import json, os
MARK = "{mark}"
mine, outside = 0, []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        cmdline = open(f"/proc/{{pid}}/cmdline", "rb").read()
    except OSError:
        continue
    mine += 1
    if MARK.encode() in cmdline:
        outside.append(pid)
if outside:
    print(json.dumps({{"error": f"found the bystander process {{outside}} among {{mine}}"}}))
else:
    print(json.dumps({{"error": f"blocked: {{mine}} processes visible, the bystander not among them"}}))
"""

FORK_STORM = """\\
import json, os, sys, time
MARK = "{mark}"
if MARK not in sys.argv:  # every child carries MARK on its command line, apart from other tests' evaluators
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), MARK])
children = 0
try:
    for _ in range(3000):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
except OSError as err:
    print(json.dumps({{"error": f"blocked: fork failed after {{children}} children ({{err.strerror}})"}}))
    raise SystemExit(0)
print(json.dumps({{"error": f"forked all {{children}} children"}}))
"""

# A real fork bomb: every process forks two more, each of which does the same, and all of them stay.
# Capped so that a limit that fails cannot take the machine down: a tree of at most 2**11 processes, each
# sleeping 60 s. Every process carries MARK on its command line (the bomb re-executes itself with it).
FORK_BOMB = """\
import json, os, sys, time
MARK = "{mark}"
if MARK not in sys.argv:
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), MARK])
DEPTH = 10
read_end, write_end = os.pipe()
os.set_blocking(read_end, False)


def bomb(depth):
    for _ in range(2):
        try:
            pid = os.fork()
        except OSError:
            os.write(write_end, b"x")  # tell the first process: a fork was refused
            return
        if pid == 0:
            if depth < DEPTH:
                bomb(depth + 1)
            time.sleep(60)
            os._exit(0)


bomb(1)
refused, deadline = 0, time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        refused += len(os.read(read_end, 4096))
    except BlockingIOError:
        if refused:
            break
        time.sleep(0.05)
if refused:
    print(json.dumps({{"error": f"blocked: fork refused {{refused}} times, the bomb stopped, as uid {{os.getuid()}}"}}))
else:
    print(json.dumps({{"error": "the fork bomb grew to all its 2046 processes"}}))
"""

HUGE_MAPPING = """\
import json, mmap
try:
    # 100 GiB, reserved without committing (0x4000 = MAP_NORESERVE on Linux): only an address-space limit refuses it.
    area = mmap.mmap(-1, 100 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)
except (OSError, MemoryError) as err:
    print(json.dumps({"error": f"blocked: mapping 100 GiB failed ({err})"}))
    raise SystemExit(0)
print(json.dumps({"error": "mapped 100 GiB"}))
"""


def test_evaluation_cannot_read_the_runners_environment(hostile: Hostile, bwrap: None) -> None:
    hostile.install(STEAL_ENVIRON)
    outcome = hostile.run()
    assert_recorded_error(outcome, "blocked: no secret in the environment")
    assert outcome.leaked(SECRET) == []
    assert outcome.checkout[0] == outcome.checkout[1]


def test_evaluation_sees_no_other_process(hostile: Hostile, bwrap: None) -> None:
    mark = f"autoloop-bystander-{os.getpid()}"
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", mark])
    try:
        hostile.install(LIST_PROCESSES.format(mark=mark))
        outcome = hostile.run()
    finally:
        bystander.kill()
        bystander.wait()
    assert_recorded_error(outcome, "the bystander not among them")
    visible = int(outcome.state.split("blocked: ", 1)[1].split(" ", 1)[0])
    assert visible <= 4  # bwrap's init, bash, python: nothing of the host's
    assert outcome.checkout[0] == outcome.checkout[1]


@pytest.mark.skipif(
    not process_limit.resolve(process_limit.AUTO).enforced,
    reason=process_limit.describe(process_limit.resolve(process_limit.AUTO)),
)
@pytest.mark.parametrize("isolation", ["auto", "none"])
def test_fork_storm_hits_the_process_limit_and_the_runner_survives(hostile: Hostile, isolation: str) -> None:
    mark = f"autoloop-fork-storm-{os.getpid()}-{isolation}"
    hostile.install(FORK_STORM.format(mark=mark), {"isolation": isolation})
    started = time.monotonic()
    outcome = hostile.run()
    elapsed = time.monotonic() - started
    assert_recorded_error(outcome, "blocked: fork failed after")
    assert outcome.checkout[0] == outcome.checkout[1]
    assert elapsed < 60  # the storm's children sleep 60 s: they were killed, not waited for
    assert _marked_survivors(mark) == []


def test_address_space_is_limited(hostile: Hostile) -> None:
    hostile.install(HUGE_MAPPING)
    outcome = hostile.run()
    assert_recorded_error(outcome, "blocked: mapping 100 GiB failed")


def _limit_skip(mechanism: str, isolation: str) -> str:
    """Returns why the forced mechanism cannot run here under this isolation ("" when it can)."""
    if isolation == "bwrap" and not bwrap_status()[0]:
        return f"needs a working bubblewrap sandbox: {bwrap_status()[1]}"
    problem = process_limit.resolve(mechanism).problem
    if problem:
        return problem
    if mechanism == process_limit.UID and isolation == "none":
        # Without bubblewrap's mounts, uid 65534 runs what it can reach itself (not a Python under /root).
        probe = [*process_limit.setpriv_prefix(), "bash", "-c", "cd / && python3 -c pass"]
        if subprocess.run(probe, capture_output=True, timeout=30).returncode != 0:
            return "uid 65534 can reach no python3 on PATH here, so the evaluator cannot start"
    return ""


@pytest.mark.parametrize("mechanism", [process_limit.CGROUP, process_limit.UID])
@pytest.mark.parametrize("isolation", ["none", "bwrap"])
def test_a_fork_bomb_is_stopped_by_each_process_limit(hostile: Hostile, mechanism: str, isolation: str) -> None:
    why = _limit_skip(mechanism, isolation)
    if why:
        pytest.skip(why)
    mark = f"autoloop-fork-bomb-{os.getpid()}-{mechanism}-{isolation}"
    hostile.install(FORK_BOMB.format(mark=mark), {"isolation": isolation})
    env = {process_limit.ENV_VAR: mechanism}
    own_uid = isolation == "none" and not slot_user.wanted(False, os.environ, process_limit.facts())
    if mechanism == process_limit.CGROUP and own_uid:
        env[slot_user.ENV_VAR] = "off"  # the cgroup alone: no uid of its own, whose RLIMIT_NPROC would hold too
    # Outer bounds, should the limit under test fail: a wall clock, and a pids cgroup 8x the limit where root has one.
    with pids_limit(4096) as outer:
        wrap = ["timeout", "-k", "5", "120", *(outer.wrap([]) if outer else [])]
        started = time.monotonic()
        outcome = hostile.run(env=env, wrap=wrap)
        elapsed = time.monotonic() - started
        left = _marked_survivors(mark)  # before the outer group's own clean-up could hide them
    assert_recorded_error(outcome, "blocked: fork refused")
    uid = process_limit.NOBODY if mechanism == process_limit.UID else os.geteuid()
    if mechanism == process_limit.UID and own_uid:  # RLIMIT_NPROC of the uid the command got for itself
        uid = int(outcome.state.split("the bomb stopped, as uid ", 1)[1].split()[0])
        assert slot_user.FIRST_UID <= uid < slot_user.FIRST_UID + slot_user.UID_COUNT
    assert f"the bomb stopped, as uid {uid}" in outcome.state  # the mechanism asked for held it
    assert elapsed < 60  # the bomb's processes sleep 60 s: they were killed, not waited for
    assert left == []
    assert outcome.checkout[0] == outcome.checkout[1]
    assert outcome.leaked(SECRET) == []


def _marked_survivors(mark: str, wait: float = 5.0) -> list[int]:
    """Returns the live processes whose command line holds mark, after up to `wait` s for the killed to go."""
    deadline = time.monotonic() + wait
    while True:
        found = []
        for name in os.listdir("/proc"):
            try:
                if not name.isdigit() or mark.encode() not in Path(f"/proc/{name}/cmdline").read_bytes():
                    continue
                state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state not in ("Z", "X"):
                found.append(int(name))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)



ESCAPE_CGROUP = """\
import json, os, subprocess, time
mine = [line.split(":", 2) for line in open("/proc/self/cgroup").read().splitlines()]
pids = next(((h, p) for _, h, p in mine if h == "pids"), None) or next((("", p) for n, h, p in mine if n == "0"), None)
base = "/sys/fs/cgroup/pids" if pids[0] == "pids" else "/sys/fs/cgroup"
parent = os.path.join(base + os.path.dirname(pids[1]), "cgroup.procs")
# A child that leaves the process group and moves itself out of the pids cgroup, then waits (where it could fork).
subprocess.Popen(["setsid", "sh", "-c", f'echo $$ > {{parent}} && exec sleep 60 # {mark}'],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1)
print(json.dumps({{"score": 2.0}}))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or process_limit.resolve(process_limit.CGROUP).problem != "",
    reason="needs a root runner with a writable pids cgroup (the mechanism a root process escapes from)",
)
def test_an_evaluation_that_leaves_its_pids_cgroup_is_an_error_and_killed(hostile: Hostile) -> None:
    mark = f"autoloop-cgroup-escape-{os.getpid()}"
    hostile.install(ESCAPE_CGROUP.format(mark=mark), {"isolation": "none"})
    # As root itself (a root runner otherwise gives it a uid of its own, which cannot write cgroup.procs at all:
    # tests/security/test_root_slot_users.py), the escape is only found afterwards.
    outcome = hostile.run(env={process_limit.ENV_VAR: "cgroup", slot_user.ENV_VAR: "off"})
    assert_recorded_error(outcome, "broke its confinement", "left its pids cgroup")
    assert "metric 2" not in outcome.log and _marked_survivors(mark) == []
    assert outcome.checkout[0] == outcome.checkout[1]
