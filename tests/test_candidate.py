"""Tests for autoloop_py.candidate: candidate code called in a process of its own, its values back as JSON.

Each test runs a small scorer as a process of its own (a scorer becomes non-dumpable and a subreaper, which
the test process should not), with the candidate module in tmp_path, and reads what the scorer printed.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import pytest

from autoloop_py.candidate import child_environment, scorer_paths
from autoloop_py.sandbox.run import bwrap_status

ROOT = Path(__file__).resolve().parents[1]
CANDIDATE = """\
import os, subprocess, sys, time

def add(a, b):
    return a + b

def shapes(*args, **kwargs):
    return {"args": args, "kwargs": kwargs, "none": None, "nan": float("nan")}

class Array:
    def tolist(self):
        return [1, 2, 3]

def array():
    return Array()

def fail():
    raise ValueError("no good")

def leave(status):
    os._exit(status)

def quit():
    sys.exit(0)

def forever():
    while True:
        pass

class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + os.path.join(__FOLDER__, "UNPICKLED"),))

def payload():
    return Payload()

def environment():
    return dict(os.environ)

CALLS = []

def count(x):
    CALLS.append(x)
    return [len(CALLS), os.getpid()]

def slow(seconds):
    time.sleep(seconds)
    return seconds

def daemon(marker):
    # A setsid daemon and a double-forked grandchild, both appending to the marker forever.
    loop = "import time\\nwhile True:\\n    open(%r, 'a').write('x')\\n    time.sleep(0.01)\\n" % marker
    subprocess.Popen(["setsid", sys.executable, "-c", loop], start_new_session=True)
    if os.fork() == 0:
        if os.fork() == 0:
            exec(loop)
        os._exit(0)
    time.sleep(0.2)
    return os.path.getsize(marker)

def reach(scorer):
    found = {"pid": os.getpid()}
    for what, read in (("fd", lambda: os.readlink(f"/proc/{scorer}/fd/1")),
                       ("environ", lambda: open(f"/proc/{scorer}/environ", "rb").read())):
        try:
            read()
            found[what] = "reached"
        except OSError as err:
            found[what] = type(err).__name__
    try:
        os.kill(scorer, 0)
        found["signal"] = "reached"
    except OSError as err:
        found["signal"] = type(err).__name__
    return found
