"""Stress: many runs whose memory branch is repacked every few iterations; prints how many crashed.

Each run is a real `autoloop run` (the offline `tune` proposer, a near-instant evaluation) in a scratch
repository with a bare origin, with AUTOLOOP_PACK_EVERY set: the repack (`git repack -d`, whose
prune-packed removes emptied object folders) runs beside the next iterations' object writes. Before
the fix, about 1 run in 32 of 100 iterations (packing every 25) stopped with `cannot write to the
object database … ENOENT`.

    python benchmarks/repack_race.py [--runs 100] [--iterations 30] [--every 5] [--parallel 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.iteration_overhead import build_repo  # noqa: E402


def one_run(base: Path, iterations: int, every: int, parallel: int) -> tuple[bool, str, float]:
    """Returns (crashed, the tail of its output, seconds) of one run in a fresh repository under base."""
    base.mkdir()
    work = build_repo(base)
    env = {**os.environ, "AUTOLOOP_PACK_EVERY": str(every), "AUTOLOOP_ISOLATION": os.environ.get(
        "AUTOLOOP_ISOLATION", "none")}
    argv = [sys.executable, "-m", "autoloop_py", "run", "--repo", str(work), "--program", "bench", "--proposer",
            "tune", "--iterations", str(iterations)]
    if parallel > 1:
        argv += ["--parallel", str(parallel)]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    output = done.stdout + done.stderr
    crashed = done.returncode != 0 or "object database" in output
    return crashed, "\n".join(output.strip().splitlines()[-3:]), seconds


def main() -> None:
    """Runs the runs and prints each crash and the totals."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--every", type=int, default=5, help="repack after every N-th recorded iteration")
    parser.add_argument("--parallel", type=int, default=1, help="every other run uses --parallel K (1: none)")
    args = parser.parse_args()
    crashes, seconds = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.runs):
            parallel = args.parallel if number % 2 else 1
            crashed, tail, took = one_run(Path(tmp) / f"run-{number}", args.iterations, args.every, parallel)
            seconds.append(took)
            if crashed:
                crashes += 1
                print(f"run {number} (--parallel {parallel}) crashed:\n{tail}", flush=True)
    print(f"runs: {args.runs} of {args.iterations} iterations, a repack every {args.every} "
          f"({args.iterations // args.every * args.runs} repacks)")
    print(f"crashed: {crashes}")
    print(f"seconds per run: {sum(seconds) / len(seconds):.1f} (total {sum(seconds):.0f})")


if __name__ == "__main__":
    main()
