"""Tests for proposers/tune.py: the offline literal search."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.target import Target
from autoloop_py.proposers.base import ProposalRequest
from autoloop_py.proposers.tune import NO_LITERALS, TuneProposer, find_literals, format_number, perturb

SOURCE = """import math

LIMIT = 100
# EVOLVE-BLOCK-START
step_size = 0.5
iterations: int = 40
decay = -0.25


def solve(xs, lr=1e-3, *, patience=5):
    best = xs[0] + xs[-1]
    for i in range(2, iterations, 3):
        best = min(best, f(xs, lr=0.01) - 1)
    return best * 2 ** -1
# EVOLVE-BLOCK-END

TAIL = 7
"""


def _request(files: dict[str, str]) -> ProposalRequest:
    program = Program(
        name="demo",
        path=Path("program.md"),
        directory=None,
        goal="g",
        target=Target(("*.py",)),
        evaluation=Evaluation("python eval.py", "score", 1),
        strategy_text="",
        config=ProgramConfig(),
        unconfigured=False,
        text="",
    )
    return ProposalRequest(program, files, "prompt", Path("/nonexistent"), 1)


def _constants(text: str) -> list[tuple[int, int, object]]:
    return [
        (node.lineno, node.col_offset, node.value)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant) and type(node.value) in (int, float)
    ]


def test_same_seed_same_proposal() -> None:
    request = _request({"solver.py": SOURCE})
    first = TuneProposer().propose(request, random.Random(11))
    second = TuneProposer().propose(request, random.Random(11))
    assert first == second
    assert first.failure is None and first.files["solver.py"] != SOURCE


def test_only_evolve_block_literals_change_and_result_parses() -> None:
    lines = SOURCE.split("\n")
    inside = range(lines.index("# EVOLVE-BLOCK-START") + 1, lines.index("# EVOLVE-BLOCK-END"))
    for seed in range(40):
        new = TuneProposer().propose(_request({"solver.py": SOURCE}), random.Random(seed)).files["solver.py"]
        assert new is not None
        ast.parse(new)
        new_lines = new.split("\n")
        assert len(new_lines) == len(lines)
        assert [line for i, line in enumerate(lines) if i not in inside] == [
            line for i, line in enumerate(new_lines) if i not in inside
        ]


def test_ints_stay_ints_and_signs_stay() -> None:
    def shape(text: str) -> list[tuple[type, bool]]:
        return [(type(value), value > 0) for _, _, value in sorted(_constants(text))]  # type: ignore[operator]

    for seed in range(40):
        new = TuneProposer().propose(_request({"solver.py": SOURCE}), random.Random(seed)).files["solver.py"]
        assert new is not None
        assert shape(new) == shape(SOURCE)
        assert "decay = -" in new


def test_skips_subscripts_zero_and_outside_literals() -> None:
    found = {(lit.label, lit.text) for lit in find_literals("solver.py", SOURCE)}
    assert ("step_size", "0.5") in found and ("iterations", "40") in found
    assert ("decay", "-0.25") in found and ("lr", "1e-3") in found and ("patience", "5") in found
    assert ("lr", "0.01") in found
    texts = [lit.text for lit in find_literals("solver.py", SOURCE)]
    assert "100" not in texts and "7" not in texts and "0" not in texts
    # The knob rules of `autoloop tune`: no exponent (`2 ** -1`), no ±1 offset (`... - 1`), no range start or step.
    assert "-1" not in texts and "1" not in texts and "3" not in texts


STRUCTURE = """import numpy as np

# EVOLVE-BLOCK-START
def solve(x, n):
    total = 0.0
    for i in range(n - 1):
        total += x[2] * x[i + 1] * 0.75
    grid = np.zeros((3, 4))
    tail = x[1:3]
    cooling = 0.95  # autoloop: fixed
    for _ in range(1000):
        total *= 0.999
    return total, grid, tail
# EVOLVE-BLOCK-END
"""


def test_structure_is_left_alone() -> None:
    """range bounds' offsets, indices, slices, shapes and pinned lines are never perturbed (issue 15)."""
    texts = {(lit.line, lit.text) for lit in find_literals("solver.py", STRUCTURE)}
    assert texts == {(7, "0.75"), (11, "1000"), (12, "0.999")}
    for seed in range(60):
        new = TuneProposer().propose(_request({"solver.py": STRUCTURE}), random.Random(seed)).files["solver.py"]
        assert new is not None
        for line in ("for i in range(n - 1):", "x[2] * x[i + 1]", "np.zeros((3, 4))", "x[1:3]",
                     "cooling = 0.95  # autoloop: fixed"):
            assert line in new


def test_the_pin_also_holds_for_autoloop_tune() -> None:
    from autoloop_py.analysis.tuning import find_knobs

    assert {k.text for k in find_knobs(STRUCTURE)} == {"0.75", "1000", "0.999"}
    assert "0.95" in {k.text for k in find_knobs(STRUCTURE.replace("  # autoloop: fixed", ""))}


def test_summary_names_the_variables() -> None:
    text = "# EVOLVE-BLOCK-START\nstep_size = 0.5\n# EVOLVE-BLOCK-END\n"
    proposal = TuneProposer().propose(_request({"a.py": text}), random.Random(3))
    new_value = proposal.files["a.py"].split("\n")[1].split(" = ")[1]  # type: ignore[union-attr]
    assert proposal.summary == f"tune: step_size 0.5→{new_value}"


def test_no_literals_is_a_failure() -> None:
    proposal = TuneProposer().propose(_request({"a.py": "x = 0\n", "notes.md": "1.5\n"}), random.Random(0))
    assert proposal.failure == NO_LITERALS and proposal.files == {}


def test_untokenizable_file_is_skipped() -> None:
    assert find_literals("bad.py", "x = (1,\n") == []


def test_perturb_keeps_type_and_sign() -> None:
    rng = random.Random(0)
    for value in (1, 2, 40, -3, 1000):
        for _ in range(50):
            moved = perturb(value, rng)
            assert isinstance(moved, int) and moved != 0 and (moved > 0) == (value > 0)
            assert abs(moved - value) <= max(1, int(abs(value) * 0.2))
    for real in (0.5, -2.0, 0.0):
        nudged = perturb(real, rng)
        assert isinstance(nudged, float) and nudged != real and (real == 0 or (nudged > 0) == (real > 0))


def test_format_number_keeps_floats_floats() -> None:
    assert format_number(2.0) == "2.0"
    assert format_number(0.123456789) == "0.123457"
    assert format_number(1e-7) == "1e-07"
    assert format_number(7) == "7"


def test_get_proposer_builds_each_and_lists_names_for_unknown() -> None:
    from autoloop_py.errors import AutoloopError
    from autoloop_py.proposers import get_proposer

    assert [get_proposer(name).name for name in ("tune", "llm", "agent")] == ["tune", "llm", "agent"]
    with pytest.raises(AutoloopError, match="unknown proposer 'gpt'; choose one of: tune, llm, agent"):
        get_proposer("gpt")
