"""Prints how many git processes one iteration of `autoloop run` starts, by git command.

Runs the CLI (`python3 -m autoloop_py run --proposer tune`) of this checkout on the function_minimization
bench program of peer_overhead.py, in a scratch repository with a bare origin, with a `git` first on PATH
that logs each invocation and runs the real git. Every git process counts: the runner's own, GitPython's,
the ones the evaluation's candidate copy starts, and the ones a run leaves running beside its next iteration
(the memory branch's push, the repack every 25 iterations; see GitSession.owns_pushes). Two runs (`--short`
and `--long` iterations) cancel out what a run does once (setup, the first baseline, removing its worktree):
the figure is their difference divided by the difference in iterations.

    python benchmarks/git_processes.py [--short 5] [--long 15]
"""

from __future__ import annotations

import argparse
import collections
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from peer_overhead import ours_setup

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = """#!/bin/sh
printf '%s\\0' "$*" >> {log}
exec {git} "$@"
"""


def count(iterations: int) -> collections.Counter[str]:
    """Runs `iterations` tune iterations; returns how many git processes started, by git subcommand."""
    with tempfile.TemporaryDirectory(prefix="autoloop-gitcount-") as tmp:
        base = Path(tmp)
        repo = ours_setup(base)
        tools, log = base / "bin", base / "git.log"
        tools.mkdir()
        real = shutil.which("git")
        assert real is not None, "git is not installed"
        (tools / "git").write_text(WRAPPER.format(log=shlex.quote(str(log)), git=shlex.quote(real)))
        (tools / "git").chmod(0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOLOOP_")}
        env.update(PATH=f"{tools}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(ROOT))
        command = [sys.executable, "-m", "autoloop_py", "run", "--repo", str(repo), "--program", "bench",
                   "--iterations", str(iterations), "--proposer", "tune"]
        subprocess.run(command, env=env, check=True, capture_output=True)
        calls = [entry for entry in log.read_bytes().decode("utf-8", "replace").split("\0") if entry]
    return collections.Counter(_subcommand(call) for call in calls)


def _subcommand(call: str) -> str:
    """Returns the git subcommand of a logged command line (skipping `-c key=value` and `-C dir`)."""
    words = call.split(" ")
    index = 0
    while index < len(words) and words[index] in ("-c", "-C"):
        index += 2
    return words[index] if index < len(words) else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=5)
    parser.add_argument("--long", type=int, default=15)
    args = parser.parse_args()
    short, long = count(args.short), count(args.long)
    span = args.long - args.short
    total = (sum(long.values()) - sum(short.values())) / span
    print(f"git processes per iteration of `autoloop run --proposer tune`: {total:.1f} "
          f"({sum(short.values())} in {args.short} iterations, {sum(long.values())} in {args.long})")
    for name in sorted(set(long) | set(short), key=lambda n: short[n] - long[n]):
        per = (long[name] - short[name]) / span
        if per:
            print(f"  {name:<16} {per:5.1f}")


if __name__ == "__main__":
    main()
