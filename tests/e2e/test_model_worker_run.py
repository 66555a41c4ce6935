"""End to end: `autoloop run --proposer llm` makes its model calls in a worker process that ends with the run.

Each test runs the CLI in its own process (as a user does), so litellm is not yet imported there and the
run starts its model worker; the model is a loopback server (tests/fake_openai.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.e2e.test_run import PROG, _state, counter_repo  # noqa: F401 - the counter program fixture
from tests.fake_openai import fake_openai

ROOT = Path(__file__).resolve().parents[2]
EDIT = f"SUMMARY: raise x\n\n{PROG}/code/value.py\n<<<<<<< SEARCH\nx = 1.0\n=======\nx = 5.0\n>>>>>>> REPLACE\n"
# Runs the `autoloop` command, then says whether this process (the runner) ever imported litellm.
_RUN_AND_TELL = (
    "import sys\nfrom autoloop_py.__main__ import main\ncode = main(sys.argv[1:])\n"
    "print('runner imported litellm:', 'litellm' in sys.modules, file=sys.stderr)\nraise SystemExit(code)\n"
)


def _command(repo: Path, *extra: str) -> list[str]:
    return [sys.executable, "-c", _RUN_AND_TELL, "run", "--repo", str(repo), "--program", "counter",
            "--proposer", "llm", "--model", "openai/test", *extra]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOLOOP_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def test_the_worker_makes_the_calls_and_the_runner_never_imports_litellm(
    counter_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_openai("reply", monkeypatch, EDIT, tokens=40) as server:
        done = subprocess.run(_command(counter_repo, "-v"), env=_env(GITHUB_TOKEN="ghs_not_for_models"),
                              capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "runner imported litellm: False" in done.stderr
    assert "imports litellm" not in done.stderr  # nor did the worker: openai/test is served and read without it
    assert server.requests == 1 and server.keys == ["sk-test-not-a-key"]
    entry = _state(counter_repo).history[0]
    assert entry.status == "accepted" and "raise x" in entry.text
    assert "- **Cost**: 80 tokens\n" in entry.text  # the usage counted in the worker reaches the record


def test_a_model_litellm_cannot_place_stops_the_run_with_the_same_sentence_and_records_nothing(
    counter_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_openai("reply", monkeypatch, EDIT) as server:
        command = _command(counter_repo, "-v")
        command[command.index("openai/test")] = "no-such-provider/model-x"
        done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and server.requests == 0
    assert "the model worker imports litellm: the run's model no-such-provider/model-x needs it" in done.stderr
    assert ("error: litellm cannot tell the provider of model 'no-such-provider/model-x'" in done.stderr
            and "; pass --model with a provider-prefixed litellm model name such as openai/gpt-4o-mini" in done.stderr)
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", "memory/autoloop"], cwd=counter_repo,
                          capture_output=True).returncode != 0 or not _state(counter_repo).history


def test_ctrl_c_while_the_model_is_asked_stops_the_run_and_its_worker(
    counter_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C sends SIGINT to the terminal's process group: the run exits 130 and leaves no process behind."""
    with fake_openai("hang", monkeypatch) as server:
        runner = subprocess.Popen(_command(counter_repo, "--llm-timeout", "300"), env=_env(), text=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        _wait_for(lambda: server.requests == 1, 600)
        workers = [pid for pid in _children(runner.pid) if b"model_worker" in _cmdline(pid)]
        assert len(workers) == 1
        os.killpg(runner.pid, signal.SIGINT)
        _, err = runner.communicate(timeout=120)
    assert runner.returncode == 130 and "interrupted" in err and "Traceback" not in err
    _wait_for(lambda: not _alive(workers[0]))


def test_a_runner_killed_outright_takes_its_worker_with_it(counter_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL runs no cleanup in the runner: the kernel ends the worker (its parent-death signal)."""
    with fake_openai("hang", monkeypatch) as server:
        runner = subprocess.Popen(_command(counter_repo, "--llm-timeout", "300"), env=_env(), text=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        _wait_for(lambda: server.requests == 1, 600)
        workers = [pid for pid in _children(runner.pid) if b"model_worker" in _cmdline(pid)]
        runner.kill()
        runner.wait(timeout=60)
        assert len(workers) == 1
        _wait_for(lambda: not _alive(workers[0]))
        if _group_alive(runner.pid):
            os.killpg(runner.pid, signal.SIGKILL)  # the runner's own git helpers, which have no such signal


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for(condition: Callable[[], Any], seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)
