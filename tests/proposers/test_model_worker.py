"""Tests for proposers/model_worker.py: the run's model calls made in a worker process, as they are in-process.

One worker (a real process importing litellm) serves the module's tests; each test points its requests at its
own loopback server (tests/fake_openai.py) through `api_base`.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from autoloop_py.errors import AutoloopError, ConfigurationError
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError
from autoloop_py.proposers.model_calls import InProcess, ModelCheck, Reply
from autoloop_py.proposers.model_worker import ModelWorker, SharedWorker, start_worker, worker_environment
from tests.fake_openai import fake_openai

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-not-a-key"
# One xdist worker runs the module, so one model worker (a litellm import: 4 to 8 s of CPU) serves it, not one per
# xdist worker that drew some of its tests.
pytestmark = pytest.mark.xdist_group("model-worker")
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def worker() -> Iterator[ModelWorker]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AUTOLOOP_"))}
    with ModelWorker(environ={**environ, "OPENAI_API_KEY": KEY}) as started:
        yield started


def _kwargs(base_url: str, **extra: Any) -> dict[str, Any]:
    return {"model": "openai/test", "messages": [{"role": "user", "content": "hi"}], "api_base": base_url,
            "api_key": KEY, **extra}


def _error(calls: Any, kwargs: dict[str, Any], limits: CallLimits) -> tuple[type[BaseException], str]:
    with pytest.raises(AutoloopError) as caught:
        calls.completion(kwargs, limits)
    return type(caught.value), str(caught.value)


def test_a_reply_comes_back_as_it_does_in_process(worker: ModelWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("reply", monkeypatch, "the answer\nline two", tokens=12) as server:
        here = InProcess().completion(_kwargs(server.base_url), CallLimits(timeout=30))
        there = worker.completion(_kwargs(server.base_url), CallLimits(timeout=30))
    assert there == here
    assert (there.content, there.prompt_tokens, there.completion_tokens) == ("the answer\nline two", 12, 12)
    assert server.keys == [KEY, KEY] and server.bodies[1]["messages"] == [{"role": "user", "content": "hi"}]


def test_embeddings_come_back_as_they_do_in_process(worker: ModelWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_openai("reply", monkeypatch, tokens=5, embed=lambda text: [float(len(text)), 1.0]) as server:
        kwargs = {"model": "openai/embed", "input": ["ab", "abcd"], "api_base": server.base_url, "api_key": KEY}
        here = InProcess().embedding(dict(kwargs), CallLimits(timeout=30))
        there = worker.embedding(kwargs, CallLimits(timeout=30))
    assert there == here
    assert (there.vectors, there.prompt_tokens) == (((2.0, 1.0), (4.0, 1.0)), 5)
    assert server.bodies[1]["input"] == ["ab", "abcd"]


def test_a_mock_response_and_litellms_price_list_answer_in_the_worker(worker: ModelWorker) -> None:
    kwargs = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "mock_response": "canned"}
    reply = worker.completion(kwargs, CallLimits(timeout=30))
    assert reply == InProcess().completion(dict(kwargs), CallLimits(timeout=30))
    assert reply.content == "canned" and reply.cost is not None and reply.cost > 0


@pytest.mark.parametrize("mode", ["bad-key", "no-model", "garbage"])
def test_each_failure_raises_the_same_error_and_sentence(
    worker: ModelWorker, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    with fake_openai(mode, monkeypatch) as server:
        here = _error(InProcess(), _kwargs(server.base_url), CallLimits(timeout=30, retries=0))
        there = _error(worker, _kwargs(server.base_url), CallLimits(timeout=30, retries=0))
    assert there == here
    assert there[0] is (ModelCallError if mode == "garbage" else ConfigurationError)


def test_a_hung_server_times_out_with_the_retries_and_their_log_lines(
    worker: ModelWorker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="autoloop_py")
    with fake_openai("hang", monkeypatch) as server:
        kind, message = _error(worker, _kwargs(server.base_url), CallLimits(timeout=1, retries=1))
    assert (kind, message) == (ModelCallError, "the model did not answer within 1 s (2 attempts)")
    assert server.requests == 2
    relayed = [r for r in caplog.records if r.name == "autoloop_py.proposers.llm_call"]
    assert [r.getMessage().split(" (")[0] for r in relayed] == ["model call 1 failed", "model call 2 failed"]


def test_the_deadline_holds_in_the_worker(worker: ModelWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    """time.monotonic() is the machine's clock: a deadline set by the runner means the same in the worker."""
    with fake_openai("hang", monkeypatch) as server:
        started = time.monotonic()
        kind, message = _error(worker, _kwargs(server.base_url), CallLimits(30, 5, deadline=started + 2))
    assert kind is ModelCallError and "all the time left before the job's deadline" in message
    assert time.monotonic() - started < 20


