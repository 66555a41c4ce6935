"""Tests for loop/iteration/baseline_check.py: what `check` refuses of a baseline's evaluation, and its cache."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from autoloop_py.git.work_tree import WorkTree
from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.iteration import baseline_check
from autoloop_py.loop.iteration.baseline_check import BaselineCheck, baseline_problems, printed
from autoloop_py.program.objectives import Objective
from tests.programs import small_program

OK = EvaluationResult(True, 1.5, {"score": 1.5, "cost": 3}, None, (1.5,), '{"score": 1.5, "cost": 3}\n', "", 0.1)


def test_a_failed_evaluation_is_refused_at_the_evaluation_line_with_what_it_printed(tmp_path: Path) -> None:
    program = small_program(tmp_path)
    assert program.evaluation is not None
    failed = replace(OK, ok=False, metric=None, metrics={}, error="the evaluation printed no JSON object",
                     stdout_tail="".join(f"line {n}\n" for n in range(30)), stderr_tail="warning: slow\n")
    found = baseline_problems(program, failed)
    assert len(found.problems) == 1 and not found.values
    message = found.problems[0]
    assert message.startswith(f"{program.path}:{program.evaluation.line}: the baseline evaluation fails")
    assert "line 19" not in message and "    line 20\n" in message and message.endswith("its stderr ended:\n    warning: slow")
    assert printed(replace(OK, stdout_tail="", stderr_tail="  \n")) == "\n  it printed nothing"


def test_each_objective_needs_a_number(tmp_path: Path) -> None:
    program = small_program(tmp_path)
    config = replace(program.config, objectives=(Objective("score", "higher"), Objective("cost", "lower"),
                                                 Objective("size", "lower")))
    program = replace(program, config=config)
    assert baseline_problems(program, OK) != BaselineCheck()
    assert "no number for the objective `size` (keys: cost, score)" in baseline_problems(program, OK).problems[0]
    whole = replace(OK, metrics={**OK.metrics, "size": 7})
    assert baseline_problems(program, whole) == BaselineCheck(values={"score": 1.5, "cost": 3.0, "size": 7.0})


def test_only_a_readable_pass_is_remembered(tmp_path: Path) -> None:
    program = small_program(tmp_path)
    tree = WorkTree("a" * 40, tmp_path / "index")
    key = tmp_path / "cache" / "k.json"
    baseline_check._remember(key, program, tree, {"score": 1.5})
    assert baseline_check._remembered(key) == {"score": 1.5}
    for text in ("not json", '{"values": {"score": "high"}}', '["values"]'):
        key.write_text(text)
        assert baseline_check._remembered(key) is None
