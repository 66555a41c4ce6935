"""Tests for loop/iteration/incumbent_check.py: when the best is measured again, and what the measurement means."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autoloop_py.loop.iteration.incumbent_check import due, judge
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.target import Target
from autoloop_py.state.machine import MachineState

OLD, NEW = "a" * 40, "b" * 40


def _program(direction: str = "higher", min_delta: float = 0.0) -> Program:
    return Program(name="p", path=Path("p/program.md"), directory=Path("p"), goal="g", target=Target(("x.py",), ()),
                   evaluation=Evaluation("true", "score", 1), strategy_text="",
                   config=ProgramConfig(metric_direction=direction, min_delta=min_delta), unconfigured=False, text="")


def test_only_a_best_measured_on_another_base_is_due() -> None:
    best = MachineState(best_metric=4.0, best_base=OLD)
    assert due(best, NEW) and not due(best, OLD) and not due(best, None)
    assert not due(replace(best, best_base=None), NEW)  # not known yet: this iteration's base is recorded
    assert not due(replace(best, best_metric=None), NEW)  # no best: the baseline is measured instead


@pytest.mark.parametrize("direction, value, min_delta, stale", [
    ("higher", 2.0, 0.0, True), ("higher", 4.0, 0.0, False), ("higher", 5.0, 0.0, False),
    ("higher", 3.95, 0.1, False), ("higher", 3.5, 0.1, True), ("lower", 5.0, 0.0, True), ("lower", 3.0, 0.0, False),
])
def test_a_best_short_of_its_record_beyond_min_delta_is_stale_and_re_based(
    direction: str, value: float, min_delta: float, stale: bool
) -> None:
    found = judge(MachineState(best_metric=4.0, best_base=OLD), NEW, value, None, _program(direction, min_delta))
    assert found.base == NEW and (found.stale is not None) is stale
    assert found.best == (value if stale else 4.0)
    if stale:
        assert found.stale.startswith(f"the default branch moved from {OLD[:12]} to {NEW[:12]}; the best's code now")


def test_a_best_that_no_longer_evaluates_is_stale_and_keeps_its_record() -> None:
    found = judge(MachineState(best_metric=4.0, best_base=OLD), NEW, None, "exit 1: ImportError", _program())
    assert found.best == 4.0 and found.stale is not None and found.stale.endswith("no longer evaluates there: exit 1: "
                                                                                  "ImportError")
