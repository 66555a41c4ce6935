"""End to end: `autoloop edit` refuses, naming file:line and committing nothing, every table a run would refuse.

An AdaEvolve program runs one iteration; then an editor script ($EDITOR) breaks one table at a time: the
Machine State, an island's G in the strategy state, a Models row, a Prompts row, a Population entry. Each edit exits
non-zero, names the state file's line, and leaves memory/autoloop where it was; a good edit still commits,
and `run` itself refuses the same broken island before any evaluation.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state.memory import MemoryStore
from tests.programs import install_strategy_program

NAME = "function_minimization"
PROGRAM = f".autoloop/programs/{NAME}"
STATE = f"{NAME}.md"
POINTER = """## Evolution Strategy

This program uses the **AdaEvolve** strategy. On every iteration, read `strategy/adaevolve.md` and follow it literally.
"""
# Replaces the first match of EDIT_PATTERN with EDIT_WITH in the file the editor is given.
EDITOR = """import os, re, sys
path = sys.argv[1]
text = open(path, encoding="utf-8").read()
edited, count = re.subn(os.environ["EDIT_PATTERN"], os.environ["EDIT_WITH"], text, count=1, flags=re.MULTILINE)
assert count == 1, os.environ["EDIT_PATTERN"]
open(path, "w", encoding="utf-8").write(edited)
"""
MODELS = ("## 🎰 Models\n\n| Model | Weight | Calls | Accepted | Improvement | Tokens | Spend |\n"
          "|-------|--------|-------|----------|-------------|--------|-------|\n")
PROMPTS = ("## 🧪 Prompts\n\n| Variant | Weight | Calls | Accepted | Improvement | Tokens | Instruction |\n"
           "|---|---|---|---|---|---|---|\n")


@pytest.fixture
def ada_repo(  # type: ignore[no-untyped-def]
    git_repo: Path, run_git, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    repo = install_strategy_program(git_repo, run_git, PROGRAM, "adaevolve", POINTER, "population_size: 8\n")
    assert main(["run", "--repo", str(repo), "--program", NAME, "--iterations", "1"]) == 0
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    return repo


def _edit(repo: Path, pattern: str, replacement: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("EDIT_PATTERN", pattern)
    monkeypatch.setenv("EDIT_WITH", replacement)
    return main(["edit", NAME, "--repo", str(repo), "-m", "by hand"])


# (what breaks, the pattern the editor replaces, its replacement, where the bad line is, the message). The bad
# line is the line of `at` in the file before the edit (the match's when None), plus `offset`.
BROKEN = [
    ("machine-state", r"^\| Iteration Count \| 1 \|", "| Iteration Count | lots |", None, 0,
     "'Iteration Count' is 'lots'"),
    ("island-g", r"^(\| 1 \| balanced \| )0\.1( \|)", r"\1lots\2", None, 0, "island 1's G 'lots' is not a number"),
    ("models-row", r"^(## 📊 Iteration History)",
     MODELS + r"| openai/gpt-4o-mini | heavy | 3 | 1 | 0.1 | 100 | 0 |\n\n---\n\n\1", None, 4,
     "Weight is 'heavy', which is not a number >= 0"),
    ("prompts-row", r"^(## 📊 Iteration History)",
     PROMPTS + r"| `terse` | — | 1 | 2 | 0 | 0 | Be brief. |\n\n---\n\n\1", None, 4,
     "terse: Accepted (2) exceeds Calls (1); correct one"),
    ("population-entry", r"^### Candidate 2 · island 1", "### Candidate 1 · island 1", r"^### Candidate 1 · island 0",
     0, "candidate 1 appears twice"),
    # Rows each run writes back from program.md: an edit there would be silently undone.
    ("target-metric", r"^\| Target Metric \| — \|", "| Target Metric | 0.2 |", None, 0,
     f"'Target Metric' is rewritten by every run from `target-metric:` in {PROGRAM}/program.md: set it there"),
    ("metric-direction", r"^\| Metric Direction \| higher \|", "| Metric Direction | lower |", None, 0,
     "'Metric Direction' is rewritten by every run from `metric_direction:`"),
]


def test_each_broken_table_is_refused_at_its_line_and_nothing_is_committed(
    ada_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = MemoryStore(ada_repo)
    tip, text = memory.tip(), memory.read(STATE) or ""
    for what, pattern, replacement, at, offset, message in BROKEN:
        found = re.search(at or pattern, text, re.MULTILINE)
        assert found, what
        line = text.count("\n", 0, found.start()) + 1 + offset
        capsys.readouterr()
        assert _edit(ada_repo, pattern, replacement, monkeypatch) == 1, what
        err = " ".join(capsys.readouterr().err.split())
        assert f"{STATE}:{line}:" in err and message in err and "Nothing was written" in err, (what, err)
        assert memory.tip() == tip, what
    # A good edit of the same cell still commits, and the next iteration reads it.
    assert _edit(ada_repo, r"^(\| 1 \| balanced \| )0\.1( \|)", r"\g<1>0.5\2", monkeypatch) == 0
    assert memory.tip() != tip and "| 1 | balanced | 0.5 |" in (memory.read(STATE) or "")
    assert main(["run", "--repo", str(ada_repo), "--program", NAME, "--iterations", "1"]) == 0


def test_run_refuses_the_broken_island_before_evaluating(
    ada_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = MemoryStore(ada_repo)
    text = memory.read(STATE) or ""
    found = re.search(r"^(\| 1 \| balanced \| )0\.1( \|)", text, re.MULTILINE)
    assert found
    line = text.count("\n", 0, found.start()) + 1
    memory.update(STATE, lambda now: re.sub(found.re, r"\1lots\2", now or "", count=1), "a person's raw commit")
    tip = memory.tip()
    capsys.readouterr()
    assert main(["run", "--repo", str(ada_repo), "--program", NAME, "--iterations", "1"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"{STATE}:{line}: island 1's G 'lots' is not a number" in err
    assert memory.tip() == tip
