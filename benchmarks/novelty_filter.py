"""Measures the novelty filter: evaluations it saves and the best fitness reached with and without it (issue 8 §6).

Two measurements per program and seed, all offline with the `tune` proposer (no network, no API key):

1. Replay. A run of `--budget` iterations with `novelty_filter: false` is recorded; its trace is exported
   from the memory branch and its candidates are replayed in iteration order through `novelty.check`, with
   the lineage taken from the recorded parents and every earlier evaluated, scored candidate as the
   results a duplicate may reuse (the live filter bounds this to the lineage, the newest rows and exact
   matches; the replay does not). A skipped candidate's own score is not counted: a duplicate reuses an
   earlier result, a recycled one has none. It prints the evaluations the filter would have saved and the
   best fitness reached with the skips next to the recorded run's. The replay keeps the recorded proposals:
   a run that had skipped an accepted candidate would have gone on differently, so such skips are counted
   separately ("accepted skipped").
2. Live. The same program and seed run again with the filter on (the default), and the evaluations it
   actually ran, its final best and its wall time are printed next to the filter-off run.

An evaluation is an iteration that ran the evaluator on a candidate, plus one for the baseline.
Progress goes to stderr.

    python3 benchmarks/novelty_filter.py [--seeds 1 2 3] [--budget 30] [--programs function_minimization circle_packing]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autoloop_py.loop.iteration import novelty
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.lineage_store import LINEAGE_DEPTH
from autoloop_py.loop.iteration.novelty import Ancestor, EarlierResult, NoveltyConfig
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.state import file as statefile
from autoloop_py.state import trace
from autoloop_py.state.machine import is_improvement
from autoloop_py.state.memory import MemoryStore

REPO = Path(__file__).resolve().parents[1]
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Run:
    """One real run.

    Attributes:
      evaluations: evaluator runs (baseline included).
      best: the final best metric.
      seconds: wall time of the iterations.
      skipped: iterations the filter did not evaluate, per verdict.
      trace_dir: the exported trace (None when not exported).
    """

    evaluations: int
    best: float | None
    seconds: float
    skipped: dict[str, int]
    trace_dir: Path | None


@dataclass(frozen=True)
class Replay:
    """A recorded run replayed through the filter.

    Attributes:
      candidates: candidates replayed (the seed excluded).
      duplicates: candidates the filter calls duplicates.
      recycled: candidates the filter calls recycled.
      accepted_skipped: skipped candidates the recorded run accepted.
      best_without: the recorded run's best.
      best_with: the best over the candidates the filter would have evaluated (and the seed).
    """

    candidates: int
    duplicates: int
    recycled: int
    accepted_skipped: int
    best_without: float | None
    best_with: float | None


def build_repo(tmp: Path, name: str, seed: int, novelty_filter: bool) -> Path:
    """Returns a scratch repository holding the example program with program.md's seed (and filter switch) set."""
    root = tmp / f"{name}-{seed}-{'on' if novelty_filter else 'off'}"
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    for key, value in (("user.name", "bench"), ("user.email", "bench@example.invalid")):
        subprocess.run(["git", "config", key, value], cwd=root, check=True)
    base = root / ".autoloop/programs" / name
    shutil.copytree(REPO / ".autoloop/programs" / name, base, ignore=shutil.ignore_patterns("__pycache__"))
    text = (base / "program.md").read_text(encoding="utf-8")
    switch = "" if novelty_filter else "novelty_filter: false\n"
    (base / "program.md").write_text(re.sub(r"(?m)^seed:.*\n", f"seed: {seed}\n{switch}", text, count=1))
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", name], cwd=root, check=True)
    return root


def run_once(tmp: Path, name: str, seed: int, budget: int, novelty_filter: bool) -> Run:
    """Runs budget tune iterations; returns evaluations, best, time, skips and the exported trace."""
    root = build_repo(tmp, name, seed, novelty_filter)
    program = load_program(root, Path(".autoloop/programs") / name / "program.md")
    evaluations, skipped = 0, {novelty.DUPLICATE: 0, novelty.RECYCLED: 0}
    start = time.perf_counter()
    for i in range(budget):
        outcome = run_iteration(root, program, RunOptions(proposer="tune"), START + timedelta(minutes=i))
        evaluations += ("evaluate" in outcome.timings) + ("evaluate baseline" in outcome.timings)
        reason = outcome.reason or ""
        if reason.startswith("not evaluated: identical"):
            skipped[novelty.DUPLICATE] += 1
        elif reason.startswith("not evaluated:"):
            skipped[novelty.RECYCLED] += 1
    seconds = time.perf_counter() - start
    memory = MemoryStore(root)
    best = statefile.parse_state(memory.read(f"{name}.md") or "", f"{name}.md").machine.best_metric
    out = tmp / f"trace-{name}-{seed}-{'on' if novelty_filter else 'off'}"
    trace.export(memory.read, memory.list(trace.trace_dir(name) + "/"), name, out)
    return Run(evaluations, best, seconds, skipped, out)


