"""Prints how long the command line takes to start: the median of 5 runs of `autoloop --version` and of
`autoloop --help` (the `autoloop` on PATH, else `python3 -m autoloop_py`), each a fresh process.

    python benchmarks/cli_startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def _median_seconds(command: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    found = shutil.which("autoloop")
    base = [found] if found else [sys.executable, "-m", "autoloop_py"]
    print(f"command: {' '.join(base)}; median of {args.repeats} runs")
    for flag in ("--version", "--help"):
        print(f"autoloop {flag}: {_median_seconds([*base, flag], args.repeats):.3f} s")


if __name__ == "__main__":
    main()
