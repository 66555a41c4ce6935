"""Prints the time the sandbox adds to one evaluation: bubblewrap against none, and each process-limit mechanism.

A trivial evaluation runs N times for each isolation (none, bwrap) and each process limit that can run
here (off, auto, cgroup, uid; `sandbox/process_limit.py`), through `run_sandboxed` exactly as `evaluate()`
does (the other rlimits through prlimit in all of them), in a copy of the tree made as the runner makes
it (`--files` files, which the uid mechanism hands over to uid 65534 before every run). The difference
of the medians is what each costs per evaluation run. Target: bwrap under 50 ms on 2 cores. Those rows
run as the runner's own uid (AUTOLOOP_SLOT_USER=off); a root runner then times `none` with a uid of its
own per command (`sandbox/slot_user.py`, its default) against that.

    python benchmarks/isolation.py [--runs 30] [--files 200] [--command 'python3 -c "print(1)"']
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from autoloop_py.sandbox import candidate_dir, process_limit, slot_user
from autoloop_py.sandbox.environment import scrub_environment
from autoloop_py.sandbox.policy import SandboxPolicy
from autoloop_py.sandbox.run import bwrap_status, isolation_for, run_sandboxed

# `auto` is one of these (timed as itself only where it is RLIMIT_NPROC, a runner that is not root).
MECHANISMS = (process_limit.OFF, process_limit.CGROUP, process_limit.UID, process_limit.AUTO)


def _policy(mode: str, mechanism: str) -> SandboxPolicy:
    return replace(isolation_for(mode, network=False, hidden=[Path.cwd()]).evaluation, process_limit=mechanism)


def _time(policy: SandboxPolicy, command: str, workdir: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = run_sandboxed(command, workdir, policy, env=env, timeout=60)
    if result.returncode != 0:
        raise SystemExit(f"{policy.mode}/{policy.process_limit}: the command failed: {result.stderr.strip()}")
    return time.perf_counter() - started


def _as_root(
    policy: SandboxPolicy, command: str, workdir: Path, env: dict[str, str], runs: int
) -> tuple[float, float] | None:
    """Returns the median ms of `none` runs with a uid of their own and without (None where none is given)."""
    if slot_user.wanted(False, {}, process_limit.facts(workdir)):
        return None
    times: dict[str, list[float]] = {"auto": [], "off": []}
    for _ in range(runs):
        for choice, found in times.items():
            os.environ[slot_user.ENV_VAR] = choice
            found.append(_time(policy, command, workdir, env))
    del os.environ[slot_user.ENV_VAR]
    return statistics.median(times["auto"]) * 1000, statistics.median(times["off"]) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--files", type=int, default=200, help="files in the evaluated copy (default 200)")
    parser.add_argument("--command", default="true", help="the evaluation (default: `true`, pure overhead)")
    args = parser.parse_args()
    usable, why = bwrap_status()
    modes = ["none", "bwrap"] if usable else ["none"]
    if not usable:
        print(f"bubblewrap cannot run here ({why}): `none` only")
    mechanisms = []
    for mechanism in MECHANISMS:
        limit = process_limit.resolve(mechanism)
        print(f"process limit {mechanism}: {process_limit.describe(limit)}")
        if not limit.problem and (mechanism != process_limit.AUTO or limit.mechanism == process_limit.RLIMIT):
            mechanisms.append(mechanism)
    results: dict[tuple[str, str], list[float]] = {}
    os.environ[slot_user.ENV_VAR] = "off"  # each mechanism alone; _as_root times the uid per command apart
    with tempfile.TemporaryDirectory(prefix="autoloop-bench-") as tmp:
        source = Path(tmp) / "source"
        for index in range(args.files):
            folder = source / f"pkg{index % 10}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"module{index}.py").write_text(f"x = {index}\n")
        policies = {(mode, mechanism): _policy(mode, mechanism) for mode in modes for mechanism in mechanisms}
        env = scrub_environment(os.environ)
        with candidate_dir.copy_of(source, prefix="autoloop-eval-") as tree:
            for policy in policies.values():
                _time(policy, args.command, tree, env)  # warm the page cache
            # Round-robin, so that whatever else the machine does weighs on every combination alike. A cgroup
            # run after another is cheaper than one after a pause (the kernel's move into a group waits for an
            # RCU grace period, which back-to-back moves share): here each follows a run without one, as in use.
            for _ in range(args.runs):
                for key, policy in policies.items():
                    results.setdefault(key, []).append(_time(policy, args.command, tree, env))
            as_root = _as_root(_policy("none", process_limit.AUTO), args.command, tree, env, args.runs)
    print(f"{args.runs} runs of `{args.command}` in a copy of {args.files} files, on {os.cpu_count()} cores")
    medians = {key: statistics.median(found) * 1000 for key, found in results.items()}
    for (mode, mechanism), found in results.items():
        ms = [t * 1000 for t in found]
        added = medians[mode, mechanism] - medians[mode, process_limit.OFF]
        print(f"  {mode:<6} {mechanism:<7} median {medians[mode, mechanism]:7.1f} ms   min {min(ms):7.1f}   "
              f"max {max(ms):7.1f}   the limit adds {added:6.1f} ms")
    if as_root is not None:
        own, root = as_root
        print(f"as root without bwrap, a uid of its own per command (slot_user.py) adds {own - root:.1f} ms "
              f"(median {own:.1f} ms against {root:.1f} ms with {slot_user.ENV_VAR}=off)")
    if usable:
        added = medians["bwrap", process_limit.OFF] - medians["none", process_limit.OFF]
        print(f"bwrap adds {added:.1f} ms per evaluation run (median, process limit off; target < 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
