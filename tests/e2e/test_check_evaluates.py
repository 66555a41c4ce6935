"""End to end (issue 37, point 4): `autoloop check` evaluates each program's baseline once, cached by tree.

An evaluation that printed no JSON passed `check`, then wasted three iterations and paused the program. Now
`check` runs it as a run's baseline runs (sandboxed, the program's timeout) and refuses it at the Evaluation
command's line with the end of what it printed; an objective missing from the report is refused the same way.
A pass is cached under `.git/autoloop/check/` by program, tree and command; `--no-evaluate` skips it all.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from tests.programs import program_md

NAME = "demo"
FOLDER = f".autoloop/programs/{NAME}"
PROGRAM = f"{FOLDER}/program.md"


def _program(repo: Path, evaluator: str, frontmatter: dict[str, object] | None = None) -> int:
    """Writes the program (uncommitted: check reads the working tree) and returns the line of its evaluation block."""
    folder = repo / FOLDER
    (folder / "code").mkdir(parents=True, exist_ok=True)
    (folder / "code/value.py").write_text("x = 1.5\n")
    (folder / "code/evaluate.py").write_text(evaluator)
    (folder / "program.md").write_text(program_md("Demo", "Grow x.", frontmatter=frontmatter))
    lines = (folder / "program.md").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if "python3 code/evaluate.py" in line) - 1  # its ```bash


def _check(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["check", "--repo", str(repo), *args])
    return code, capsys.readouterr().out


SCORE = 'import json\nns = {}\nexec(open("code/value.py").read(), ns)\nprint(json.dumps({"score": ns["x"]}))\n'


def test_an_evaluation_that_prints_no_report_is_refused_with_what_it_printed(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _program(git_repo, 'print("warming up")\nprint("done: 1.5 points")\n')
    code, out = _check(git_repo, capsys)
    assert code == 1 and "✓ demo" not in out
    assert f"evaluating {NAME} (its baseline; timeout 300 s)…" in out
    assert f"✗ {PROGRAM}:{line}: the baseline evaluation fails, so every run would stop on it: the evaluation " \
           "printed no JSON object" in out
    assert "its stdout ended:\n    warming up\n    done: 1.5 points" in out
    # Skipped on request: nothing else is wrong with the program.
    code, out = _check(git_repo, capsys, "--no-evaluate")
    assert code == 0 and "✓ demo\n" in out and "evaluating" not in out


def test_an_objective_missing_from_the_report_is_refused(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _program(git_repo, SCORE, {"objectives": "[{score: higher}, {cost: lower}]"})
    code, out = _check(git_repo, capsys)
    assert code == 1
    assert (f"✗ {PROGRAM}:{line}: the baseline's report has no number for the objective `cost` (keys: score); print "
            "each objective in the JSON object") in out
    assert 'its stdout ended:\n    {"score": 1.5}' in out


def test_a_crash_and_a_timeout_are_refused(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _program(git_repo, "import numpy_that_is_not_installed\n")
    code, out = _check(git_repo, capsys)
    assert code == 1 and "exited with status 1" in out and "ModuleNotFoundError" in out
    _program(git_repo, "import time\ntime.sleep(60)\n", {"evaluation-timeout": 1})
    code, out = _check(git_repo, capsys)
    assert code == 1 and "timeout 1 s" in out and "timed out after 1 s" in out


def test_a_pass_is_cached_by_tree_and_command(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _program(git_repo, SCORE)
    code, out = _check(git_repo, capsys)
    assert code == 0 and "evaluating demo" in out and "✓ demo (baseline score 1.5)" in out
    code, out = _check(git_repo, capsys)
    assert code == 0 and "evaluating demo" not in out and "✓ demo (baseline score 1.5; cached)" in out
    assert len(list((git_repo / ".git/autoloop/check").glob("*.json"))) == 1
    # The cache lives in .git, never in the work tree; committing the same files keeps the same tree.
    status = subprocess.run(["git", "status", "--porcelain"], cwd=git_repo, capture_output=True, text=True).stdout
    assert status.split() == ["??", ".autoloop/"]
    subprocess.run(["git", "add", "-A"], cwd=git_repo, check=True)
    subprocess.run(["git", "commit", "-qm", "demo"], cwd=git_repo, check=True)
    code, out = _check(git_repo, capsys)
    assert code == 0 and "; cached)" in out
    # A changed file is a new tree: evaluated again, and a failure is never cached.
    (git_repo / FOLDER / "code/value.py").write_text("x = 2.5\n")
    code, out = _check(git_repo, capsys)
    assert code == 0 and "evaluating demo" in out and "✓ demo (baseline score 2.5)" in out
    (git_repo / FOLDER / "code/value.py").write_text("x = float('nan')\n")
    for _ in range(2):
        code, out = _check(git_repo, capsys)
        assert code == 1 and "evaluating demo" in out and "metric 'score' is not finite (nan)" in out
