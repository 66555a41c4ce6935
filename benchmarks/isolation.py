"""Prints the time bubblewrap adds to one evaluation: a trivial evaluation run N times with `bwrap` and with `none`.

Both modes go through `run_sandboxed` exactly as `evaluate()` does (rlimits through prlimit in both);
the difference of the medians is what the sandbox costs per evaluation run. Target: under 50 ms on 2 cores.

    python benchmarks/isolation.py [--runs 30] [--command 'python3 -c "print(1)"']
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from autoloop_py.sandbox.environment import scrub_environment
from autoloop_py.sandbox.run import bwrap_status, isolation_for, run_sandboxed


def _times(mode: str, command: str, runs: int, workdir: Path) -> list[float]:
    policy = isolation_for(mode, network=False, hidden=[Path.cwd()]).evaluation
    env = scrub_environment(os.environ)
    found = []
    for _ in range(runs):
        started = time.perf_counter()
        result = run_sandboxed(command, workdir, policy, env=env, timeout=60)
        found.append(time.perf_counter() - started)
        if result.returncode != 0:
            raise SystemExit(f"{mode}: the command failed: {result.stderr.strip()}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--command", default="true", help="the evaluation (default: `true`, pure overhead)")
    args = parser.parse_args()
    usable, why = bwrap_status()
    if not usable:
        print(f"bubblewrap cannot run here: {why}")
        return 1
    with tempfile.TemporaryDirectory(prefix="autoloop-bench-") as tmp:
        workdir = Path(tmp)
        _times("none", args.command, 3, workdir)  # warm the page cache
        results = {mode: _times(mode, args.command, args.runs, workdir) for mode in ("none", "bwrap")}
    print(f"{args.runs} runs of `{args.command}` on {os.cpu_count()} cores")
    for mode, found in results.items():
        ms = [t * 1000 for t in found]
        print(f"  {mode:<6} median {statistics.median(ms):7.1f} ms   min {min(ms):7.1f}   max {max(ms):7.1f}")
    added = (statistics.median(results["bwrap"]) - statistics.median(results["none"])) * 1000
    print(f"bwrap adds {added:.1f} ms per evaluation run (median; target < 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