"""


def _scorer(tmp_path: Path, script: str, env: dict[str, str] | None = None, wrap: Sequence[str] = ()) -> Any:
    """Runs `script` (it ends by printing one JSON value) as a scorer beside the candidate; returns that value."""
    (tmp_path / "cand.py").write_text(CANDIDATE.replace("__FOLDER__", repr(str(tmp_path))))
    code = "import json, os, sys\nfrom autoloop_py.candidate import *\nCAND = 'cand.py'\n" + script
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    done = subprocess.run([*wrap, sys.executable, "-c", code], cwd=tmp_path, env=full_env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _error(call_line: str) -> str:
    """Returns scorer code printing [exception type, message] of a call that must fail."""
    return (f"try:\n    {call_line}\n    print(json.dumps(['no error', '']))\n"
            "except CandidateError as err:\n    print(json.dumps([type(err).__name__, str(err)]))\n")  # fmt: skip


def test_values_come_back_as_json(tmp_path: Path) -> None:
    script = (
        "print(json.dumps([call(CAND, 'add', (2, 3)), call_each(CAND, 'add', [(1, 1), ('a', 'b')]),"
        " call(CAND, 'array'), call(CAND, 'shapes', (1, (2, 3)), {'k': [4]})], allow_nan=True))"
    )
    plain, each, array, shapes = _scorer(tmp_path, script)
    assert (plain, each, array) == (5, [2, "ab"], [1, 2, 3])
    assert shapes["args"] == [1, [2, 3]] and shapes["kwargs"] == {"k": [4]} and shapes["none"] is None
    assert shapes["nan"] != shapes["nan"]  # NaN itself: the scorer decides what a non-finite value means


@pytest.mark.parametrize(
    ("call_line", "kind", "message"),
    [
        ("call(CAND, 'fail')", "CandidateError", "cand.py: fail() raised ValueError: no good"),
        ("call(CAND, 'quit')", "CandidateError", "cand.py: quit() raised SystemExit: 0"),
        ("call(CAND, 'leave', (3,))", "CandidateError", "cand.py: leave() returned nothing: its process exited with "
                                                         "status 3"),
        ("call(CAND, 'missing')", "CandidateError", "cand.py: missing() raised AttributeError"),
        ("call('nowhere.py', 'add')", "CandidateError", "nowhere.py: add() raised FileNotFoundError"),
    ],
)  # fmt: skip
def test_a_failing_candidate_is_a_clear_error(tmp_path: Path, call_line: str, kind: str, message: str) -> None:
    got_kind, got_message = _scorer(tmp_path, _error(call_line))
    assert got_kind == kind and got_message.startswith(message), got_message


def test_a_session_calls_one_warm_child_and_each_round_trip_can_be_timed(tmp_path: Path) -> None:
    script = (
        "import time\nwith Session(CAND, 'count') as session:\n"
        "    values = [session.call(x) for x in range(3)]\n"
        "with Session(CAND, 'slow') as session:\n"
        "    started = time.perf_counter()\n"
        "    session.call(0.3)\n"
        "    took = time.perf_counter() - started\n"
        "print(json.dumps([values, took, call(CAND, 'add', (1, 2))]))\n"
    )
    values, took, after = _scorer(tmp_path, script)
    assert [n for n, _ in values] == [1, 2, 3] and len({pid for _, pid in values}) == 1  # one child, module loaded once
    assert 0.3 <= took < 5 and after == 3


def test_a_failed_session_call_is_an_error_and_ends_the_session(tmp_path: Path) -> None:
    script = (
        "found = []\nfor function, args, timeout in (('fail', (), 20), ('slow', (5,), 1), ('leave', (4,), 20),"
        " ('missing', (), 20)):\n"
        "    with Session(CAND, function, timeout=timeout) as session:\n"
        "        try:\n"
        "            session.call(*args)\n"
        "        except CandidateError as err:\n"
        "            found.append([type(err).__name__, str(err)])\n"
        "        try:\n"
        "            session.call(*args)\n"
        "        except CandidateError as err:\n"
        "            found.append(str(err))\n"
        "print(json.dumps(found))\n"
    )
    found = _scorer(tmp_path, script)
    assert found[0] == ["CandidateError", "cand.py: fail() raised ValueError: no good"]
    assert found[2] == ["CandidateTimeout", "cand.py: slow() did not return within 1 s; it was killed"]
    assert found[4] == ["CandidateError", "cand.py: leave() returned nothing: its process exited with status 4"]
    assert found[6][0] == "CandidateError" and found[6][1].startswith("cand.py: missing() raised AttributeError")
    assert found[1::2] == [f"cand.py: {name}(): the session has ended" for name in ("fail", "slow", "leave", "missing")]


def test_a_call_that_does_not_return_is_killed_at_its_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    kind, message = _scorer(tmp_path, _error("call(CAND, 'forever', timeout=0.5)"))
    assert kind == "CandidateTimeout" and message == "cand.py: forever() did not return within 0.5 s; it was killed"
    assert time.monotonic() - started < 20


def test_a_value_is_never_unpickled(tmp_path: Path) -> None:
    kind, message = _scorer(tmp_path, _error("call(CAND, 'payload')"))
    assert kind == "CandidateError" and "returned a Payload, which is not JSON" in message
    assert not (tmp_path / "UNPICKLED").exists()
    imported = {
        alias.name for node in ast.walk(ast.parse((ROOT / "autoloop_py/candidate.py").read_text()))
        if isinstance(node, ast.Import) for alias in node.names
    } | {
        node.module for node in ast.walk(ast.parse((ROOT / "autoloop_py/candidate.py").read_text()))
        if isinstance(node, ast.ImportFrom)
    }  # fmt: skip
    assert not imported & {"pickle", "marshal", "shelve", "dill", "cloudpickle"}
    assert not {name for name in imported if name and name.startswith("autoloop_py")}  # stdlib only


def test_the_child_gets_a_scrubbed_environment(tmp_path: Path) -> None:
    env = {"AUTOLOOP_RESULT": str(tmp_path / "result.json"), "FAKE_TOKEN": "s3cr3t", "OPENAI_API_KEY": "sk-x"}
    seen = _scorer(tmp_path, "print(json.dumps(call(CAND, 'environment', env={'EXTRA': '1'})))", env=env)
    assert not {"AUTOLOOP_RESULT", "FAKE_TOKEN", "OPENAI_API_KEY"} & set(seen)
    assert seen["PATH"] == os.environ["PATH"] and seen["EXTRA"] == "1"


def test_child_environment_keeps_only_the_allow_list() -> None:
    kept = child_environment({"PATH": "/bin", "LC_ALL": "C", "AUTOLOOP_PROGRAM_DIR": "/x", "GITHUB_TOKEN": "t"})
    assert kept == {"PATH": "/bin", "LC_ALL": "C", "PYTHONDONTWRITEBYTECODE": "1"}


def _assert_tree_killed_and_scorer_unreachable(tmp_path: Path, wrap: Sequence[str] = ()) -> dict[str, Any]:
    marker = tmp_path / "marker"
    marker.write_text("")
    script = (
        f"size = call(CAND, 'daemon', ({str(marker)!r},))\n"
        "reached = call(CAND, 'reach', (os.getpid(),))\n"
        "print(json.dumps([size, reached]))\n"
    )
    size, reached = _scorer(tmp_path, script, wrap=wrap)
    assert size > 0  # the daemons ran during the call
    after = marker.stat().st_size
    time.sleep(0.5)
    assert marker.stat().st_size == after, "a process the candidate started outlived the call"
    assert reached["fd"] == "PermissionError" and reached["environ"] == "PermissionError", reached
    return reached


def test_every_process_the_candidate_starts_dies_with_the_call(tmp_path: Path) -> None:
    reached = _assert_tree_killed_and_scorer_unreachable(tmp_path)
    if reached["pid"] == 1:  # a PID namespace of its own: the scorer has no pid there to signal
        assert reached["signal"] != "reached", reached


def test_without_a_user_namespace_the_tree_still_dies_and_the_scorer_stays_unreachable(tmp_path: Path) -> None:
    """Where no nested user namespace can be made (bubblewrap's --disable-userns), the subreaper and prctl hold."""
    usable, why = bwrap_status()
    if not usable:
        pytest.skip(f"needs a working bubblewrap: {why}")
    wrap = ["bwrap", "--unshare-user", "--disable-userns", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
            "--proc", "/proc", "--dev", "/dev", "--bind", str(tmp_path), str(tmp_path)]  # fmt: skip
    reached = _assert_tree_killed_and_scorer_unreachable(tmp_path, wrap)
    assert reached["pid"] != 1  # no PID namespace of its own here


def test_an_evaluations_tree_report_folder_and_home_are_read_only_to_the_candidate(tmp_path: Path) -> None:
    """The paths the child remounts read-only: none when run by hand; never the temp directory or what holds it."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "report").mkdir()
    assert scorer_paths({"HOME": str(tmp_path)}) == []
    environ = {"AUTOLOOP_REPO_ROOT": str(tmp_path / "repo"), "AUTOLOOP_RESULT": str(tmp_path / "report/result.json"),
               "HOME": tempfile.gettempdir()}  # fmt: skip
    assert scorer_paths(environ) == [str((tmp_path / "repo").resolve()), str((tmp_path / "report").resolve())]
