"""Tests for faults.py: AUTOLOOP_FAULT kills the process at the named step, and only there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from autoloop_py.errors import AutoloopError
from autoloop_py.faults import ENV, Fault, checkpoint, parse_faults


def _python(code: str, fault: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ENV: fault}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


def test_parse_names_steps_and_occurrences() -> None:
    assert parse_faults("after-propose, after-state-commit@3,") == (
        Fault("after-propose"), Fault("after-state-commit", 3)
    )
    assert parse_faults("") == ()


@pytest.mark.parametrize("spec", ["after-lunch", "after-propose@0", "after-propose@x", "during-evaluation@-1"])
def test_parse_refuses_unknown_steps_naming_the_known_ones(spec: str) -> None:
    with pytest.raises(AutoloopError, match="is not a fault; use one of after-propose, during-evaluation"):
        parse_faults(spec)


def test_checkpoint_does_nothing_without_the_variable_or_at_other_steps() -> None:
    checkpoint("after-propose", environ={})
    checkpoint("after-propose", environ={ENV: "after-state-commit"})
    with pytest.raises(ValueError, match="unknown fault step"):
        checkpoint("no-such-step", environ={ENV: "after-propose"})


def test_kills_with_sigkill_at_the_nth_time_the_step_is_reached() -> None:
    code = (
        "from autoloop_py.faults import checkpoint\n"
        "for i in range(1, 5):\n"
        "    print(i, flush=True)\n"
        "    checkpoint('after-candidate-commit')\n"
    )
    done = _python(code, "after-candidate-commit@3")
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split() == ["1", "2", "3"]
    assert "killing the runner at after-candidate-commit" in done.stderr


def test_during_evaluation_kills_while_the_child_runs() -> None:
    code = (
        "import subprocess, time\n"
        "from autoloop_py.faults import checkpoint\n"
        "checkpoint('during-evaluation')\n"
        "print('armed', flush=True)\n"
        "time.sleep(0.3)\n"
        "print('no child yet', flush=True)\n"
        "subprocess.run(['sleep', '5'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print('survived', flush=True)\n"
    )
    started = time.monotonic()
    done = _python(code, "during-evaluation")
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split("\n")[:2] == ["armed", "no child yet"] and "survived" not in done.stdout
    assert time.monotonic() - started < 4.5
