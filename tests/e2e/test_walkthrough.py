"""End to end: the README's newcomer walk-through (init, new with an answers file, run, status, edit, run), as written.

The program improves an existing file (`new --target`), its markers answered from a file; the offline
`tune` proposer stands in for a model.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from tests.programs import REPO

HOT = "def weight():\n    return 0.5\n"
BENCH = """import json, sys
sys.path.insert(0, "src")
from mylib.hot import weight
print(json.dumps({"seconds": abs(weight() - 0.9) + 1.0}))
"""


def _readme_block(heading: str) -> str:
    """Returns the first ```bash block under a README heading."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(heading):]
    return section[section.index("```bash\n") + 8: section.index("\n```", section.index("```bash\n"))]


def _as_written(walkthrough: str, line: str) -> list[str]:
    """Returns the arguments of one `autoloop …` line of the README's walk-through, which must hold it as written."""
    assert any(row.split("#")[0].strip() == line for row in walkthrough.splitlines()), f"the README lost `{line}`"
    return shlex.split(line)[1:]


@pytest.mark.usefixtures("installed_from_an_index")  # the walk-through installs autoloop-py from an index
def test_the_readme_walkthrough_works_as_written(
    git_repo_with_origin: Path, run_git: Callable[..., str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = git_repo_with_origin
    monkeypatch.chdir(repo)
    (repo / "src/mylib").mkdir(parents=True)
    (repo / "src/mylib/hot.py").write_text(HOT)
    (repo / "bench").mkdir()
    (repo / "bench/hot.py").write_text(BENCH)
    walkthrough = _readme_block("## Your first program")
    # The README's answers file, as the walk-through writes it.
    answers = walkthrough[walkthrough.index("<<'EOF'\n") + 8: walkthrough.index("\nEOF")] + "\n"
    assert "evaluation command:" in answers and "metric name: seconds" in answers
    (repo / "answers.yaml").write_text(answers)

    assert main(_as_written(walkthrough, "autoloop init")) == 0
    assert "autoloop-py==" in (repo / ".github/workflows/autoloop.yml").read_text()
    assert main(_as_written(walkthrough, "autoloop new speedup --target src/mylib/hot.py --answers answers.yaml")) == 0
    assert "every <CUSTOMIZE…> marker is resolved" in capsys.readouterr().out
    assert main(_as_written(walkthrough, "autoloop check")) == 0
    assert not (repo / ".autoloop/programs/speedup/code").exists()  # no stubs over existing files
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "autoloop: the speedup program")
    run_git(repo, "push", "-q", "origin", "main")

    assert main(_as_written(walkthrough, "autoloop run --program speedup --iterations 3")) == 0
    assert main(_as_written(walkthrough, "autoloop status speedup")) == 0
    out = capsys.readouterr().out
    assert "speedup" in out and "Recent iterations" in out

    # The edit step: `autoloop edit speedup` (here with --file, as an editor would save it).
    text = subprocess.run(["git", "show", "memory/autoloop:speedup.md"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout
    edited = text.replace("## 🎯 Current Priorities\n", "## 🎯 Current Priorities\n\n- Try larger weights first.\n", 1)
    assert edited != text
    (repo / "edited.md").write_text(edited)
    assert main([*_as_written(walkthrough, "autoloop edit speedup"), "--file", "edited.md"]) == 0

    assert main(_as_written(walkthrough, "autoloop run --program speedup")) == 0
    state = statefile.parse_state(subprocess.run(
        ["git", "show", "memory/autoloop:speedup.md"], cwd=repo, capture_output=True, text=True, check=True,
    ).stdout)
    assert state.machine.iteration_count == 4
    assert state.priorities == ("Try larger weights first.",)
    assert state.machine.initial_metric == pytest.approx(1.4)
