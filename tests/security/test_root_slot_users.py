"""A root runner without bubblewrap (`isolation: none`): each evaluation runs as a uid of its own (slot_user.py).

Hostile evaluators, run by `autoloop run` as root: one writes its pid into other cgroups' `cgroup.procs` and then
forks 600 processes; two parallel slots try to read and rewrite each other's copy; one tries to write the user's
checkout and its `.git`; one links root's file into its copy and as its report, for the runner to read back. Each
attack is refused, the run records why, and the checkout's config, refs and files and origin's main branch are
byte-identical afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.sandbox import process_limit, slot_user
from tests.security.conftest import SECRET, Hostile, assert_recorded_error


def _skip() -> str:
    if os.geteuid() != 0:
        return "needs a root runner: only root gives each evaluation a uid of its own"
    why = slot_user.wanted(False, os.environ, process_limit.facts())
    if why:
        return f"evaluations cannot get a uid of their own here: {why}"
    probe = [*process_limit.setpriv_prefix(slot_user.FIRST_UID), "bash", "-c", "cd / && python3 -c pass"]
    if subprocess.run(probe, capture_output=True, timeout=30).returncode != 0:
        return "an unprivileged uid can reach no python3 on PATH here, so the evaluator cannot start"
    return ""


pytestmark = pytest.mark.skipif(bool(_skip()), reason=_skip() or "runs")


def _uid_in(state: str) -> int:
    """Returns the uid the evaluator said it ran as, checked to be one of the slot users'."""
    uid = int(state.split("as uid ", 1)[1].split()[0].rstrip(";,)"))
    assert slot_user.FIRST_UID <= uid < slot_user.FIRST_UID + slot_user.UID_COUNT
    return uid


def _origin_main(origin: Path) -> str:
    return subprocess.run(["git", "rev-parse", "refs/heads/main"], cwd=origin, capture_output=True, text=True).stdout


ESCAPE_AND_FORK = """\
import glob, json, os, sys, time
MARK = "{mark}"
if MARK not in sys.argv:  # every process carries MARK on its command line
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), MARK])
before = open("/proc/self/cgroup").read()
targets = set(glob.glob("/sys/fs/cgroup/cgroup.procs") + glob.glob("/sys/fs/cgroup/*/cgroup.procs"))
for line in before.splitlines():  # the parent of each group it is in
    _, controllers, path = line.split(":", 2)
    for base in ["/sys/fs/cgroup/" + c for c in controllers.split(",") if c] or ["/sys/fs/cgroup"]:
        targets.add(os.path.join(base + os.path.dirname(path.rstrip("/")), "cgroup.procs"))
moves = []
for target in sorted(t for t in targets if os.path.exists(t)):
    try:
        with open(target, "w") as handle:
            handle.write(str(os.getpid()))
        moves.append("MOVED into " + target)
    except OSError as err:
        moves.append(type(err).__name__)
unchanged = open("/proc/self/cgroup").read() == before
children = 0
try:
    for _ in range(600):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
    result = f"ESCAPED: forked all {{children}}"
except OSError as err:
    result = f"fork failed after {{children}} children ({{err.strerror}})"
refused = sorted(set(moves))
said = f"blocked: moves {{refused}} of {{len(moves)}}, cgroups unchanged {{unchanged}}, {{result}}"
print(json.dumps({{"error": f"{{said}}, as uid {{os.getuid()}}"}}))
"""


def test_an_evaluation_cannot_move_itself_out_of_its_cgroups_and_its_forks_stop_at_the_cap(hostile: Hostile) -> None:
    mark = f"autoloop-slot-escape-{os.getpid()}"
    hostile.install(ESCAPE_AND_FORK.format(mark=mark), {"isolation": "none"})
    origin = _origin_main(hostile.origin)
    outcome = hostile.run()
    assert_recorded_error(
        outcome, "blocked: moves ['PermissionError'] of", "cgroups unchanged True", "fork failed after"
    )
    assert "MOVED" not in outcome.state and "ESCAPED" not in outcome.state
    children = int(outcome.state.split("fork failed after ", 1)[1].split()[0])
    assert children < 600
    uid = _uid_in(outcome.state)
    assert process_limit.pids_of(uid) == []  # nothing of it survived the run
    assert outcome.checkout[0] == outcome.checkout[1] and _origin_main(hostile.origin) == origin
    assert outcome.leaked(SECRET) == []


SIBLING = """\
import json, os, time
HERE = os.environ["AUTOLOOP_REPO_ROOT"]
MEET = "{meet}"
EVALUATOR = ".autoloop/programs/hostile/code/evaluate.py"
mine = open(os.path.join(HERE, EVALUATOR)).read()
with open(os.path.join(MEET, str(os.getpid())), "w") as handle:
    handle.write(HERE)


def attempts(other):
    target = os.path.join(other, EVALUATOR)
    steps = (("list", lambda: os.listdir(other)), ("read", lambda: open(target).read()),
             ("rewrite", lambda: open(target, "a").write("print('PWNED')")))
    done = []
    for name, step in steps:
        try:
            step()
            done.append(name + "=DONE")
        except OSError as err:
            done.append(name + "=" + type(err).__name__)
    return " ".join(done)


tried, deadline, stop = {{}}, time.monotonic() + 15, None
while time.monotonic() < (stop or deadline):
    for name in os.listdir(MEET):
        other = open(os.path.join(MEET, name)).read()
        if other != HERE and other not in tried and os.path.exists(other):  # a sibling slot's live copy
            tried[other] = attempts(other)
            stop = stop or time.monotonic() + 3  # stay a while: the sibling attacks this copy meanwhile
    time.sleep(0.1)
intact = open(os.path.join(HERE, EVALUATOR)).read() == mine
if not tried:  # evaluated alone (the baseline): no sibling to attack
    ns = {{}}
    exec(open("code/value.py").read(), ns)
    print(json.dumps({{"score": ns["x"]}}))
else:
    said = "; ".join(sorted(set(tried.values())))
    said = f"blocked: sibling copy {{said}}; own evaluator intact {{intact}}"
    print(json.dumps({{"error": f"{{said}}, as uid {{os.getuid()}}"}}))
"""


