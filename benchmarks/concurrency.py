"""Prints iterations recorded vs iterations run for N = 1, 4, 8, 16 concurrent runners, and the time per iteration.

Each runner is a separate `autoloop run` process in its own clone of one bare origin (as parallel
GitHub Actions jobs are), running one offline `tune` iteration. Half of the runners share one
program and the others each have their own, so the memory branch sees both kinds of contention.
Target: recorded == run for every N.

    python benchmarks/concurrency.py [--sizes 1 4 8 16]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoloop_py.state import file as statefile

PROGRAM = """\
---
evaluation-timeout: 60
---

# {name}

## Goal

Maximise score.

## Target

- `code/value.py`

## Evaluation

```bash
python3 -c "import runpy; print('{{\\"score\\": %f}}' % runpy.run_path('code/value.py')['score'])"
```

The metric is `score`.
"""

VALUE = "# EVOLVE-BLOCK-START\na = 1.5\nb = 2.0\n# EVOLVE-BLOCK-END\nscore = -(a - 2.2) ** 2 - (b - 0.7) ** 2\n"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def build(base: Path, programs: list[str]) -> Path:
    """Returns a bare origin holding the programs."""
    origin, seed = base / "origin.git", base / "seed"
    _git(base, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(base, "init", "-q", "-b", "main", str(seed))
    for name in programs:
        folder = seed / ".autoloop/programs" / name
        (folder / "code").mkdir(parents=True)
        (folder / "program.md").write_text(PROGRAM.format(name=name))
        (folder / "code/value.py").write_text(VALUE)
    _git(seed, "add", "-A")
    _git(seed, "-c", "user.name=b", "-c", "user.email=b@e", "commit", "-qm", "programs")
    _git(seed, "remote", "add", "origin", str(origin))
    _git(seed, "push", "-q", "origin", "main")
    return origin


def measure(n: int) -> tuple[int, int, float]:
    """Returns (iterations run, iterations recorded, seconds per iteration) for n concurrent runners."""
    shared = max(1, n // 2)
    names = ["shared"] * shared + [f"own{i}" for i in range(n - shared)]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        origin = build(base, sorted(set(names)))
        clones = []
        for i in range(n):
            clone = base / f"runner{i}"
            _git(base, "clone", "-q", str(origin), str(clone))
            _git(clone, "config", "user.name", f"runner{i}")
            _git(clone, "config", "user.email", f"runner{i}@example.invalid")
            clones.append(clone)
        logs = [base / f"runner{i}.log" for i in range(n)]
        start = time.perf_counter()
        runs = [
            subprocess.Popen([sys.executable, "-m", "autoloop_py", "run", "--repo", str(clone), "--program", name],
                             stdout=subprocess.DEVNULL, stderr=log.open("w"))
            for clone, name, log in zip(clones, names, logs)
        ]
        codes = [run.wait(timeout=600) for run in runs]
        elapsed = time.perf_counter() - start
        for code, log in zip(codes, logs):
            if code:
                print(f"  a runner exited {code}:\n{log.read_text()[-2000:]}", file=sys.stderr)
        reader = base / "reader"
        _git(base, "clone", "-q", str(origin), str(reader))
        _git(reader, "fetch", "-q", "origin", "memory/autoloop:memory/autoloop")
        recorded = 0
        for name in set(names):
            text = _git(reader, "show", f"memory/autoloop:{name}.md")
            recorded += statefile.parse_state(text + "\n").machine.iteration_count
        return n, recorded, elapsed / n


def main() -> None:
    """Prints one line per size."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16])
    args = parser.parse_args()
    print(f"{'runners':>8} {'run':>5} {'recorded':>9} {'s/iteration (wall / runners)':>30}")
    for n in args.sizes:
        print(f"measuring {n} concurrent runners...", file=sys.stderr)
        run, recorded, per = measure(n)
        print(f"{n:>8} {run:>5} {recorded:>9} {per:>30.2f}" + ("" if run == recorded else "   <-- LOST RECORDS"))


if __name__ == "__main__":
    main()
