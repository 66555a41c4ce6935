"""Tests for autoloop_py.program.regions: EVOLVE-BLOCK regions and the file a strategy evolves."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.errors import ProgramError
from autoloop_py.program.model import Program, load_program
from autoloop_py.program.regions import evolve_block_violation, evolve_regions, primary_target
from tests.programs import program_md

EVOLVED = """import math

# EVOLVE-BLOCK-START
def step(x):
    return x * 0.5
# EVOLVE-BLOCK-END

def main():
    return step(2)
"""


def test_evolve_block_violation_cases() -> None:
    assert evolve_block_violation("x = 1\n", "y = 2\n") is None
    assert evolve_block_violation(EVOLVED, EVOLVED.replace("0.5", "0.7")) is None
    assert "outside the EVOLVE-BLOCK changed (near line 9)" in str(
        evolve_block_violation(EVOLVED, EVOLVED.replace("step(2)", "step(3)"))
    )
    assert "removed or duplicated" in str(evolve_block_violation(EVOLVED, EVOLVED.replace("# EVOLVE-BLOCK-END\n", "")))
    doubled = EVOLVED.replace("# EVOLVE-BLOCK-END\n", "# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START\n")
    assert "removed or duplicated" in str(evolve_block_violation(EVOLVED, doubled))


def test_evolve_regions_accepts_any_comment_syntax() -> None:
    assert evolve_regions("a\n// EVOLVE-BLOCK-START\nb\nc\n// EVOLVE-BLOCK-END\n") == [(2, 4)]
    assert evolve_regions("<!-- EVOLVE-BLOCK-END -->\n") == []


def _program(root: Path, *target: str) -> Program:
    folder = root / ".autoloop/programs/p"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "program.md").write_text(program_md("P", "Grow.", target=target, protected=()))
    return load_program(root, Path(".autoloop/programs/p/program.md"))


def test_primary_target_is_the_first_file_with_markers(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text(EVOLVED)
    program = _program(tmp_path, "a.py", "b.py")
    assert primary_target(program, tmp_path) == "b.py"
    (tmp_path / "b.py").write_text("y = 2\n")
    assert primary_target(program, tmp_path) == "a.py"


def test_primary_target_needs_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / "gone.py").write_text("x = 1\n")
    program = _program(tmp_path, "gone.py")
    (tmp_path / "gone.py").unlink()
    with pytest.raises(ProgramError, match="at least one existing Target file"):
        primary_target(program, tmp_path)
