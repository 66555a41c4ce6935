"""Prints the wall time of one tick of the plain workflow under act (host mode, offline), per job and per step.

The tick is what tests/workflows runs: `autoloop init --proposer agent` in a fresh repository with a bare
origin, the loopback GitHub fake, the stand-in actions of tests/workflows/actions, and a scripted agent that
improves the sample program once. One scheduled tick: plan -> propose -> publish. The install steps install
a wheel of this checkout into a fresh venv (--system-site-packages, so nothing is downloaded); the figures
are the cost of a tick on this machine minus the network (no pip download, no apt-get, no artifact upload).

    python benchmarks/workflow_tick.py [--programs 1] [--repeats 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import warnings
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakegithub import FakeGitHub  # noqa: E402
from tests.workflows.act_log import Tick  # noqa: E402
from tests.workflows.harness import TOKEN, Site, agent_command, build_wheel, program_files  # noqa: E402

# The steps worth a line of their own; the others are summed as "other".
NAMED = ("Install autoloop", "Install bubblewrap", "Sandbox preflight", "Plan the due programs",
         "Propose and evaluate", "Publish", "Publish the tick", "Install the program's dependencies",
         "actions/checkout@v4", "actions/setup-python@v5", "actions/upload-artifact@v4", "actions/download-artifact@v4")


def one_tick(root: Path, wheel: Path, programs: int) -> Tick:
    """Returns one scheduled tick of `programs` due programs on a fresh site."""
    with FakeGitHub(token=TOKEN) as github:
        site = Site(root, github.url, wheel)
        site.init("--proposer", "agent")
        site.variables["AUTOLOOP_AGENT_COMMAND"] = agent_command("improve")
        files: dict[str, str] = {}
        for n in range(programs):
            files.update(program_files(site, "example" if n == 0 else f"program{n}", "ci-gate: false\n"))
        site.commit("autoloop init", files)
        with warnings.catch_warnings(record=True) as caught:
            tick = site.tick("schedule", {"schedule": "17 */6 * * *"})
        for warning in caught:
            print(f"note: {warning.message}")
    assert tick.returncode == 0, tick.explain()
    return tick


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=1, help="due programs in the tick (default 1)")
    parser.add_argument("--repeats", type=int, default=1, help="ticks to run; the median is printed (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="workflow-tick-") as tmp:
        wheel = build_wheel(Path(tmp) / "wheel")
        ticks = [one_tick(Path(tmp) / f"site{n}", wheel, args.programs) for n in range(args.repeats)]
    whole = statistics.median(t.seconds for t in ticks)
    print(f"one tick under act, {args.programs} due program(s), median of {len(ticks)}: {whole:.1f} s wall "
          f"(act's own start and job set-up included)")
    jobs: dict[str, list[float]] = defaultdict(list)
    steps: dict[tuple[str, str], list[float]] = defaultdict(list)
    for tick in ticks:
        per_step: dict[tuple[str, str], float] = defaultdict(float)
        for step in tick.steps:
            per_step[(step.job, step.name if step.name in NAMED else "other")] += step.seconds
        for job in {run.job for run in tick.jobs}:
            runs = tick.runs(job)
            jobs[job].append(statistics.mean(run.seconds for run in runs))
            for (step_job, name), total in per_step.items():
                if step_job == job:
                    steps[(job, name)].append(total / len(runs))
    print(f"{'job':<10} {'step':<38} {'seconds':>8}")
    for job in ("plan", "propose", "publish"):
        if job not in jobs:
            continue
        print(f"{job:<10} {'(whole job, mean of its matrix runs)':<38} {statistics.median(jobs[job]):>8.2f}")
        for (step_job, name), values in sorted(steps.items(), key=lambda kv: -statistics.median(kv[1])):
            if step_job == job:
                print(f"{'':<10} {name:<38} {statistics.median(values):>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