def test_parallel_slots_cannot_read_or_rewrite_each_others_copy(hostile: Hostile, open_folder: Path) -> None:
    meet = open_folder / "meet"
    meet.mkdir()
    os.chmod(meet, 0o1777)  # where the slots say where their copies are; nothing else is shared
    hostile.install(SIBLING.format(meet=meet), {"isolation": "none"})
    origin = _origin_main(hostile.origin)
    outcome = hostile.run("--proposer", "tune", "--parallel", "2", "--iterations", "2")  # two slots in flight at once
    assert outcome.process.returncode == 0, outcome.log
    refused = "blocked: sibling copy list=PermissionError read=PermissionError rewrite=PermissionError"
    assert outcome.state.count(refused) == 2, outcome.state  # each slot tried the other's copy, live
    assert outcome.state.count("own evaluator intact True") == 2
    assert "=DONE" not in outcome.state and "PWNED" not in outcome.state
    assert outcome.checkout[0] == outcome.checkout[1] and _origin_main(hostile.origin) == origin
    assert outcome.leaked(SECRET) == []


CHECKOUT = """\
import json, os
REPO = "{repo}"
tried = []
for name, path, mode in (("config", ".git/config", "a"), ("hook", ".git/hooks/post-checkout", "w"),
                         ("ref", ".git/refs/heads/main", "w"), ("file", "PWNED.txt", "w"),
                         ("info", ".git/info/attributes", "a")):
    try:
        with open(os.path.join(REPO, path), mode) as handle:
            handle.write("[core]\\n\\tfsmonitor = touch {marker}\\n" if name == "config" else "pwned\\n")
        tried.append(name + "=DONE")
    except OSError as err:
        tried.append(name + "=" + type(err).__name__)
print(json.dumps({{"error": f"blocked: checkout {{' '.join(tried)}}, as uid {{os.getuid()}}"}}))
"""


def test_an_evaluation_cannot_write_the_users_checkout_or_its_git(
    hostile: Hostile, open_folder: Path, run_git: Callable[..., str]
) -> None:
    # The checkout where every user can reach it (tmp_path's parents are root's, which would block it anyway).
    shutil.copytree(hostile.repo.parent, open_folder / "work", symlinks=True)
    moved = Hostile(open_folder / "work" / hostile.repo.name, open_folder / "work" / hostile.origin.name, run_git)
    run_git(moved.repo, "remote", "set-url", "origin", str(moved.origin))
    for folder in (open_folder / "work", moved.repo):
        os.chmod(folder, 0o755)
    moved.install(CHECKOUT.format(repo=moved.repo, marker=open_folder / "pwned"), {"isolation": "none"})
    origin = _origin_main(moved.origin)
    config = (moved.repo / ".git/config").read_bytes()
    outcome = moved.run()
    written = ["config=PermissionError", "hook=PermissionError", "ref=PermissionError", "file=PermissionError"]
    assert_recorded_error(outcome, f"blocked: checkout {' '.join(written)}")
    assert "=DONE" not in outcome.state
    _uid_in(outcome.state)
    assert (moved.repo / ".git/config").read_bytes() == config and not (moved.repo / "PWNED.txt").exists()
    assert not (open_folder / "pwned").exists()
    assert outcome.checkout[0] == outcome.checkout[1] and _origin_main(moved.origin) == origin
    assert outcome.leaked(SECRET) == []


PLANT_LINKS = """\
import os
TARGET = "{target}"
tried = []
try:
    os.link(TARGET, "stolen.json")  # a hard link to root's file, for the runner to read back
    tried.append("hardlink=DONE")
except OSError as err:
    tried.append("hardlink=" + type(err).__name__)
os.symlink(TARGET, os.environ["AUTOLOOP_RESULT"])  # the report the runner reads, as a link to root's file
with open("{said}", "w") as handle:  # where the test reads what happened
    handle.write("blocked: " + " ".join(tried))
"""


@pytest.mark.skipif(not slot_user.hardlinks_protected(), reason="fs.protected_hardlinks is off here")
def test_the_runner_reads_no_link_the_evaluation_planted(hostile: Hostile, open_folder: Path) -> None:
    target = open_folder / "root-only.json"
    target.write_text('{"score": 1e9}')
    os.chmod(target, 0o600)  # root's alone: the evaluation's uid cannot read it, only link to it
    said = open_folder / "said"
    said.mkdir()
    os.chmod(said, 0o1777)
    evaluator = PLANT_LINKS.format(target=target, said=said / "said.txt")
    hostile.install(evaluator, {"isolation": "none", "evaluation-report": "file"})
    outcome = hostile.run()
    assert_recorded_error(outcome, "the evaluation wrote no report to $AUTOLOOP_RESULT")  # the link was not followed
    assert "1e+09" not in outcome.state and "1000000000" not in outcome.state
    assert (said / "said.txt").read_text() == "blocked: hardlink=PermissionError"
    assert outcome.checkout[0] == outcome.checkout[1]
