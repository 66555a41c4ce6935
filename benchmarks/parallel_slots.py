"""Measures ticks of k parallel slots: wall time per tick, and the best metric against evaluations.

For k = 1, 2, 4, 8 it runs the example programs (default flow, the offline `tune` proposer, no network)
in a scratch repository with a bare origin, by `autoloop run --parallel k` in this process, until the
same number of evaluations is spent (k = 1 is the plain iteration). It prints, per program and k, the
median seconds per tick, the seconds per evaluation, and the best metric after each quarter of the
budget. The slots of a tick are processes: on a machine with c cores, k > c mostly measures contention.

    python benchmarks/parallel_slots.py [--budget 16] [--slots 1 2 4 8] [--programs function_minimization]

With `--latency-min A --latency-max B` it measures the barrier instead: the model is a loopback
OpenAI-compatible server (peer_overhead.py's, proposing function_minimization edits) that answers each
request after a seeded uniform(A, B) seconds. For each k it runs the same budget of evaluations twice,
interleaved, in a fresh scratch repository each: `autoloop run --parallel k --barrier` (ticks of k slots,
each waiting for its slowest before one publish) and `autoloop run --parallel k` (k in flight, each slot
recorded as it ends and the next started at once). It prints evaluations per minute over the whole run
and from the first model request on (without the start-up), with the machine's load average.

    python benchmarks/parallel_slots.py --latency-min 1 --latency-max 5 [--budget 16] [--slots 2 4] [--rounds 1]

With `--speed-up` it measures what slots buy where the evaluation, not the machine, is the bottleneck: the same
loopback model (uniform(1, 5) s unless --latency-min/max say otherwise) and an evaluation that sleeps 2 s
(`--evaluation-sleep`) before scoring, so the figure for a many-core runner shows on 2 cores. For k = 1, 2, 4 it
runs `autoloop run --parallel k` (no barrier; k = 1 is the plain loop) for the same budget and prints evaluations
per minute from the first model request on (the start-up, litellm's import among it, is the same for every k),
ending with `speed-up k=2: A.AAx k=4: B.BBx` (evaluations per minute against k = 1).

    python benchmarks/parallel_slots.py --speed-up [--budget 12] [--evaluation-sleep 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoloop_py.cli import main
from autoloop_py.state import file as statefile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_overhead import Server, ours_setup, serve  # noqa: E402 - the loopback model of the peer benchmark

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
                             "--parallel", str(slots), "--barrier"])
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


class RandomLatency(Server):
    """The loopback model, each reply waiting a seeded uniform(low, high) seconds."""

    def __init__(self, low: float, high: float, seed: int) -> None:
        super().__init__()
        self.low, self.high, self.draws = low, high, random.Random(seed)

    def delay(self) -> float:
        return self.draws.uniform(self.low, self.high)  # called under the server's lock


def latency_run(slots: int, barrier: bool, budget: int, low: float, high: float, seed: int,
                sleep: float = 0.0) -> dict[str, float]:
    """Runs `budget` evaluations of the bench program with k slots, with or without the barrier; returns figures.

    sleep: seconds the evaluation sleeps before it scores (0: none).
    """
    server = RandomLatency(low, high, seed)
    http = serve(server)
    url = f"http://127.0.0.1:{http.server_address[1]}/v1"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AUTOLOOP_"))}
    env.update(OPENAI_API_KEY="sk-bench", OPENAI_API_BASE=url, OPENAI_BASE_URL=url, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=str(REPO))
    # The barrier counts ticks of k slots, the runner without one counts iterations: the same evaluations.
    count = budget // slots if barrier else budget
    try:
        with tempfile.TemporaryDirectory(prefix="autoloop-bench-") as folder:
            repo = ours_setup(Path(folder))
            if sleep > 0:
                evaluate = repo / ".autoloop/programs/bench/code/evaluate.py"
                head, future, rest = evaluate.read_text().partition("from __future__ import annotations\n")
                evaluate.write_text(f"{head}{future}import time\ntime.sleep({sleep!r})\n{rest}")
                _git(repo, "commit", "-qam", f"the evaluation sleeps {sleep} s")
                _git(repo, "push", "-q", "origin", "main")
            command = [sys.executable, "-m", "autoloop_py", "run", "--repo", str(repo), "--program", "bench",
                       "--iterations", str(count), "--proposer", "llm", "--model", "openai/mock",
                       *(["--parallel", str(slots)] if slots > 1 else []), *(["--barrier"] if barrier else [])]
            started = time.time()
            done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=3600)
            ended = time.time()
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
            _git(repo, "fetch", "-q", "origin")
            evaluations, best = best_of(repo, "bench")
            if evaluations < budget:
                raise SystemExit(f"only {evaluations} of {budget} iterations ran:\n{done.stdout[-2000:]}")
    finally:
        http.shutdown()
    first = min(server.arrivals) if server.arrivals else started
    return {"evaluations": evaluations, "best": best if best is not None else float("nan"),
            "per_minute": evaluations / (ended - started) * 60, "steady": evaluations / (ended - first) * 60,
            "wall": ended - started}


def main_latency(args: argparse.Namespace) -> int:
    """Prints evaluations per minute with and without the barrier, for each k, runs interleaved."""
    print(f"cores: {os.cpu_count()}; budget: {args.budget} evaluations; model replies after uniform("
          f"{args.latency_min:g}, {args.latency_max:g}) s; {args.rounds} round(s); load before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    results: dict[tuple[int, bool], list[dict[str, float]]] = {}
    for round_number in range(args.rounds):
        for slots in args.slots:
            order = (True, False) if round_number % 2 == 0 else (False, True)
            for barrier in order:
                print(f"running k={slots} {'barrier' if barrier else 'no barrier'} (round {round_number + 1})",
                      file=sys.stderr)
                results.setdefault((slots, barrier), []).append(
                    latency_run(slots, barrier, args.budget, args.latency_min, args.latency_max, round_number))
    print(f"{'k':>2} {'runner':>10} {'evals':>5} {'wall s':>7} {'evals/min':>9} {'from 1st request':>16} {'best':>9}")
    for slots in args.slots:
        for barrier in (True, False):
            runs = results[(slots, barrier)]
            med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            print(f"{slots:>2} {'barrier' if barrier else 'no barrier':>10} {med['evaluations']:>5.0f} "
                  f"{med['wall']:>7.1f} {med['per_minute']:>9.1f} {med['steady']:>16.1f} {med['best']:>9.4g}")
        ratio = statistics.median(results[(slots, False)][i]["per_minute"] / results[(slots, True)][i]["per_minute"]
                                  for i in range(args.rounds))
        print(f"{slots:>2} no barrier / barrier, evaluations per minute: {ratio:.2f}x (median over rounds)")
    print("load after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


def main_speed_up(args: argparse.Namespace) -> int:
    """Prints evaluations per minute at each k with a slow model and a sleep-bound evaluation, then the speed-ups."""
    low, high = args.latency_min if args.latency_min is not None else 1.0, args.latency_max or 5.0
    print(f"cores: {os.cpu_count()}; budget: {args.budget} evaluations; model replies after uniform({low:g}, "
          f"{high:g}) s; the evaluation sleeps {args.evaluation_sleep:g} s; load before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    rates: dict[int, float] = {}
    print(f"{'k':>2} {'evals':>5} {'wall s':>7} {'evals/min':>9} {'from 1st request':>16}")
    for slots in args.slots:
        print(f"running k={slots}", file=sys.stderr)
        found = latency_run(slots, False, args.budget, low, high, 0, args.evaluation_sleep)
        rates[slots] = found["steady"]
        print(f"{slots:>2} {found['evaluations']:>5.0f} {found['wall']:>7.1f} {found['per_minute']:>9.1f} "
              f"{found['steady']:>16.1f}", flush=True)
    print("load after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    base = rates.get(1)
    if base:
        print(" ".join(["speed-up", *(f"k={k}: {rates[k] / base:.2f}x" for k in args.slots if k != 1)]))
    return 0


def main_bench(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=16, help="evaluations per run (default 16)")
    parser.add_argument("--slots", type=int, nargs="+", default=None, help="k values (default 1 2 4 8; 2 4 with "
                        "--latency-min)")
    parser.add_argument("--programs", nargs="+", default=list(PROGRAMS))
    parser.add_argument("--latency-min", type=float, default=None, metavar="SECONDS",
                        help="with --latency-max: barrier against no barrier, a model answering in uniform(min, max) s")
    parser.add_argument("--latency-max", type=float, default=None, metavar="SECONDS")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of the latency mode (default 1)")
    parser.add_argument("--speed-up", action="store_true",
                        help="evaluations per minute at k = 1, 2, 4 with a 1-5 s model and a sleep-bound evaluation")
    parser.add_argument("--evaluation-sleep", type=float, default=2.0, metavar="SECONDS",
                        help="with --speed-up: seconds the evaluation sleeps (default 2)")
    args = parser.parse_args(argv)
    if args.speed_up:
        args.slots = args.slots or [1, 2, 4]
        args.budget = args.budget if args.budget != 16 else 12
        return main_speed_up(args)
    if (args.latency_min is None) != (args.latency_max is None):
        parser.error("--latency-min and --latency-max go together")
    if args.latency_min is not None:
        if not 0 <= args.latency_min <= args.latency_max:
            parser.error("need 0 <= --latency-min <= --latency-max")
        args.slots = args.slots or [2, 4]
        return main_latency(args)
    args.slots = args.slots or [1, 2, 4, 8]
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
