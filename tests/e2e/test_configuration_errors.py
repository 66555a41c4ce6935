"""End to end (issue 28, point 2): a configuration mistake stops the run before any iteration is recorded.

No model, an unknown litellm provider, a missing API key, a model the server does not know (HTTP 404) and a
server that refuses connections used to be recorded as iteration errors: they took iteration numbers, and
three in a row paused the program. Now each
stops `autoloop run` with one sentence naming the setting and the fix, the state file is untouched, and
nothing counts toward a pause; a candidate's own failure, and a server that hangs, are still iteration errors.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from autoloop_py.cli import main
from tests.e2e.test_run import PROG, _git, _state, counter_repo  # noqa: F401 - the counter program fixture
from tests.fake_openai import fake_openai

REPLY = ("SUMMARY: raise x\n\n" + f"{PROG}/code/value.py\n"
         "<<<<<<< SEARCH\nx = 1.0\n=======\nx = 2.0\n>>>>>>> REPLACE\n")


@pytest.fixture(autouse=True)
def _no_model_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AUTOLOOP_MODEL", "AUTOLOOP_MOCK_RESPONSE", "OPENAI_API_BASE", "OPENAI_BASE_URL",
                 "ANTHROPIC_API_KEY", "AUTOLOOP_AGENT_COMMAND"):
        monkeypatch.delenv(name, raising=False)


def _run_three(repo: Path, *args: str) -> list[int]:
    """Runs three single iterations (three in a row used to pause the program)."""
    return [main(["run", "--repo", str(repo), "--program", "counter", *args]) for _ in range(3)]


def _nothing_recorded(repo: Path) -> None:
    _git(repo, "fetch", "-q", "origin")
    assert _git(repo, "ls-remote", "origin", "memory/autoloop") == ""  # no state file, no iteration, no pause


def _closed_port() -> int:
    """Returns a loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(("args", "sentence"), [
    (("--proposer", "llm"),
     "no model configured for the llm proposer: set `model:` in .autoloop/programs/counter/program.md's frontmatter "
     "(e.g. `model: openai/gpt-4o-mini`), or AUTOLOOP_MODEL, or pass --model"),
    (("--proposer", "llm", "--model", "lml/x"),
     "litellm cannot tell the provider of model 'lml/x'"),
    (("--proposer", "llm", "--model", "anthropic/claude-3-5-haiku-latest"),
     "model 'anthropic/claude-3-5-haiku-latest' needs ANTHROPIC_API_KEY in the environment; set it, or pass --model "
     "with a litellm model whose key you have"),
    (("--proposer", "agent"), "no agent command: set AUTOLOOP_AGENT_COMMAND (or pass --agent-command)"),
])
def test_a_missing_setting_stops_the_run_before_any_iteration(
    counter_repo: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], sentence: str
) -> None:
    assert _run_three(counter_repo, *args) == [1, 1, 1]
    err = " ".join(capsys.readouterr().err.split())
    assert err.count(sentence) == 3 and "Traceback" not in err
    _nothing_recorded(counter_repo)


def test_a_refused_connection_names_the_url_tried_and_its_setting(
    counter_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    monkeypatch.setenv("OPENAI_API_BASE", url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    codes = _run_three(counter_repo, "--proposer", "llm", "--model", "openai/test", "--llm-retries", "0")
    assert codes == [1, 1, 1]
    err = " ".join(capsys.readouterr().err.split())
    assert (f"model 'openai/test': could not connect to the model's server at {url}/chat/completions; start it, "
            "or set OPENAI_API_BASE to the server's URL") in err
    _nothing_recorded(counter_repo)


def test_a_refused_key_names_the_variable(
    counter_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_openai("bad-key", monkeypatch) as server:
        codes = _run_three(counter_repo, "--proposer", "llm", "--model", "openai/test")
    assert codes == [1, 1, 1] and server.requests == 3  # one request per run: a refused key is not retried
    err = " ".join(capsys.readouterr().err.split())
    assert "model 'openai/test': the provider refused the API key (authentication failed); check OPENAI_API_KEY" in err
    _nothing_recorded(counter_repo)


def test_a_model_the_server_does_not_know_names_the_model_and_its_setting(
    counter_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_openai("no-model", monkeypatch) as server:
        codes = _run_three(counter_repo, "--proposer", "llm", "--model", "openai/gpt-nope")
    assert codes == [1, 1, 1] and server.requests == 3  # one request per run: a 404 is not retried
    err = " ".join(capsys.readouterr().err.split())
    assert err.count(
        f"model 'openai/gpt-nope': the server at {server.base_url}/chat/completions says the model does not exist "
        "(The model `gpt-nope` does not exist or you do not have access to it.); set `model:` in the program's "
        "frontmatter, AUTOLOOP_MODEL or --model to a model it serves"
    ) == 3 and "Traceback" not in err
    _nothing_recorded(counter_repo)


def test_a_hung_server_stays_an_iteration_error(counter_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A server that does not answer may answer next time: the iteration records the error, the run goes on.
    with fake_openai("hang", monkeypatch):
        assert main(["run", "--repo", str(counter_repo), "--program", "counter", "--proposer", "llm",
                     "--model", "openai/test", "--llm-timeout", "1", "--llm-retries", "0"]) == 0
    entry = _state(counter_repo).history[0]
    assert (entry.iteration, entry.status) == (1, "error")
    assert "openai/test: the model did not answer within 1 s" in entry.text


def test_once_the_server_answers_the_same_program_runs(
    counter_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_openai("reply", monkeypatch, reply=REPLY) as server:
        assert main(["run", "--repo", str(counter_repo), "--program", "counter", "--proposer", "llm",
                     "--model", "openai/test"]) == 0
    assert server.requests == 1
    entry = _state(counter_repo).history[0]
    assert (entry.iteration, entry.status) == (1, "accepted")


def test_a_candidate_that_fails_is_still_an_iteration_error(
    counter_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The model answers, but its edit does not apply: the candidate's failure, recorded as before.
    with fake_openai("reply", monkeypatch, reply="SUMMARY: nothing\n\nno edit block here\n"):
        assert main(["run", "--repo", str(counter_repo), "--program", "counter", "--proposer", "llm",
                     "--model", "openai/test", "--iterations", "3"]) == 0
    machine = _state(counter_repo).machine
    assert machine.recent_statuses == ("error", "error", "error") and machine.paused


@pytest.mark.parametrize(("entry", "sentence"), [
    ("  - lml/x\n", "litellm cannot tell the provider of model 'lml/x'"),
    ("  - model: openai/x\n    api-key-env: MISSING_PROXY_KEY\n",
     "model 'openai/x' reads its key from MISSING_PROXY_KEY (api-key-env), which is not set"),
])
def test_each_entry_of_a_models_list_is_checked_before_any_iteration(
    counter_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, entry: str, sentence: str
) -> None:
    monkeypatch.delenv("MISSING_PROXY_KEY", raising=False)
    program = counter_repo / PROG / "program.md"
    program.write_text(program.read_text().replace("---\n", "---\nmodels:\n" + entry, 1))
    _git(counter_repo, "commit", "-qam", "models list")
    _git(counter_repo, "push", "-q", "origin", "main")
    assert _run_three(counter_repo, "--proposer", "llm") == [1, 1, 1]
    err = " ".join(capsys.readouterr().err.split())
    assert err.count(sentence) == 3 and "Traceback" not in err
    _nothing_recorded(counter_repo)
