"""End to end: programs written the way upstream autoloop's examples are pass `check` and run two tune iterations.

The programs are ours, in the shapes of upstream's five: an EVOLVE-BLOCK Target bullet whose prose
names marker words in backticks, a root-relative inline `python3 -c` evaluation, an evaluation that
`cd`s into the program's code folder, a bare program whose Target is a directory named in prose, an
`## Evolution Strategy (inspired by …)` heading, upstream-only frontmatter (`timeout-minutes`) and
a `metric_direction` value upstream only warns about.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.cli import main
from autoloop_py.state.file import parse_state
from autoloop_py.state.memory import MemoryStore

PROGRAMS = ".autoloop/programs"

WAVE = """\
---
schedule: every 6h
timeout-minutes: 40
---

# Wave fit

## Goal

Tune `fit_wave` in `.autoloop/programs/wave_fit/code/initial_program.py` (between the
`# EVOLVE-BLOCK-START` / `# EVOLVE-BLOCK-END` markers) so its curve follows the reference wave.

The metric is `fit_score`. **Higher is better.**

## Target

Only modify these files:

- `.autoloop/programs/wave_fit/code/initial_program.py` -- the fitter (only code between `EVOLVE-BLOCK-START` and `EVOLVE-BLOCK-END`)

Do NOT modify:

- `.autoloop/programs/wave_fit/code/requirements.txt` -- dependencies
- The `reference` and `run_fit` functions outside the evolve block in `initial_program.py`

## Evaluation

```bash
python3 -c "
import importlib.util, json
spec = importlib.util.spec_from_file_location('program', '.autoloop/programs/wave_fit/code/initial_program.py')
program = importlib.util.module_from_spec(spec)
spec.loader.exec_module(program)
error = program.run_fit()
print(json.dumps({'fit_score': round(1.0 / (1.0 + error), 6), 'initial_score': 0.2}))
"
```

The metric is `fit_score` from the JSON output. **Higher is better.**

## Evolution Strategy (inspired by OpenEvolve)

Keep a small population of fitters in the state file; refine the best most of the time and try a
different shape now and then. If three iterations in a row are rejected, switch between the two.
"""

WAVE_CODE = """\
import math


# EVOLVE-BLOCK-START
def fit_wave(t):
    return 0.5 * math.sin(0.8 * t) + 0.1
# EVOLVE-BLOCK-END


def reference(t):
    return math.sin(t)


def run_fit():
    points = [i / 10 for i in range(60)]
    return sum((fit_wave(t) - reference(t)) ** 2 for t in points) / len(points)
"""

TRAIN = """\
---
schedule: every 6h
metric_direction: sideways
---

# Tiny train

## Goal

Lower the loss that `code/train.py` reports; the score is its inverse.

## Target

Only modify these files:

- `.autoloop/programs/tiny_train/code/train.py` -- the training script

Do NOT modify:

- `.autoloop/programs/tiny_train/code/prepare.py` -- the fixed data

## Evaluation

```bash
cd .autoloop/programs/tiny_train/code && python3 train.py > run.log 2>&1; cat run.log | python3 -c "
import sys, json, re
log = sys.stdin.read()
found = re.search(r'^loss:\\s+([\\d.]+)', log, re.MULTILINE)
print(json.dumps({'combined_score': round(1.0 / float(found.group(1)), 6)} if found else {'combined_score': 0.0, 'error': 'no loss line'}))
"
```

The metric is `combined_score`. **Higher is better** (it is `1/loss`).

## Evolution Strategy

One focused change of the learning rate or the step count per iteration.
"""

TRAIN_CODE = """\
from prepare import DATA

# EVOLVE-BLOCK-START
LEARNING_RATE = 0.05
STEPS = 20
# EVOLVE-BLOCK-END

w = 0.0
for _ in range(STEPS):
    grad = sum(2 * (w * x - y) * x for x, y in DATA) / len(DATA)
    w -= LEARNING_RATE * grad
loss = sum((w * x - y) ** 2 for x, y in DATA) / len(DATA) + 0.01
print(f"loss: {loss:.6f}")
"""

CHECKS = """\
---
schedule: every 6h
---

# Check count

## Goal

Add more checks under `checks/`: the metric counts the assertions there.

The metric is `assertions`. **Higher is better.**

## Target

