"""The metric belongs to the evaluator: a candidate of a shipped example cannot set its own score.

Each test copies a shipped example (its evaluator calls the candidate through autoloop_py.candidate),
lets an agent proposer write a hostile EVOLVE-BLOCK that tries to report 1e9, and runs one real
`autoloop run` iteration in bubblewrap. The recorded metric never becomes the forged one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.security.conftest import Hostile

ROOT = Path(__file__).resolve().parents[2]
FORGED = "1e+09"
# Finds the report wherever it could be named: the child's environment, any readable environ, the report folders.
FIND_REPORT = """
import glob, json, os, sys
FORGED = json.dumps({"combined_score": 1e9, "score": 1e9, "accuracy": 1e9, "avg_value": 1e9, "speedup": 1e9})

def report_paths():
    found = [os.environ.get("AUTOLOOP_RESULT", "")]
    for environ in glob.glob("/proc/*/environ"):
        try:
            for entry in open(environ, "rb").read().split(b"\\0"):
                if entry.startswith(b"AUTOLOOP_RESULT="):
                    found.append(entry.split(b"=", 1)[1].decode())
        except OSError:
            pass
    found += glob.glob("/tmp/autoloop-report-*/report") + glob.glob("/tmp/*/autoloop-report-*/report")
    return {p if p.endswith(".json") else os.path.join(p, "result.json") for p in found if p}

def forge_reports():
    for path in report_paths():
        try:
            with open(path, "w") as handle:
                handle.write(FORGED)
        except OSError:
            pass
"""
ATTACKS = {
    "replaced os._exit and json.dump": """
import json, os, sys
def fake_dump(obj, handle, *args, **kwargs):
    handle.write(FORGED)
json.dump = fake_dump
os._exit = lambda status: sys.exit(0)
""",
    "atexit print": """
import atexit
os._exit = lambda status: sys.exit(status)
atexit.register(lambda: print(FORGED, flush=True))
""",
    "atexit rewrite of the report": """
import atexit
os._exit = lambda status: sys.exit(status)
forge_reports()
atexit.register(forge_reports)
""",
    "setsid daemon rewriting the report": """
import subprocess, sys
daemon = "import time\\n" + SOURCE + "\\nfor _ in range(3000):\\n    forge_reports()\\n    time.sleep(0.01)\\n"
subprocess.Popen(["setsid", sys.executable, "-c", daemon], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL, start_new_session=True)
""",
    "writing the scorer's stdout through /proc": """
import glob
for fd in ["/proc/%d/fd/1" % os.getppid(), *glob.glob("/proc/*/fd/1")]:
    try:
        with open(fd, "w") as handle:
            handle.write(FORGED + "\\n")
    except OSError:
        pass
""",
    "killing the scorer": """
import signal
forge_reports()
print(FORGED, flush=True)
for pid in [os.getppid(), *(int(p) for p in os.listdir("/proc") if p.isdigit())]:
    try:
        if pid > 1 and pid != os.getpid() and b"evaluate.py" in open("/proc/%d/cmdline" % pid, "rb").read():
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
try:
    os.kill(os.getppid(), signal.SIGKILL)
except OSError:
    pass
""",
    "monkeypatched json and print": """
import builtins, json
json.dumps = lambda *args, **kwargs: FORGED
json.dump = lambda obj, handle, *args, **kwargs: handle.write(FORGED)
builtins.print = lambda *args, **kwargs: sys.stdout.write(FORGED + "\\n")
""",
    "a clock stopped while group_sum runs, and a slower group_sum": """
import sys, time
import numpy as np
real_clocks = {name: getattr(time, name) for name in ("perf_counter", "process_time", "monotonic")}
def stopped(name):
    def clock():  # no time passes for a timer whose caller holds group_sum (an in-process evaluator's)
        if getattr(sys._getframe(1).f_locals.get("function"), "__name__", "") == "group_sum":
            return 0.0
        return real_clocks[name]()
    return clock
for name in real_clocks:
    setattr(time, name, stopped(name))
real_bincount, real_argsort, real_sleep = np.bincount, np.argsort, time.sleep
np.bincount = lambda *args, **kwargs: (real_sleep(0.002), real_bincount(*args, **kwargs))[1]
np.argsort = lambda *args, **kwargs: (real_sleep(0.002), real_argsort(*args, **kwargs))[1]
""",
    "printing the expected output and exiting": """
