"""Tests for proposers/llm.py, with litellm's mock_response so no request leaves the machine."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.target import Target
from autoloop_py.proposers.base import ProposalRequest
from autoloop_py.proposers.llm import NO_MODEL, LLMProposer

CODE = "def score(x):\n    return x * 2\n"
GOOD = (
    "SUMMARY: triple the input instead of doubling it to raise the score\n"
    "LESSON: larger multipliers raise linear scores\n\n"
    "code/score.py\n<<<<<<< SEARCH\n    return x * 2\n=======\n    return x * 3\n>>>>>>> REPLACE\n"
)
WRONG = (
    "SUMMARY: first try\n\n"
    "code/score.py\n<<<<<<< SEARCH\n    return x + 2\n=======\n    return x * 3\n>>>>>>> REPLACE\n"
)


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    monkeypatch.delenv("AUTOLOOP_MOCK_RESPONSE", raising=False)


def _request(model: str | None = "gpt-4o-mini") -> ProposalRequest:
    program = Program(
        name="demo",
        path=Path("program.md"),
        directory=None,
        goal="g",
        target=Target(("code/*.py",)),
        evaluation=Evaluation("python eval.py", "score", 1),
        strategy_text="",
        config=ProgramConfig(model=model),
        unconfigured=False,
        text="",
    )
    return ProposalRequest(program, {"code/score.py": CODE}, "improve the score", Path("/nonexistent"), 1)


def test_good_reply_is_applied_with_usage() -> None:
    proposal = LLMProposer(mock_responses=[GOOD]).propose(_request(), random.Random(0))
    assert proposal.failure is None
    assert proposal.files == {"code/score.py": "def score(x):\n    return x * 3\n"}
    assert proposal.summary == "triple the input instead of doubling it to raise the score"
    assert proposal.lesson == "larger multipliers raise linear scores"
    assert proposal.usage is not None and proposal.usage.model == "gpt-4o-mini"
    assert proposal.usage.prompt_tokens > 0 and proposal.usage.completion_tokens > 0
    assert proposal.transcript == (("user", "improve the score"), ("assistant", GOOD))


def test_failed_search_is_retried_with_nearest_lines() -> None:
    proposal = LLMProposer(mock_responses=[WRONG, GOOD]).propose(_request(), random.Random(0))
    assert proposal.failure is None
    assert proposal.files == {"code/score.py": "def score(x):\n    return x * 3\n"}
    roles = [role for role, _ in proposal.transcript]
    assert roles == ["user", "assistant", "user", "assistant"]
    retry = proposal.transcript[2][1]
    assert "starting `return x + 2`" in retry and "    return x * 2\n" in retry
    one_reply = LLMProposer(mock_responses=[GOOD]).propose(_request(), random.Random(0)).usage
    assert proposal.usage is not None and one_reply is not None
    assert proposal.usage.completion_tokens > one_reply.completion_tokens


def test_retries_exhausted_is_a_failure() -> None:
    proposal = LLMProposer(max_retries=1, mock_responses=[WRONG]).propose(_request(), random.Random(0))
    assert proposal.files == {}
    assert proposal.failure is not None and proposal.failure.startswith("no applicable edit after 2 replies: ")
    assert "matches no lines" in proposal.failure
    assert [role for role, _ in proposal.transcript] == ["user", "assistant", "user", "assistant"]


def test_malformed_reply_then_good_reply() -> None:
    broken = "code/score.py\n<<<<<<< SEARCH\n    return x * 2\n>>>>>>> REPLACE\n"
    proposal = LLMProposer(mock_responses=[broken, GOOD]).propose(_request(), random.Random(0))
    assert proposal.failure is None
    assert "^^^ Expected `=======`" in proposal.transcript[2][1]


def test_edit_outside_target_is_refused() -> None:
    outside = "SUMMARY: s\n\nsecrets.txt\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n"
    proposal = LLMProposer(max_retries=0, mock_responses=[outside]).propose(_request(), random.Random(0))
    assert proposal.files == {} and proposal.failure is not None and "Target" in proposal.failure


def test_missing_model_is_a_failure() -> None:
    proposal = LLMProposer().propose(_request(model=None), random.Random(0))
    assert proposal.failure == NO_MODEL and proposal.files == {}


def test_model_from_environment_and_mock_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOLOOP_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", GOOD)
    proposal = LLMProposer(model="ignored-model").propose(_request(model=None), random.Random(0))
    assert proposal.failure is None and proposal.usage is not None and proposal.usage.model == "gpt-4o-mini"


def test_api_error_becomes_a_one_line_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # importing litellm must not fetch prices
    import litellm

    def refuse(**kwargs: Any) -> Any:
        raise litellm.RateLimitError(message="slow down\nretry later", llm_provider="openai", model="gpt-4o-mini")

    monkeypatch.setattr(litellm, "completion", refuse)
    proposal = LLMProposer().propose(_request(), random.Random(0))
    assert proposal.files == {}
    assert proposal.failure is not None and proposal.failure.startswith("gpt-4o-mini: ")
    assert "slow down" in proposal.failure and "\n" not in proposal.failure


def test_importing_the_module_does_not_import_litellm() -> None:
    code = "import sys, autoloop_py.proposers.llm, autoloop_py.proposers; print('litellm' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_reply_writing_a_git_file_or_another_case_of_a_target_file_is_refused() -> None:
    # `code/*` matches `code/.git`: before the path rule, a `.git` file from a reply was committed as a gitlink.
    request = _request()
    request = ProposalRequest(
        Program(**{**request.program.__dict__, "target": Target(("code/*",))}), request.files, request.prompt,
        request.workdir, request.iteration,
    )  # fmt: skip
    for path in ("code/.git", "code/.GIT", "code/git~1", "code/SCORE.py"):
        reply = f"SUMMARY: s\n\n{path}\n<<<<<<< SEARCH\n=======\ngitdir: /home/user/project/.git\n>>>>>>> REPLACE\n"
        proposal = LLMProposer(max_retries=0, mock_responses=[reply]).propose(request, random.Random(0))
        assert proposal.files == {} and proposal.failure is not None, path
        assert "git's own directory" in proposal.failure or "differ only in case" in proposal.failure, proposal.failure


def test_the_drawn_entrys_sampling_controls_server_key_and_prices_reach_the_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    from autoloop_py.program.models import ModelSpec
    from tests.fake_openai import fake_openai

    with fake_openai("reply", monkeypatch, GOOD, tokens=1000) as server:
        monkeypatch.setenv("MY_KEY", "sk-entry-key")
        spec = ModelSpec("openai/entry", temperature=0.7, max_tokens=99, top_p=0.5, api_base=server.base_url,
                         api_key_env="MY_KEY", timeout=5.0, input_cost=0.001, output_cost=0.002)
        monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")  # the entry's own server wins
        proposal = LLMProposer().propose(replace(_request(None), model=spec), random.Random(0))
    assert proposal.failure is None and proposal.files
    (body,) = server.bodies
    assert server.keys == ["sk-entry-key"]
    assert (body["model"], body["temperature"], body["max_tokens"], body["top_p"]) == ("entry", 0.7, 99, 0.5)
    assert proposal.usage is not None and proposal.usage.model == "openai/entry"
    assert proposal.usage.cost == pytest.approx(1000 * 0.001 + 1000 * 0.002)


def test_complete_counts_each_reply_in_the_given_list(monkeypatch: pytest.MonkeyPatch) -> None:
    from autoloop_py.program.models import ModelSpec
    from autoloop_py.proposers.base import Usage
    from autoloop_py.proposers.llm import complete
    from tests.fake_openai import fake_openai

    spent: list[Usage] = []
    with fake_openai("reply", monkeypatch, '{"ideas": []}', tokens=7) as server:
        spec = ModelSpec("openai/meta", temperature=0.1, output_cost=0.5)
        assert complete(spec, "ideas?", spent=spent) == '{"ideas": []}'
        assert complete("openai/plain", "again?", spent=spent, max_tokens=5) == '{"ideas": []}'
    assert spent == [Usage(7, 7, 3.5, "openai/meta"), Usage(7, 7, None, "openai/plain")]
    assert server.bodies[0]["temperature"] == 0.1 and server.bodies[1]["max_tokens"] == 5


def test_without_litellm_the_proposer_says_what_installs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm is the `llm` extra: an install without it names commands that add it."""
    from autoloop_py.errors import AutoloopError
    from autoloop_py.proposers.llm import LITELLM_MISSING, require_litellm
    from autoloop_py.proposers.model_calls import import_litellm

    monkeypatch.setitem(sys.modules, "litellm", None)  # what `import litellm` meets where it is not installed
    # No index serves `autoloop-py`: the message names installs that work (litellm itself, or the clone's extra).
    assert "pip install litellm" in LITELLM_MISSING and "pip install 'path/to/autoloop_py[llm]'" in LITELLM_MISSING
    assert "'autoloop-py[llm]'" not in LITELLM_MISSING
    for call in (require_litellm, import_litellm):
        with pytest.raises(AutoloopError, match=r"python3 -m pip install litellm"):
            call()
    proposal = LLMProposer(mock_responses=[GOOD]).propose(_request(), random.Random(0))
    assert proposal.files == {} and proposal.failure == f"gpt-4o-mini: {LITELLM_MISSING}"


def test_an_unset_api_key_env_is_a_plain_failure_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from autoloop_py.program.models import ModelSpec
    from tests.fake_openai import fake_openai

    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    with fake_openai("reply", monkeypatch, GOOD) as server:
        spec = ModelSpec("openai/entry", api_base=server.base_url, api_key_env="NOT_SET_KEY")
        proposal = LLMProposer().propose(replace(_request(None), model=spec), random.Random(0))
    assert proposal.failure == "openai/entry: its api-key-env NOT_SET_KEY is not set in the environment; set it"
    assert server.requests == 0