def test_checks_answer_in_order_while_a_completion_waits_behind_them(
    worker: ModelWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    unknown = worker.check("no-such-provider/model-x")
    known = worker.check("openai/gpt-4o-mini")
    with fake_openai("reply", monkeypatch, "ok") as server:
        assert worker.completion(_kwargs(server.base_url), CallLimits(timeout=30)).content == "ok"
    assert known() == ModelCheck(None, ())  # the worker's environment holds OPENAI_API_KEY
    problem = unknown().problem
    assert problem is not None and problem.startswith("litellm cannot tell the provider of model 'no-such-provider/")


# The worker, whose litellm import waits until the file argv[1] exists (in litellm's own lock, as a slow import does).
_GATED = """\
import importlib.abc, importlib.util, os, sys, time
class Gate(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "litellm":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module
        def exec_module(module):
            while not os.path.exists(sys.argv[1]):
                time.sleep(0.02)
            run(module)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Gate())
from autoloop_py.proposers.model_worker import main
raise SystemExit(main(sys.argv[2:]))
"""


def test_an_openai_request_is_sent_before_litellm_is_loaded_and_priced_by_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gate = tmp_path / "litellm may load"
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AUTOLOOP_", "ANTHROPIC_"))}
    kwargs = {"model": "openai/gpt-4o-mini", "messages": MESSAGES}
    with fake_openai("reply", monkeypatch, "early", tokens=1000) as server:
        environ.update(OPENAI_API_KEY=KEY, OPENAI_API_BASE=server.base_url)
        with ModelWorker((sys.executable, "-c", _GATED, str(gate)), environ) as gated:
            assert gated.check("openai/gpt-4o-mini")() == ModelCheck(None, ())  # answered without litellm
            pending = gated._submit({"op": "completion", "kwargs": kwargs, "limits": [30, 0, None]})
            waiting = gated.check("anthropic/claude-3-5-sonnet-20240620")  # needs litellm: answered once it is loaded
            _wait_for(lambda: server.requests == 1, 60)  # sent while litellm's import waits
            gate.touch()
            reply = Reply(**pending()["reply"])  # came back once litellm could price it
            assert waiting().missing == ("ANTHROPIC_API_KEY",)
    with fake_openai("reply", monkeypatch, "early", tokens=1000) as server:
        assert reply == InProcess().completion(dict(kwargs), CallLimits(timeout=30))  # litellm's own reply and cost
    assert reply.cost is not None and reply.cost > 0
    assert server.bodies[0] == {"model": "gpt-4o-mini", "messages": MESSAGES}


def test_a_run_of_unpriced_openai_models_never_imports_litellm(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="autoloop_py")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AUTOLOOP_"))}
    with fake_openai("reply", monkeypatch, "<think>hm</think>the answer", tokens=7) as server:
        with ModelWorker(environ={**environ, "OPENAI_API_KEY": KEY}) as fresh:
            assert fresh.check("openai/my-local-model")() == ModelCheck(None, ())
            replies = [fresh.completion(_kwargs(server.base_url, temperature=0.5), CallLimits(timeout=30))
                       for _ in range(2)]
            with open(f"/proc/{fresh.pid}/status") as status:  # litellm alone is ~200 MB
                rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    assert replies == [Reply("the answer", "hm", 7, 7, None)] * 2 and server.requests == 2
    assert not [r for r in caplog.records if "imports litellm" in r.getMessage()] and rss < 100_000


def test_a_missing_key_is_named_by_the_check() -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AUTOLOOP_"))}
    with ModelWorker(environ=environ) as keyless:
        assert keyless.check("openai/gpt-4o-mini")() == ModelCheck(None, ("OPENAI_API_KEY",))


def test_a_worker_killed_mid_call_is_an_error_and_the_next_call_starts_another(
    worker: ModelWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_openai("hang", monkeypatch) as server:
        pending = worker._submit({"op": "completion", "kwargs": _kwargs(server.base_url), "limits": [60, 0, None]})
        _wait_for(lambda: server.requests == 1)
        killed = worker.pid
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        with pytest.raises(ModelCallError, match=r"^the model worker stopped \(exit status -9\) before it answered"):
            pending()
    with fake_openai("reply", monkeypatch, "again") as server:
        assert worker.completion(_kwargs(server.base_url), CallLimits(timeout=60)).content == "again"
    assert worker.pid not in (None, killed)


def test_kill_ends_the_worker_without_waiting_and_close_reaps_it() -> None:
    worker = ModelWorker(command=[sys.executable, "-c", "import time; time.sleep(60)"]).start()
    process = worker._process
    assert process is not None
    worker.kill()
    assert process.wait(timeout=10) == -signal.SIGKILL
    worker.close()
    assert worker.pid is None


def test_the_worker_gets_no_github_or_actions_token_and_keeps_the_model_key(tmp_path: Path) -> None:
    """A real process dumps the environment it was given: the runner's own credentials are not in it."""
    dump = tmp_path / "environ"
    script = tmp_path / "dump.py"
    script.write_text(f"import json, os\nopen({str(dump)!r}, 'w').write(json.dumps(dict(os.environ)))\n")
    environ = {"PATH": os.environ["PATH"], "OPENAI_API_KEY": "sk-model", "ANTHROPIC_API_KEY": "sk-ant",
               "GITHUB_TOKEN": "ghs_runner", "GH_TOKEN": "gho_runner", "ACTIONS_RUNTIME_TOKEN": "rt",
               "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "idt", "COPILOT_GITHUB_TOKEN": "cgt", "GITHUB_API_KEY": "github-models"}
    dumper = ModelWorker(command=[sys.executable, str(script)], environ=environ)
    with pytest.raises(ModelCallError, match="the model worker stopped"):
        dumper.completion({"model": "m", "messages": []}, CallLimits())
    import json

    seen = json.loads(dump.read_text())
    assert {k: seen.get(k) for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_API_KEY")} == {
        "OPENAI_API_KEY": "sk-model", "ANTHROPIC_API_KEY": "sk-ant", "GITHUB_API_KEY": "github-models"}
    assert not {"GITHUB_TOKEN", "GH_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
                "COPILOT_GITHUB_TOKEN"} & set(seen)
    assert worker_environment({})["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


_RUNNER = textwrap.dedent("""\
    import sys, time
    from autoloop_py.proposers.model_worker import ModelWorker
    worker = ModelWorker().start()
    print(worker.pid, flush=True)
    if sys.argv[1] == "crash":
        raise RuntimeError("the runner crashed")  # no close(): the interpreter simply ends
    time.sleep(600)
""")


@pytest.mark.parametrize("how", ["SIGKILL", "crash"])
def test_the_worker_dies_with_its_runner(how: str) -> None:
    """However the runner ends, even killed outright, its worker does not outlive it (PR_SET_PDEATHSIG)."""
    runner = subprocess.Popen([sys.executable, "-c", _RUNNER, how], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert runner.stdout is not None
    pid = int(runner.stdout.readline())
    assert _alive(pid)
    if how == "SIGKILL":
        runner.kill()
    runner.wait(timeout=60)
    _wait_for(lambda: not _alive(pid))


def _slot_call(calls: Any, base_url: str) -> tuple[str, bool, float]:
    """A slot process's call: (the reply, whether it imported litellm, when it came back)."""
    reply = calls.completion(_kwargs(base_url), CallLimits(timeout=30))
    return reply.content, "litellm" in sys.modules, time.monotonic()


def test_slot_processes_share_the_worker_and_its_one_litellm_import(
    worker: ModelWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --parallel k`: each slot's process reaches the run's worker through its socket, and calls overlap."""
    shared = pickle.loads(pickle.dumps(worker))
    assert isinstance(shared, SharedWorker) and Path(shared.address).parent.stat().st_mode & 0o077 == 0

    def slow(body: dict[str, Any]) -> str:
        time.sleep(1.5)
        return "reply " + body["messages"][0]["content"]

    with fake_openai("reply", monkeypatch, slow) as server:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing inherited from this one
        with context.Pool(2) as pool:
            results = [pool.apply_async(_slot_call, (worker, server.base_url)) for _ in range(2)]
            answers = [r.get(timeout=60) for r in results]
    assert [a[:2] for a in answers] == [("reply hi", False)] * 2  # neither slot imported litellm
    # Two 1.5 s calls made side by side by the one worker: one after the other, they would end 1.5 s apart.
    assert abs(answers[0][2] - answers[1][2]) < 1.0, answers
    assert server.requests == 2
    with pytest.raises(ModelCallError, match="cannot be reached"):
        SharedWorker(shared.address + ".gone", shared.key).completion(_kwargs(server.base_url), CallLimits(timeout=5))
    worker.close()  # the next test's call starts it again
    assert not Path(shared.address).parent.exists()


def test_start_worker_skips_an_imported_litellm() -> None:
    import litellm  # noqa: F401 - imported here: the calls cost no import any more

    assert start_worker(True) is None and start_worker(False) is None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_for(condition: Any, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)
