"""SIGTERM to the runner stops its evaluation at once: nothing it started keeps running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoloop_py.sandbox.run import bwrap_status
from tests.security.conftest import Hostile

LINGER = """\
import subprocess, sys, time
# A child in its own session (outside the evaluation's process group), and the evaluation itself, linger.
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{mark}-child"], start_new_session=True)
time.sleep(300)
"""


def _with_mark(mark: str) -> list[int]:
    """Returns the pids of the processes whose command line holds mark."""
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and mark.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
@pytest.mark.parametrize("isolation", ["none", "bwrap"])
def test_sigterm_kills_the_evaluation_and_what_it_started(hostile: Hostile, isolation: str) -> None:
    if isolation == "bwrap" and not bwrap_status()[0]:
        pytest.skip(f"needs a working bubblewrap sandbox: {bwrap_status()[1]}")
    mark = f"autoloop-linger-{os.getpid()}-{isolation}"
    hostile.install(LINGER.format(mark=mark), frontmatter={"isolation": isolation})
    command = [sys.executable, "-m", "autoloop_py", "run", "--repo", str(hostile.repo), "--program", "hostile"]
    runner = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _with_mark(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _with_mark(mark), "the evaluation never started"
        runner.send_signal(signal.SIGTERM)
        _, err = runner.communicate(timeout=30)
        assert runner.returncode == 143, err
        assert "terminated" in err
        deadline = time.monotonic() + 10
        while _with_mark(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _with_mark(mark) == []
    finally:
        runner.kill()
        runner.wait()
        for pid in _with_mark(mark):
            os.kill(pid, signal.SIGKILL)