forge_reports()
print(FORGED, flush=True)
os._exit(0)
""",
}
AGENT = """\
import os, pathlib
path = pathlib.Path({search!r})
text = path.read_text()
start, end = text.index("# EVOLVE-BLOCK-START"), text.index("# EVOLVE-BLOCK-END")
path.write_text(text[:start] + "# EVOLVE-BLOCK-START\\n" + {block!r} + text[start + len("# EVOLVE-BLOCK-START"):])
pathlib.Path(os.environ["AUTOLOOP_REPLY_FILE"]).write_text("SUMMARY: report a better score\\n")
"""


def _install_example(hostile: Hostile, name: str) -> None:
    """Commits the shipped example `name` into the hostile repository and pushes it."""
    shutil.copytree(ROOT / ".autoloop/programs" / name, hostile.repo / ".autoloop/programs" / name)
    hostile.run_git(hostile.repo, "add", "-A")
    hostile.run_git(hostile.repo, "commit", "-qm", f"the shipped {name}")
    hostile.run_git(hostile.repo, "push", "-q", "origin", "main")


def _attack_block(attack: str) -> str:
    """Returns EVOLVE-BLOCK lines that run the attack when the candidate's module is loaded."""
    source = FIND_REPORT + textwrap.dedent(attack)
    return f"SOURCE = {FIND_REPORT!r}\nexec(compile({source!r}, 'attack', 'exec'))\n"


def _run(hostile: Hostile, tmp_path: Path, name: str, target: str, attacks: tuple[str, ...], runs: int = 1) -> str:
    """Runs `runs` iterations whose agent writes the attacks, in order, into the example's Target; returns the state.

    (A strategy whose first iteration records the seed asks for no candidate there: the attack runs at the second.)
    """
    _install_example(hostile, name)
    agent = tmp_path / "agent.py"
    search = f".autoloop/programs/{name}/code/{target}"
    block = _attack_block("".join(textwrap.dedent(ATTACKS[attack]) for attack in attacks))
    agent.write_text(AGENT.format(search=search, block=block))
    for _ in range(runs):
        outcome = hostile.run("--program", name, "--proposer", "agent", "--agent-command", f"python3 {agent}")
        assert outcome.process.returncode == 0, outcome.log
    state = subprocess.run(
        ["git", "cat-file", "blob", f"memory/autoloop:{name}.md"], cwd=hostile.origin, capture_output=True, text=True
    ).stdout
    assert f"### Iteration {runs}" in state, outcome.log
    return state


def _assert_not_forged(state: str) -> None:
    """Asserts no metric the state records is the forged one and the baseline is still the best.

    (The candidate's own words may appear in an error note: the evaluator quotes why the candidate failed.)
    """
    metric_lines = [line for line in state.splitlines() if "Metric" in line or "metric" in line]
    for forged in (FORGED, "1000000000", "1e9"):
        assert not [line for line in metric_lines if forged in line], state
    initial = re.search(r"^\| Initial Metric \| (\S+) \|$", state, re.M)
    assert initial is not None and f"| Best Metric | {initial[1]} |" in state, state
    assert "**Status**: ✅" not in state, state


# Attacks that each leave the candidate's function returning its real value run together in one iteration: any
# of them that reached the scorer would show as a forged metric. Those that end the candidate run apart.
GROUPS = {
    "in-process patches": ("replaced os._exit and json.dump", "atexit print", "atexit rewrite of the report",
                           "monkeypatched json and print"),
    "processes reaching the scorer": ("setsid daemon rewriting the report", "writing the scorer's stdout through /proc",
                                      "killing the scorer"),
    "printing the expected output and exiting": ("printing the expected output and exiting",),
}  # fmt: skip


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_a_candidate_cannot_set_its_own_metric(hostile: Hostile, bwrap: None, tmp_path: Path, group: str) -> None:
    state = _run(hostile, tmp_path, "function_minimization", "search.py", GROUPS[group])
    _assert_not_forged(state)


def test_a_candidate_cannot_print_the_metric_of_a_stdout_evaluator(
    hostile: Hostile, bwrap: None, tmp_path: Path
) -> None:
    """sqrt_tradeoff's evaluator prints its report, where the last JSON object on stdout counts."""
    attacks = ("atexit print", "writing the scorer's stdout through /proc", "printing the expected output and exiting")
    state = _run(hostile, tmp_path, "sqrt_tradeoff", "routine.py", attacks)
    _assert_not_forged(state)


def test_a_candidate_cannot_set_its_own_time(hostile: Hostile, bwrap: None, tmp_path: Path) -> None:
    """groupby_evolve's metric is a speed-up: its evaluator times each call of the candidate from its own process.

    The candidate stops its process's clocks while a timer times group_sum (an in-process evaluator then records a
    speed-up near 1e7) and sleeps 2 ms in each sort or bincount, beside the report forgeries that leave it running:
    it is measured as the slower code it is, and nothing forged is recorded."""
    pytest.importorskip("pandas")
    # (Those that break the candidate's own reply, a monkeypatched json or a kill, are errors: see the tests above.)
    attacks = ("replaced os._exit and json.dump", "atexit print", "atexit rewrite of the report",
               "setsid daemon rewriting the report", "writing the scorer's stdout through /proc",
               "a clock stopped while group_sum runs, and a slower group_sum")  # fmt: skip
    state = _run(hostile, tmp_path, "groupby_evolve", "groupby.py", attacks, runs=2)  # AlphaEvolve seeds first
    _assert_not_forged(state)
    attacked = state.split("### Iteration 2", 1)[1].split("---", 1)[0]
    assert "- **Status**: ❌ Rejected" in attacked and "did not improve on best" in attacked, attacked
