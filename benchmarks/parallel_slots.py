"""Measures ticks of k parallel slots: wall time per tick, and the best metric against evaluations.

For k = 1, 2, 4, 8 it runs the example programs (default flow, the offline `tune` proposer, no network)
in a scratch repository with a bare origin, by `autoloop run --parallel k` in this process, until the
same number of evaluations is spent (k = 1 is the plain iteration). It prints, per program and k, the
median seconds per tick, the seconds per evaluation, and the best metric after each quarter of the
budget. The slots of a tick are processes: on a machine with c cores, k > c mostly measures contention.

    python benchmarks/parallel_slots.py [--budget 16] [--slots 1 2 4 8] [--programs function_minimization]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoloop_py.cli import main
from autoloop_py.state import file as statefile

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = ("function_minimization", "circle_packing")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def scratch_repo(base: Path, name: str) -> Path:
    """Returns a clone (with a bare origin) of a repository holding the example program in the default flow."""
    source = base / "source"
    _git(base, "init", "-q", "-b", "main", str(source))
    folder = source / ".autoloop/programs" / name
    shutil.copytree(REPO / ".autoloop/programs" / name, folder, ignore=shutil.ignore_patterns("__pycache__"))
    text = (folder / "program.md").read_text(encoding="utf-8")
    if "## Evolution Strategy" in text:
        (folder / "program.md").write_text(text[: text.index("## Evolution Strategy")], encoding="utf-8")
    _git(source, "add", "-A")
    _git(source, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-qm", name)
    _git(base, "clone", "-q", "--bare", str(source), str(base / "origin.git"))
    _git(base, "clone", "-q", str(base / "origin.git"), str(base / "work"))
    for key, value in (("user.name", "bench"), ("user.email", "bench@example.invalid")):
        _git(base / "work", "config", key, value)
    return base / "work"


def best_of(work: Path, name: str) -> tuple[int, float | None]:
    """Returns (iterations recorded, best metric) from the state file on the memory branch."""
    text = _git(work, "show", f"origin/memory/autoloop:{name}.md")
    state = statefile.parse_state(text + "\n", f"{name}.md")
    return state.machine.iteration_count, state.machine.best_metric


def run(name: str, slots: int, budget: int) -> tuple[list[float], list[tuple[int, float | None]]]:
    """Runs ticks of `slots` until `budget` evaluations; returns (seconds per tick, (evaluations, best) per tick)."""
    walls: list[float] = []
    curve: list[tuple[int, float | None]] = []
    with tempfile.TemporaryDirectory(prefix="autoloop-bench-") as folder:
        work = scratch_repo(Path(folder), name)
        done = 0
        while done < budget:
            start = time.perf_counter()
            with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
                code = main(["run", "--repo", str(work), "--program", name, "--proposer", "tune",
                             "--parallel", str(slots)])
            walls.append(time.perf_counter() - start)
            if code != 0:
                raise SystemExit(f"{name}: autoloop run --parallel {slots} failed")
            _git(work, "fetch", "-q", "origin")
            done, best = best_of(work, name)
            curve.append((done, best))
    return walls, curve


def at(curve: list[tuple[int, float | None]], evaluations: int) -> float | None:
    """Returns the best metric once `evaluations` were spent (the first tick that reached them)."""
    return next((best for done, best in curve if done >= evaluations), curve[-1][1] if curve else None)


def main_bench(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=16, help="evaluations per run (default 16)")
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--programs", nargs="+", default=list(PROGRAMS))
    args = parser.parse_args(argv)
    print(f"cores: {os.cpu_count()}; budget: {args.budget} evaluations; default flow, tune proposer")
    quarters = [max(1, args.budget * q // 4) for q in (1, 2, 3, 4)]
    print(f"{'program':24} {'k':>2} {'ticks':>5} {'s/tick':>7} {'s/eval':>7}  best at " +
          " / ".join(str(q) for q in quarters) + " evaluations")
    for name in args.programs:
        for slots in args.slots:
            print(f"running {name} k={slots}", file=sys.stderr)
            walls, curve = run(name, slots, args.budget)
            evaluations = curve[-1][0]
            bests = " / ".join(f"{b:.6g}" if (b := at(curve, q)) is not None else "—" for q in quarters)
            print(f"{name:24} {slots:>2} {len(walls):>5} {statistics.median(walls):>7.2f} "
                  f"{sum(walls) / evaluations:>7.2f}  {bests}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_bench())
