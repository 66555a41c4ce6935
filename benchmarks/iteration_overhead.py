"""Prints the runner's own time per iteration (everything but the evaluation) and its parts.

Target: under 0.5 s median on 2 cores. Runs offline `tune` iterations of a program whose
evaluation is near-instant, in a scratch repository with a bare origin (so pushes are included).

    python benchmarks/iteration_overhead.py [--iterations 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program

PROGRAM = """\
---
evaluation-timeout: 30
---

# Bench

## Goal

Maximise score.

## Target

- `code/value.py`

## Evaluation

```bash
python3 -c "import runpy; print('{\\"score\\": %f}' % runpy.run_path('code/value.py')['score'])"
```

The metric is `score`.
"""

VALUE = "# EVOLVE-BLOCK-START\na = 1.5\nb = 2.0\nc = 3\n# EVOLVE-BLOCK-END\nscore = -(a - 2.2) ** 2 - (b - 0.7) ** 2 - (c - 5) ** 2\n"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def build_repo(base: Path) -> Path:
    """Returns a scratch repository with one program and a bare origin."""
    work, origin = base / "work", base / "origin.git"
    _git(base, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(base, "init", "-q", "-b", "main", str(work))
    _git(work, "config", "user.name", "bench")
    _git(work, "config", "user.email", "bench@example.invalid")
    program = work / ".autoloop/programs/bench"
    (program / "code").mkdir(parents=True)
    (program / "program.md").write_text(PROGRAM)
    (program / "code/value.py").write_text(VALUE)
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "bench")
    _git(work, "remote", "add", "origin", str(origin))
    _git(work, "push", "-q", "origin", "main")
    return work


def main() -> None:
    """Runs the iterations and prints the median overhead and its parts."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = build_repo(Path(tmp))
        program = load_program(root, Path(".autoloop/programs/bench/program.md"))
        parts: dict[str, list[float]] = {}
        overheads = []
        for _ in range(args.iterations):
            start = time.perf_counter()
            outcome = run_iteration(root, program, RunOptions(proposer="tune"), datetime.now(timezone.utc))
            wall = time.perf_counter() - start
            for step, seconds in outcome.timings.items():
                parts.setdefault(step, []).append(seconds)
            evaluation = outcome.timings.get("evaluate", 0.0) + outcome.timings.get("evaluate baseline", 0.0)
            overheads.append(wall - evaluation)
    print(f"iterations: {args.iterations}")
    print(f"runner overhead per iteration (all but evaluation): median {statistics.median(overheads):.3f} s, "
          f"max {max(overheads):.3f} s (target < 0.5 s median)")
    for step, values in parts.items():
        print(f"  {step:<18} median {statistics.median(values):.3f} s")


if __name__ == "__main__":
    main()