def replay(directory: Path, threshold: float, min_delta: float) -> Replay:
    """Replays a recorded trace through novelty.check, in iteration order."""
    run = trace.load_trace(directory)
    by_id = {row.id: row for row in run.rows}
    evaluated: dict[str, EarlierResult] = {}
    best_with = best_without = None
    counts = {novelty.DUPLICATE: 0, novelty.RECYCLED: 0, "accepted": 0, "candidates": 0}
    for row in run.rows:
        source, score = run.source(row), run.score(row)
        if source is None:
            continue
        best_without = _better(best_without, score, run.direction, min_delta)
        if row.parent_id is not None:
            counts["candidates"] += 1
            verdict = novelty.check(source, _lineage(run, by_id, row.parent_id), evaluated, NoveltyConfig(threshold))
            reusable = verdict.metric is None or not is_improvement(verdict.metric, best_with, run.direction, min_delta)
            if verdict.skipped and reusable:
                counts[verdict.kind] += 1
                counts["accepted"] += row.status == "accepted"
                continue
        best_with = _better(best_with, score, run.direction, min_delta)
        if score is not None:
            evaluated.setdefault(trace.sha256_text(source), EarlierResult(
                row.id, row.iteration_found, score, dict(row.metrics), row.status, novelty.fingerprint(source)))
    return Replay(counts["candidates"], counts[novelty.DUPLICATE], counts[novelty.RECYCLED], counts["accepted"],
                  best_without, best_with)


def _lineage(run: trace.Trace, by_id: dict[str, trace.TraceRow], parent: str | None) -> tuple[Ancestor, ...]:
    """Returns the recorded lineage of a parent, nearest first, as the live filter bounds it."""
    chain: list[Ancestor] = []
    while parent is not None and parent in by_id and len(chain) < LINEAGE_DEPTH:
        row = by_id[parent]
        source = run.source(row)
        if source is None or any(a.id == row.id for a in chain):
            break
        chain.append(Ancestor(row.id, row.iteration_found, source, row.status, run.score(row), row.changes))
        parent = row.parent_id
    return tuple(chain)


def _better(best: float | None, score: float | None, direction: str, min_delta: float) -> float | None:
    if score is not None and is_improvement(score, best, direction, min_delta):
        return score
    return best


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def main() -> int:
    """Runs the replay and the live comparison for every program and seed; prints the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--budget", type=int, default=30, help="iterations per run")
    parser.add_argument("--programs", nargs="+", default=["function_minimization", "circle_packing"])
    parser.add_argument("--threshold", type=float, default=novelty.DEFAULT_THRESHOLD)
    args = parser.parse_args()
    lines = [
        "program                 seed | replay: cand dup rec accepted-skipped | best off  best w/ filter"
        " | live: evals off  evals on  best off  best on  s/it off  s/it on",
    ]
    with tempfile.TemporaryDirectory(prefix="autoloop-novelty-") as tmp:
        for name in args.programs:
            min_delta = load_program(REPO, Path(".autoloop/programs") / name / "program.md").config.min_delta
            for seed in args.seeds:
                print(f"{name} seed {seed}: filter off …", file=sys.stderr)
                off = run_once(Path(tmp), name, seed, args.budget, novelty_filter=False)
                print(f"{name} seed {seed}: filter on …", file=sys.stderr)
                on = run_once(Path(tmp), name, seed, args.budget, novelty_filter=True)
                assert off.trace_dir is not None
                r = replay(off.trace_dir, args.threshold, min_delta)
                lines.append(
                    f"{name:<23} {seed:>4} | {r.candidates:>12} {r.duplicates:>3} {r.recycled:>3} {r.accepted_skipped:>16}"
                    f" | {_fmt(r.best_without):>8}  {_fmt(r.best_with):>13}"
                    f" | {off.evaluations:>15} {on.evaluations:>9}  {_fmt(off.best):>8} {_fmt(on.best):>8}"
                    f"  {off.seconds / args.budget:>8.2f} {on.seconds / args.budget:>8.2f}"
                    f"   (live skips: {on.skipped[novelty.DUPLICATE]} duplicate, {on.skipped[novelty.RECYCLED]} recycled)"
                )
    print(f"novelty filter: threshold {args.threshold:g}, min_added {novelty.DEFAULT_MIN_ADDED}, "
          f"budget {args.budget} tune iterations per run")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
