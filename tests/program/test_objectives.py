"""Tests for program/objectives.py: the `objectives:` and `objective-scalarisation:` frontmatter, with file:line errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.program.model import check_all, load_program
from autoloop_py.program.objectives import (
    Objective,
    Scalarisation,
    metric_value,
    parse_objectives,
    parse_scalarisation,
    targets_met,
)
from tests.program.test_program import PROGRAM, write

REL = Path(".autoloop/programs/demo/program.md")


def test_list_and_mapping_shapes_give_the_same_ordered_objectives() -> None:
    expected = (Objective("accuracy", "higher"), Objective("latency_ms", "lower"))
    assert parse_objectives([{"accuracy": "higher"}, {"latency_ms": "lower"}]) == expected
    assert parse_objectives({"accuracy": "higher", "latency_ms": "Lower"}) == expected
    assert parse_objectives(None) == ()


@pytest.mark.parametrize(("value", "message"), [
    ("accuracy", "must be a list such as [{accuracy: higher}, {latency_ms: lower}]"),
    ([], "must be a list such as"),
    ([{"accuracy": "higher", "cost": "lower"}], "each objective must be one `name: higher|lower` mapping"),
    ([{"accuracy": "up"}], "objective `accuracy` must be `higher` or `lower`, got 'up'"),
    ([{"accuracy": True}], "must be `higher` or `lower`"),
    ([{"accuracy": "higher"}, {"accuracy": "lower"}], "objective `accuracy` appears twice"),
    ([{"bad name": "higher"}], "objective name 'bad name' must be a metric name"),
])
def test_bad_objectives_say_the_shape(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_objectives(value)


def test_scalarisation_shapes() -> None:
    expected = Scalarisation((("accuracy", 1.0), ("latency_ms", -0.01)))
    assert parse_scalarisation({"accuracy": 1, "latency_ms": -0.01}) == expected
    assert parse_scalarisation({"weighted": {"accuracy": 1, "latency_ms": -0.01}}) == expected
    assert expected.describe() == "weighted {accuracy: 1, latency_ms: -0.01}"
    for bad in ("weighted", {"accuracy": "x"}, {"accuracy": 0}, {"accuracy": float("nan")}, {"accuracy": True}):
        with pytest.raises(ValueError):
            parse_scalarisation(bad)


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5), st.lists(st.integers())))
def test_metric_value_is_a_finite_float_or_none(value: object) -> None:
    found = metric_value({"m": value}, "m")
    assert found is None or (isinstance(found, float) and found == float(value) and not isinstance(value, bool))
    # an int past 2**53 reads as its nearest float; one too large for any float reads as none (it raised OverflowError)
    assert metric_value({"m": 2**53 + 1}, "m") == float(2**53) and metric_value({"m": 10**400}, "m") is None


def test_frontmatter_reads_objectives_and_scalarisation(tmp_path: Path) -> None:
    text = PROGRAM.replace("seed: 7\n", "seed: 7\nobjectives: [{accuracy: higher}, {latency_ms: lower}]\n"
                                        "objective-scalarisation: {accuracy: 1, latency_ms: -0.01}\n")
    write(tmp_path, str(REL), text)
    write(tmp_path, ".autoloop/programs/demo/code/search.py", "x = 1\n")
    write(tmp_path, ".autoloop/programs/demo/code/lib/util.py", "y = 2\n")
    write(tmp_path, ".autoloop/programs/demo/code/evaluate.py", "print('{}')\n")
    config = load_program(tmp_path, REL).config
    assert config.objectives == (Objective("accuracy", "higher"), Objective("latency_ms", "lower"))
    assert config.objective_scalarisation == Scalarisation((("accuracy", 1.0), ("latency_ms", -0.01)))
    assert "objectives" not in config.extra


@pytest.mark.parametrize(("lines", "message", "line"), [
    ("objectives: [{accuracy: best}]\n", "frontmatter `objectives`: objective `accuracy` must be `higher` or `lower`", 9),
    ("objectives: [{accuracy: higher}]\nobjective-scalarisation: {cost: 1}\n",
     "frontmatter `objective-scalarisation`: `cost` is not one of the `objectives`; weigh only declared objectives", 10),
])
def test_bad_objective_frontmatter_names_file_and_line(tmp_path: Path, lines: str, message: str, line: int) -> None:
    write(tmp_path, str(REL), PROGRAM.replace("seed: 7\n", "seed: 7\n" + lines))
    write(tmp_path, ".autoloop/programs/demo/code/search.py", "x = 1\n")
    write(tmp_path, ".autoloop/programs/demo/code/lib/util.py", "y = 2\n")
    _, problems = check_all(tmp_path)
    assert problems and message in problems[0].message, problems
    assert str(problems[0]).startswith(f"{REL}:{line}:")


def test_target_metric_may_give_one_target_per_objective(tmp_path: Path) -> None:
    text = PROGRAM.replace("target-metric: 1.4\n", "target-metric: {accuracy: 0.95, latency_ms: 20}\n").replace(
        "seed: 7\n", "seed: 7\nobjectives: [{accuracy: higher}, {latency_ms: lower}]\n")
    write(tmp_path, str(REL), text)
    write(tmp_path, ".autoloop/programs/demo/code/search.py", "x = 1\n")
    write(tmp_path, ".autoloop/programs/demo/code/lib/util.py", "y = 2\n")
    config = load_program(tmp_path, REL).config
    assert (config.target_metric, config.objective_targets) == (None, (("accuracy", 0.95), ("latency_ms", 20.0)))
    objectives = (Objective("accuracy", "higher"), Objective("latency_ms", "lower"))
    assert targets_met({"accuracy": 0.95, "latency_ms": 20}, config.objective_targets, objectives)
    assert not targets_met({"accuracy": 0.99, "latency_ms": 21}, config.objective_targets, objectives)
    assert not targets_met({"accuracy": 0.99}, config.objective_targets, objectives)
    write(tmp_path, str(REL), text.replace("latency_ms: 20}", "cost: 20}"))
    _, problems = check_all(tmp_path)
    assert problems and str(problems[0]).startswith(f"{REL}:3: frontmatter `target-metric`: `cost` is not one of the "
                                                    "`objectives`; set targets for only declared objectives")
