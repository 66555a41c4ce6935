"""Tests for loop/iteration/model_use.py: which model an iteration draws, and its record's per-model spend."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from autoloop_py.loop.iteration import model_use
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.models import ModelSpec, parse_models
from autoloop_py.program.target import Target
from autoloop_py.proposers.base import Usage
from autoloop_py.state import file as statefile
from autoloop_py.state.model_stats import use_of

NOW = datetime(2026, 11, 26, tzinfo=timezone.utc)


def _program(**config: object) -> Program:
    return Program("demo", Path("program.md"), None, "g", Target(("code/*.py",)), Evaluation("python e.py", "score", 1),
                   "", ProgramConfig(**config), False, "")  # type: ignore[arg-type]


def _state() -> statefile.StateFile:
    return statefile.new_state("demo", "g", "score", "higher", None)


def test_only_the_llm_proposer_draws_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    program = _program(model="openai/one")
    assert model_use.draw(program, RunOptions(), _state(), 1) is None  # tune by default
    assert model_use.draw(program, RunOptions(proposer="llm"), _state(), 1) == ModelSpec("openai/one")
    assert model_use.draw(_program(), RunOptions(proposer="llm"), _state(), 1) is None
    monkeypatch.setenv("AUTOLOOP_MODEL", "openai/env")
    assert model_use.draw(_program(), RunOptions(proposer="llm"), _state(), 1) == ModelSpec("openai/env")


def test_the_guide_model_is_the_guide_entry_else_the_drawn_one() -> None:
    listed = parse_models(["openai/a", {"model": "openai/meta", "role": "guide"}])
    drawn = ModelSpec("openai/a")
    assert model_use.guide_model(_program(models=listed), drawn) == ModelSpec("openai/meta", role="guide")
    assert model_use.guide_model(_program(models=listed[:1]), drawn) == drawn
    # A guide entry is never drawn to propose.
    draws = {model_use.draw(_program(models=listed), RunOptions(proposer="llm"), _state(), i) for i in range(20)}
    assert draws == {drawn}


def test_the_record_counts_the_guide_calls_per_model() -> None:
    record = statefile.IterationRecord("rejected", NOW, "x", 1.0, tokens=30, cost=0.3)
    others = [Usage(5, 5, 0.01, "openai/meta"), Usage(1, 1, None, "openai/meta"), Usage(2, 2, None, "openai/a")]
    counted = model_use.with_use(record, ModelSpec("openai/a"), others)
    assert (counted.tokens, counted.cost) == (30 + 12 + 4, pytest.approx(0.31))
    use = use_of(counted)
    assert use.proposer == "openai/a"
    assert use.spend == {"openai/a": (34, 0.3), "openai/meta": (12, pytest.approx(0.01))}
    assert model_use.with_use(record, None, []) == record