Only modify or create files in the checks directory (e.g., `checks/`).

Do NOT modify:
- Source code (only checks)
- CI/CD workflows

## Evaluation

```bash
python3 -c "
import json, pathlib
files = sorted(pathlib.Path('checks').rglob('*.py'))
count = sum(p.read_text().count('assert ') for p in files)
weight = sum(float(p.read_text().split('WEIGHT = ')[1].split()[0]) for p in files if 'WEIGHT = ' in p.read_text())
print(json.dumps({'assertions': round(count + weight, 6)}))
"
```

The metric is `assertions` from the JSON output. **Higher is better.**
"""

CHECK_FILE = """\
# EVOLVE-BLOCK-START
WEIGHT = 0.5
# EVOLVE-BLOCK-END


def check_one():
    assert 1 + 1 == 2
"""


@pytest.fixture
def upstream_shaped(git_repo: Path, run_git: Callable[..., str]) -> Path:
    """Returns a repository holding the three programs, committed."""
    files = {
        f"{PROGRAMS}/wave_fit/program.md": WAVE,
        f"{PROGRAMS}/wave_fit/code/initial_program.py": WAVE_CODE,
        f"{PROGRAMS}/wave_fit/code/requirements.txt": "",
        f"{PROGRAMS}/tiny_train/program.md": TRAIN,
        f"{PROGRAMS}/tiny_train/code/train.py": TRAIN_CODE,
        f"{PROGRAMS}/tiny_train/code/prepare.py": "DATA = [(x / 10, 3 * x / 10) for x in range(10)]\n",
        f"{PROGRAMS}/check_count.md": CHECKS,
        "checks/check_basic.py": CHECK_FILE,
    }
    for rel, text in files.items():
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text(text, encoding="utf-8")
    (git_repo / ".gitignore").write_text("run.log\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "upstream-shaped programs")
    return git_repo


def test_check_accepts_upstream_shapes_and_warns_about_lenient_values(
    upstream_shaped: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--repo", str(upstream_shaped)]) == 0
    out = capsys.readouterr().out
    assert "✓ wave_fit" in out and "✓ tiny_train" in out and "✓ check_count" in out
    assert "tiny_train/program.md:3: frontmatter `metric_direction`" in out and "sideways" in out


@pytest.mark.parametrize("program", ["wave_fit", "tiny_train", "check_count"])
def test_two_tune_iterations_run_without_errors(
    upstream_shaped: Path, program: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--repo", str(upstream_shaped), "--program", program, "--iterations", "2", "--proposer", "tune"]
    assert main(argv) == 0, capsys.readouterr()
    state = parse_state(MemoryStore(upstream_shaped).read(f"{program}.md") or "", f"{program}.md")
    assert state.machine.iteration_count == 2
    assert state.machine.consecutive_errors == 0
    assert [entry.status for entry in state.history] and all(e.status in ("accepted", "rejected") for e in state.history)
    assert state.machine.best_metric is not None and state.machine.best_metric > 0


def test_the_strategy_prose_under_a_suffixed_heading_reaches_the_prompt(
    upstream_shaped: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prompt", "wave_fit", "--repo", str(upstream_shaped)]) == 0
    prompt = capsys.readouterr().out
    assert "refine the best most of the time" in prompt
    assert "fit_wave" in prompt



def test_deps_reads_the_requirements_file_or_the_frontmatter(
    upstream_shaped: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deps", "wave_fit", "--repo", str(upstream_shaped)]) == 0
    assert "wave_fit: -r .autoloop/programs/wave_fit/code/requirements.txt" in capsys.readouterr().out
    bare = upstream_shaped / PROGRAMS / "check_count.md"
    bare.write_text(bare.read_text().replace("schedule: every 6h\n", "schedule: every 6h\nrequirements: [numpy, 'scipy>=1.10']\n"))
    assert main(["deps", "check_count", "--repo", str(upstream_shaped)]) == 0
    assert "check_count: numpy 'scipy>=1.10'" in capsys.readouterr().out
    assert main(["deps", "from-an-issue", "--repo", str(upstream_shaped), "--install", "--if-found"]) == 0
    assert "not found here, so no requirements installed" in capsys.readouterr().out
    assert main(["deps", "from-an-issue", "--repo", str(upstream_shaped)]) == 1
