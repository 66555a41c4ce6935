"""Prints what `agent-network: outside-only` costs an agent command's start: slirp4netns is attached to the
sandbox's network namespace before the command runs. The command is `true` (no traffic is measured), under
bubblewrap, with the host's network and with the outside-only one.

    python benchmarks/agent_network.py [--repeats 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from autoloop_py.sandbox.private_network import slirp_status
from autoloop_py.sandbox.run import bwrap_status, isolation_for, run_sandboxed


def _median_ms(workdir: Path, outside_only: bool, repeats: int) -> float:
    policy = isolation_for("bwrap", network=False).agent
    policy = replace(policy, outside_only=outside_only)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        done = run_sandboxed("true", workdir, policy, env=dict(os.environ), timeout=60)
        times.append((time.perf_counter() - started) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"the sandboxed command failed: {done.stderr}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    for usable, why in (bwrap_status(), slirp_status()):
        if not usable:
            raise SystemExit(f"cannot measure: {why}")
    with tempfile.TemporaryDirectory(prefix="bench-agent-net-") as folder:
        workdir = Path(folder)
        host = _median_ms(workdir, False, args.repeats)
        outside = _median_ms(workdir, True, args.repeats)
    print(f"agent command `true` under bubblewrap, median of {args.repeats}:")
    print(f"  agent-network: host          {host:8.1f} ms")
    print(f"  agent-network: outside-only  {outside:8.1f} ms  (+{outside - host:.1f} ms to attach slirp4netns)")


if __name__ == "__main__":
    main()
