"""Tests for autoloop_py/__main__.py: `autoloop run --proposer llm` starts its model worker before anything else."""

from __future__ import annotations

import pytest

from autoloop_py.__main__ import _wants_model_calls


@pytest.mark.parametrize("args", [
    ["run", "--proposer", "llm"], ["-v", "run", "--program", "p", "--proposer=llm"],
    ["run", "--proposer", "tune", "--proposer", "llm"],
])
def test_a_run_with_the_llm_proposer_wants_model_calls(args: list[str]) -> None:
    assert _wants_model_calls(args)


@pytest.mark.parametrize("args", [
    ["run"], ["run", "--proposer", "tune"], ["run", "--proposer", "agent"], ["status", "--proposer", "llm"],
    ["run", "--proposer"], [], ["run", "--proposer", "llm", "--proposer", "tune"], ["judge", "run", "--proposer=llm"],
])
def test_other_commands_and_proposers_do_not(args: list[str]) -> None:
    assert not _wants_model_calls(args)
