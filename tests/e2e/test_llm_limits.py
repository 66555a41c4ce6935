"""End to end: a model server that hangs or answers garbage costs a bounded time and leaves one plain note."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from autoloop_py.cli import main
from tests.e2e.test_run import _state, counter_repo  # noqa: F401 - the counter program fixture
from tests.fake_openai import fake_openai


def _run_llm(repo: Path, *extra: str) -> int:
    return main(["run", "--repo", str(repo), "--program", "counter", "--proposer", "llm", "--model", "openai/test",
                 *extra])


def test_a_hung_server_costs_timeout_times_attempts(counter_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    with fake_openai("hang", monkeypatch) as server:
        start = time.monotonic()
        assert _run_llm(counter_repo, "--llm-timeout", "1", "--llm-retries", "2") == 0
        elapsed = time.monotonic() - start
    assert server.requests == 3
    entry = _state(counter_repo).history[0]
    assert entry.status == "error"
    assert "openai/test: the model did not answer within 1 s (3 attempts)" in entry.text
    # About 3 s of model time plus a baseline evaluation and git; litellm's default would take 1,800 s.
    assert elapsed < 30


def test_frontmatter_sets_the_limits(counter_repo: Path, monkeypatch: pytest.MonkeyPatch, run_git) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    program = counter_repo / ".autoloop/programs/counter/program.md"
    program.write_text(program.read_text().replace("---\n", "---\nllm-timeout: 1\nllm-retries: 0\n", 1))
    run_git(counter_repo, "commit", "-qam", "bounded model calls")
    run_git(counter_repo, "push", "-q", "origin", "main")
    with fake_openai("hang", monkeypatch) as server:
        assert _run_llm(counter_repo) == 0
    assert server.requests == 1
    assert "the model did not answer within 1 s" in _state(counter_repo).history[0].text


def test_garbage_from_the_server_is_one_plain_sentence(counter_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    with fake_openai("garbage", monkeypatch):
        assert _run_llm(counter_repo) == 0
    text = _state(counter_repo).history[0].text
    assert "openai/test: the model's server sent a reply that is not a chat completion" in text
    assert "Traceback" not in text and "litellm." not in text and "OpenAIException" not in text


def test_the_job_deadline_counts_from_the_jobs_start() -> None:
    from autoloop_py.commands.run import job_end

    assert job_end({}, 100.0, 5000.0) is None
    assert job_end({"AUTOLOOP_JOB_TIMEOUT_MINUTES": "10"}, 100.0, 5000.0) == 700.0
    # The job started 120 s before this command: 120 s fewer are left.
    started = {"AUTOLOOP_JOB_TIMEOUT_MINUTES": "10", "AUTOLOOP_JOB_STARTED_AT": "4880"}
    assert job_end(started, 100.0, 5000.0) == 580.0
    iso = {**started, "AUTOLOOP_JOB_STARTED_AT": "1970-01-01T01:21:20Z"}
    assert job_end(iso, 100.0, 5000.0) == 580.0
