"""Prints the cost of one tick of one program of the plain workflow: under act (measured), and on a hosted runner (modelled).

The tick is what tests/workflows runs: `autoloop init --proposer agent` in a fresh repository with a bare
origin, the loopback GitHub fake, the stand-in actions of tests/workflows/actions, and a scripted agent that
improves the sample program. Each site runs three ticks: a scheduled tick (the first iteration, which also fills
the install cache), a dispatched tick of the program (the second iteration: the busy tick measured) and a scheduled
tick with nothing due (the idle tick measured). The same ticks run with the old workflow (the template before
litellm became the `llm` extra: every job installed it, pip's cache through setup-python) and the current one.

Under act, installs come from a wheel of this checkout into venvs that see this machine's packages (nothing is
downloaded), checkout clones a local origin, the cache and artifacts are folders. With --pypi the hosted figure
is added: the act run's own steps as measured, plus what a hosted runner pays for the rest (benchmarks/
hosted_runner.py: pip installs measured from PyPI, runner constants modelled; both printed).

    python benchmarks/workflow_tick.py [--pypi] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import warnings
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Callable
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autoloop_py.cli import build_parser  # noqa: E402
from autoloop_py.commands import init  # noqa: E402
from autoloop_py.render import environment, render  # noqa: E402
from benchmarks.hosted_runner import Install, Runner, fresh_python, measure_installs  # noqa: E402
from tests.fakegithub import FakeGitHub  # noqa: E402
from tests.workflows.act_log import Step, Tick  # noqa: E402
from tests.workflows.harness import TOKEN, Site, agent_command, build_wheel, program_files  # noqa: E402

# The template as the act harness came (ac20294): litellm in the base install, so every job installed it (7abea52
# made it the `llm` extra), pip's cache through setup-python. Its parent b726bbf's propose `if:` act ignores.
OLD_COMMIT = "ac20294"
TEMPLATE = "autoloop_py/templates/workflows/autoloop.yml.j2"
SCHEDULE = {"schedule": "17 */6 * * *"}
JOBS = ("plan", "propose", "publish")
INSTALLS = ("Install autoloop", "Install autoloop with the llm extra")


def old_workflow(site: Site) -> str:
    """Returns the workflow the old template renders for the site's init options."""
    old = subprocess.run(["git", "show", f"{OLD_COMMIT}:{TEMPLATE}"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    args = build_parser().parse_args(["init", "--pip-spec", str(site.wheel), "--proposer", "agent"])

    def rendered(name: str, **context: object) -> str:
        return environment().from_string(old).render(**context) if name == "workflows/autoloop.yml.j2" else render(
            name, **context)

    with mock.patch.object(init, "render", rendered):
        return init.render_workflows(init.options_from(args))[init.ACTIONS_WORKFLOW]


def three_ticks(root: Path, wheel: Path, old: bool) -> tuple[Tick, Tick, Tick]:
    """Returns the first, the busy and the idle tick of a fresh site, with the old or current workflow."""
    with FakeGitHub(token=TOKEN) as github:
        site = Site(root, github.url, wheel)
        site.init("--proposer", "agent")
        site.variables["AUTOLOOP_AGENT_COMMAND"] = agent_command("improve")
        site.commit("autoloop init", program_files(site, "example", "ci-gate: false\n"))
        text = old_workflow(site) if old else None
        edit: Callable[[str], str] | None = (lambda _: text) if text is not None else None  # type: ignore[return-value]
        with warnings.catch_warnings(record=True):
            first = site.tick("schedule", SCHEDULE, edit=edit)
            busy = site.tick("workflow_dispatch", {"inputs": {"program": "example"}}, edit=edit)
            idle = site.tick("schedule", SCHEDULE, edit=edit)
    for tick, jobs in ((first, JOBS), (busy, JOBS), (idle, ("plan",))):
        assert tick.returncode == 0 and sorted({j.job for j in tick.jobs}) == sorted(jobs), tick.explain()
    return first, busy, idle


def hosted_step(step: Step, old: bool, installs: dict[str, Install], runner: Runner) -> tuple[float, str]:
    """Returns a step's modelled hosted seconds and how they were found ("measured" or the model's terms)."""
    base, llm = installs["base"], installs["llm"]
    ran = step.result != "skipped"
    if step.name == "actions/checkout@v4":
        return runner.checkout, "modelled"
    if step.name == "actions/setup-python@v5":
        if old:  # setup-python restores pip's cache of the litellm set (its unpacking left out: in old's favour)
            return runner.setup_python + runner.transfer(llm.wheels_mb), "modelled + pip cache transfer"
        return runner.setup_python, "modelled"
    if step.name == "actions/cache/restore@v4":
        return (runner.transfer(base.packed_mb) + base.unpack if ran else 0.0), "cache transfer + measured unpack"
    if step.name == "actions/cache/save@v4":
        return (runner.transfer(base.packed_mb) + base.pack if ran else 0.0), "cache transfer + measured pack"
    if step.name in INSTALLS:
        if not ran:
            return 0.0, "skipped"
        return (llm.warm_cpu, "measured warm pip (CPU s), litellm set") if old else (
            base.cold, "measured cold pip, base set")
    if step.name == "Install bubblewrap":
        return runner.apt_bubblewrap, "modelled"
    if step.name in ("actions/upload-artifact@v4", "actions/download-artifact@v4"):
        return runner.artifact, "modelled"
    return step.seconds, "measured"


def main_steps(tick: Tick, job: str) -> list[Step]:
    return [s for s in tick.steps if s.job == job and s.stage == "Main"]


def report(label: str, tick: Tick, old: bool, installs: dict[str, Install] | None, runner: Runner) -> float | None:
    """Prints a tick's jobs and steps, measured and (with installs) hosted; returns the hosted runner-seconds."""
    print(f"\n{label}: {tick.seconds:.1f} s wall under act (act's own start included)")
    print(f"  {'job / step':<44} {'act s':>7} {'hosted s':>9}  hosted from")
    total, billed = 0.0, 0
    for job in JOBS:
        if not tick.runs(job):
            continue
        act_job = statistics.mean(run.seconds for run in tick.runs(job))
        rows = [(s, *(hosted_step(s, old, installs, runner) if installs else (None, ""))) for s in main_steps(tick, job)]
        hosted = runner.job + sum(h for _, h, _ in rows) if installs else None
        print(f"  {job:<44} {act_job:>7.1f} {hosted if hosted is not None else float('nan'):>9.1f}"
              f"  + {runner.job:.0f} s job set-up/complete (modelled)")
        for step, seconds, how in rows:
            shown = "-" if seconds is None else f"{seconds:.1f}"
            name = step.name + (" (skipped)" if step.result == "skipped" else "")
            print(f"    {name[:42]:<42} {step.seconds:>7.1f} {shown:>9}  {how}")
        if hosted is not None:
            total += hosted
            billed += math.ceil(hosted / 60)
    if installs is None:
        return None
    print(f"  hosted runner-seconds of the tick: {total:.1f} (billed: {billed} min, each job rounded up)")
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pypi", action="store_true", help="measure the pip installs from PyPI for the hosted model")
    parser.add_argument("--installs", type=Path, help="a JSON file: --pypi writes its measurements there; "
                        "without --pypi, the hosted model uses the ones it holds")
    parser.add_argument("--repeats", type=int, default=1, help="sites per workflow; the median tick is shown")
    args = parser.parse_args()
    runner = Runner()
    installs = None
    with tempfile.TemporaryDirectory(prefix="workflow-tick-") as tmp:
        wheel = build_wheel(Path(tmp) / "wheel")
        if args.pypi:
            python = fresh_python()
            installs = measure_installs(python, wheel)
            print(f"measured from {python} into empty venvs, empty pip cache, PyPI (load {os.getloadavg()[0]:.1f}):")
            if args.installs:
                args.installs.write_text(json.dumps({k: asdict(v) for k, v in installs.items()}, indent=1))
        elif args.installs:
            installs = {k: Install(**v) for k, v in json.loads(args.installs.read_text()).items()}
            print(f"measured earlier ({args.installs}), empty venvs, empty pip cache, PyPI:")
        if installs:
            for kind, found in installs.items():
                print(f"  {kind:<5} " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                                                for k, v in asdict(found).items()))
            print("modelled runner constants: " + ", ".join(f"{k} {v}" for k, v in asdict(runner).items()))
        results: dict[str, list[tuple[Tick, Tick, Tick]]] = defaultdict(list)
        for n in range(args.repeats):  # interleaved: old, new, old, new
            for name in ("old", "new"):
                results[name].append(three_ticks(Path(tmp) / f"{name}{n}", wheel, name == "old"))
    hosted: dict[tuple[str, str], float | None] = {}
    labels = {"first": "the first tick: an empty install cache", "busy": "1 program due", "idle": "nothing due"}
    for name in ("old", "new"):
        for index, kind in enumerate(("first", "busy", "idle")):
            if (name, kind) == ("old", "first"):
                continue  # priced as its busy tick (a warm pip cache): the old workflow's first tick is not shown
            ticks = sorted(results[name], key=lambda three: three[index].seconds)
            tick = ticks[len(ticks) // 2][index]
            hosted[(name, kind)] = report(f"{name} workflow, {kind} tick ({labels[kind]})", tick, name == "old",
                                          installs, runner)
    if installs is not None:
        print()
        for kind in ("busy", "idle"):
            old, new = hosted[("old", kind)], hosted[("new", kind)]
            assert old is not None and new is not None
            print(f"{kind} tick on a hosted runner: old {old:.1f} s, new {new:.1f} s, new/old {new / old:.2f}")
        # The old tick's three installs are its one modelled-from-local-CPU term: where the ratio crosses 1/2.
        old_busy, new_busy = hosted[("old", "busy")] or 0.0, hosted[("new", "busy")] or 0.0
        fixed = old_busy - 3 * installs["llm"].warm_cpu
        print(f"the busy ratio stays <= 0.5 while one warm pip install of the litellm set costs a runner at least "
              f"{(2 * new_busy - fixed) / 3:.1f} s (measured here: {installs['llm'].warm_cpu:.1f} CPU s, "
              f"{installs['llm'].warm:.1f} s wall)")
        llm = installs["llm"]
        extra = runner.transfer(llm.packed_mb) + llm.unpack - runner.transfer(installs["base"].packed_mb) - \
            installs["base"].unpack
        new_llm = (hosted[("new", "busy")] or 0.0) + extra
        print(f"busy tick with the llm proposer (propose restores the llm set instead, +{extra:.1f} s): "
              f"new {new_llm:.1f} s, new/old {new_llm / (hosted[('old', 'busy')] or 1.0):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
