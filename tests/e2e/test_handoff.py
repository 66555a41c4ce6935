"""End to end: `autoloop prompt` and `autoloop record`, the hand-off used by agentic workflows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of

REPO = Path(__file__).parents[2]
PROGRAM = ".autoloop/programs/tiny"
VALUE = "import math\n\n# EVOLVE-BLOCK-START\nx = {x}\n# EVOLVE-BLOCK-END\n"
PROGRAM_MD = """\
# Tiny

## Goal

Bring `x` close to 3.

## Target

- `code/value.py`

## Evaluation

```bash
cd "$AUTOLOOP_PROGRAM_DIR" && python3 -c "import runpy; x = runpy.run_path('code/value.py')['x']; print('{\\"score\\": %r}' % (-(x - 3) ** 2))"
```

The metric is `score`.

## Evolution Strategy

This program uses the **AlphaEvolve** strategy. On every iteration, read `strategy/alphaevolve.md` and follow it literally.
"""


@pytest.fixture
def tiny(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    folder = git_repo / PROGRAM
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(PROGRAM_MD)
    (folder / "code/value.py").write_text(VALUE.format(x=1.0))
    # A fully customised playbook borrowed from the proof of concept: its tables are what count here.
    shutil.copytree(REPO / ".autoloop/programs/groupby_evolve/strategy", folder / "strategy")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "tiny")
    return git_repo


def _state(repo: Path) -> statefile.StateFile:
    return statefile.parse_state(MemoryStore(repo).read("tiny.md") or "", "tiny.md")


def test_prompt_then_record(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompt", "tiny", "--repo", str(tiny)]) == 0
    prompt = capsys.readouterr().out
    assert "Operator: **exploration**" in prompt and "x = 1.0" in prompt
    assert MemoryStore(tiny).read("tiny.md") is None  # prompt writes nothing

    (tiny / PROGRAM / "code/value.py").write_text(VALUE.format(x=2.0))
    assert main(["record", "tiny", "--repo", str(tiny), "--evaluate", "--summary", "move x to 2",
                 "--approach", "step toward 3", "--lesson", "Scores rise as x nears 3."]) == 0
    assert "status: accepted" in capsys.readouterr().out
    state = _state(tiny)
    assert state.machine.initial_metric == -4.0 and state.machine.best_metric == -1.0
    [candidate] = population_of(state).candidates
    assert (candidate.id, candidate.status, candidate.fitness, candidate.approach) == (1, "accepted", -1.0, "step toward 3")
    assert candidate.code == "x = 2.0\n"
    assert "- **Operator**: exploration — the population has 0 members: seed diversity" in state.history[0].text
    assert state.lessons == ("Scores rise as x nears 3.",)


def test_record_rejects_changes_outside_target(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tiny / "README.md").write_text("changed\n")
    assert main(["record", "tiny", "--repo", str(tiny), "--metric", "5", "--summary", "edit readme"]) == 0
    assert "status: rejected" in capsys.readouterr().out
    state = _state(tiny)
    assert "README.md is not in the program's Target list" in state.history[0].text
    assert population_of(state).candidates == ()


def test_record_error_and_placed_parent(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tiny / PROGRAM / "code/value.py").write_text(VALUE.format(x=2.5))
    assert main(["record", "tiny", "--repo", str(tiny), "--evaluate", "--summary", "x to 2.5"]) == 0
    (tiny / PROGRAM / "code/value.py").write_text(VALUE.format(x="1 / 0"))
    assert main(["record", "tiny", "--repo", str(tiny), "--error", "it crashed", "--summary", "broken idea"]) == 0
    assert "status: error" in capsys.readouterr().out
    candidates = population_of(_state(tiny)).candidates
    assert [(c.id, c.status, c.fitness) for c in candidates] == [(2, "error", None), (1, "accepted", -0.25)]
    # With two members the strategy samples; when it picks a parent, --place-parent writes its code.
    assert main(["prompt", "tiny", "--repo", str(tiny), "--place-parent"]) == 0
    prompt = capsys.readouterr().out
    source = (tiny / PROGRAM / "code/value.py").read_text()
    parents = prompt.split("## Parents", 1)[1].split("\n## ", 1)[0]
    if "No parent" in parents:
        assert source == VALUE.format(x="1 / 0")
    else:
        first = parents.split(": candidate ", 1)[1].split(" ", 1)[0]
        assert source == VALUE.format(x={"1": 2.5, "2": "1 / 0"}[first])


def test_a_hand_off_iteration_draws_names_and_credits_a_prompts_variant(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["record", "tiny", "--repo", str(tiny), "--metric", "-4", "--summary", "nothing yet"]) == 0
    row = "| `terse` | — | 0 | 0 | 0 | 0 | Change one constant at a time. |"
    table = f"## 🧪 Prompts\n\n| Variant | Weight | Calls | Accepted | Improvement | Tokens | Instruction |\n|---|---|---|---|---|---|---|\n{row}\n\n"
    MemoryStore(tiny).update("tiny.md", lambda text: (text or "").replace("## 📊", table + "## 📊", 1), "by hand")
    capsys.readouterr()
    assert main(["prompt", "tiny", "--repo", str(tiny)]) == 0
    shown = capsys.readouterr()
    assert "## Instruction\n\nChange one constant at a time.\n" in shown.out and "prompt variant: terse" in shown.err
    (tiny / PROGRAM / "code/value.py").write_text(VALUE.format(x=2.0))
    assert main(["record", "tiny", "--repo", str(tiny), "--evaluate", "--summary", "move x to 2"]) == 0
    state = _state(tiny)
    assert "- **Prompt**: terse" in state.history[0].text
    [terse] = statefile.prompts_of(state).rows
    assert (terse.name, terse.calls, terse.accepted, terse.improvement) == ("terse", 1, 1, 3.0)
    memory = MemoryStore(tiny)
    rows = [memory.read(path) or "" for path in memory.list("traces/tiny/") if path.endswith(".json")]
    assert sum('"prompt": "terse"' in text for text in rows) == 1
