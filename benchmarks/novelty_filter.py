"""Measures the novelty filter: evaluations it saves and the best fitness reached with and without it (issue 8 §6),
and with `novelty: embedding` (issue 41 §3, local code vectors).

Two measurements per program and seed, all offline with the `tune` proposer (no network, no API key):

1. Replay. A run of `--budget` iterations with `novelty_filter: false` is recorded; its trace is exported
   from the memory branch and its candidates are replayed in iteration order through `novelty.check`, with
   the lineage taken from the recorded parents and every earlier evaluated, scored candidate as the
   results a duplicate may reuse (the live filter bounds this to the lineage, the newest rows and exact
   matches; the replay does not). A skipped candidate's own score is not counted: a duplicate reuses an
   earlier result, a recycled one has none. It prints the evaluations the filter would have saved and the
   best fitness reached with the skips next to the recorded run's. The replay keeps the recorded proposals:
   a run that had skipped an accepted candidate would have gone on differently, so such skips are counted
   separately ("accepted skipped"). The replay also applies `novelty: embedding`'s check to the candidates the
   exact filter keeps: one whose local code vector lies above `--similarity` to an evaluated candidate of its
   lineage or of the 8 newest evaluated ones (as the live filter compares) is counted "similar".
2. Live. The same program and seed run again with the filter on (the default) and with `novelty: embedding`
   (its `novelty-threshold` set to `--similarity`), and the evaluations each actually ran, its final best and
   its wall time are printed next to the filter-off run's; under `novelty: embedding` also the local vectors made
   and the vectors compared (the difference: neighbours' vectors read from their trace rows, not made again).

The `tune` proposer only changes numbers, which no similarity filter should skip. `--reword 0.3` makes 30 %
of the proposals re-word the current Target instead (a seeded draw: the same iterations in every run):
the evolved block's own variables renamed, the same program in other words, as a model sometimes
answers. Those are the candidates `novelty: embedding` is for; the exact filter evaluates them.

An evaluation is an iteration that ran the evaluator on a candidate, plus one for the baseline.
Progress goes to stderr.

    python3 benchmarks/novelty_filter.py [--seeds 1 2 3] [--budget 30] [--programs function_minimization circle_packing]
        [--similarity 0.999] [--reword 0.3]
"""

from __future__ import annotations

import argparse
import ast
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from unittest import mock
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autoloop_py.analysis import code_vector
from autoloop_py.loop.iteration import novelty
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.lineage_store import LINEAGE_DEPTH, RECENT_ROWS
from autoloop_py.loop.iteration.novelty import Ancestor, EarlierResult, NoveltyConfig, NoveltyVerdict
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.program.regions import evolve_regions, evolved_code, place_code
from autoloop_py.proposers import get_proposer
from autoloop_py.proposers.base import Proposal, ProposalRequest
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
      reworded: proposals that only renamed variables.
      embedded: local code vectors made (under `novelty: embedding`; each candidate's is kept in its trace row).
      compared: vectors the similarity check compared (the candidate's and its neighbours': what would be made
        without the kept ones).
    """

    evaluations: int
    best: float | None
    seconds: float
    skipped: dict[str, int]
    trace_dir: Path | None
    reworded: int = 0
    embedded: int = 0
    compared: int = 0


@dataclass(frozen=True)
class Replay:
    """A recorded run replayed through the filter.

    Attributes:
      candidates: candidates replayed (the seed excluded).
      duplicates: candidates the filter calls duplicates.
      recycled: candidates the filter calls recycled.
      similar: candidates left that `novelty: embedding` skips as too similar.
      accepted_skipped: skipped candidates the recorded run accepted.
      best_without: the recorded run's best.
      best_with: the best over the candidates the filter would have evaluated (and the seed).
    """

    candidates: int
    duplicates: int
    recycled: int
    similar: int
    accepted_skipped: int
    best_without: float | None
    best_with: float | None


# The live runs: the filter off, on (`novelty: exact`, the default) and `novelty: embedding`.
MODES = ("off", "on", "embedding")


class Rewording:
    """The tune proposer, except that a share of the proposals renames the evolved block's own variables."""

    name = "tune"

    def __init__(self, share: float) -> None:
        self.share, self.tune, self.reworded = share, get_proposer("tune"), 0

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        draw = random.Random(f"reword-{request.iteration}-{request.program.config.seed}").random()
        if draw < self.share and len(request.files) == 1:
            (path, source), = request.files.items()
            renamed = reworded(source, request.iteration)
            if renamed != source:
                self.reworded += 1
                return Proposal({path: renamed}, "re-word: rename the evolved block's variables")
        return self.tune.propose(request, rng)


def reworded(source: str, salt: int) -> str:
    """Returns the source with the names the evolved block binds, and nothing outside it uses, renamed."""
    block = evolved_code(source)
    if not evolve_regions(source):
        return source
    outside = source.replace(block, "")
    try:
        names = {n.id for n in ast.walk(ast.parse(block)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    except SyntaxError:
        return source
    for name in sorted(n for n in names if not re.search(rf"\b{n}\b", outside)):
        block = re.sub(rf"\b{name}\b", f"{name.rstrip('_0123456789')}_{salt}", block)
    return place_code(source, block)


def build_repo(tmp: Path, name: str, seed: int, mode: str, similarity: float) -> Path:
    """Returns a scratch repository holding the example program with program.md's seed (and novelty settings) set."""
    root = tmp / f"{name}-{seed}-{mode}"
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    for key, value in (("user.name", "bench"), ("user.email", "bench@example.invalid")):
        subprocess.run(["git", "config", key, value], cwd=root, check=True)
    base = root / ".autoloop/programs" / name
    shutil.copytree(REPO / ".autoloop/programs" / name, base, ignore=shutil.ignore_patterns("__pycache__"))
    text = (base / "program.md").read_text(encoding="utf-8")
    settings = {"off": "novelty_filter: false\n", "on": "",
                "embedding": f"novelty: embedding\nnovelty-threshold: {similarity}\n"}[mode]
    (base / "program.md").write_text(re.sub(r"(?m)^seed:.*\n", f"seed: {seed}\n{settings}", text, count=1))
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", name], cwd=root, check=True)
    return root


def run_once(tmp: Path, name: str, seed: int, budget: int, mode: str, similarity: float, reword: float) -> Run:
    """Runs budget tune iterations; returns evaluations, best, time, skips and the exported trace."""
    root = build_repo(tmp, name, seed, mode, similarity)
    program = load_program(root, Path(".autoloop/programs") / name / "program.md")
    proposer = Rewording(reword)
    options = RunOptions(proposer="tune", proposer_factory=lambda name, **kwargs: proposer)
    evaluations, skipped = 0, {novelty.DUPLICATE: 0, novelty.RECYCLED: 0, novelty.SIMILAR: 0}
    start = time.perf_counter()
    with mock.patch.object(code_vector, "vector", wraps=code_vector.vector) as made, \
            mock.patch.object(code_vector, "nearest", wraps=code_vector.nearest) as compared:
        for i in range(budget):
            outcome = run_iteration(root, program, options, START + timedelta(minutes=i))
            evaluations += ("evaluate" in outcome.timings) + ("evaluate baseline" in outcome.timings)
            reason = outcome.reason or ""
            if reason.startswith("not evaluated: identical"):
                skipped[novelty.DUPLICATE] += 1
            elif reason.startswith("not evaluated: similarity"):
                skipped[novelty.SIMILAR] += 1
            elif reason.startswith("not evaluated:"):
                skipped[novelty.RECYCLED] += 1
    seconds = time.perf_counter() - start
    vectors = made.call_count, sum(len(call.args[1]) + 1 for call in compared.call_args_list)
    memory = MemoryStore(root)
    best = statefile.parse_state(memory.read(f"{name}.md") or "", f"{name}.md").machine.best_metric
    out = tmp / f"trace-{name}-{seed}-{mode}"
    trace.export(memory.read, memory.list(trace.trace_dir(name) + "/"), name, out)
    return Run(evaluations, best, seconds, skipped, out, proposer.reworded, *vectors)


def replay(
    directory: Path, threshold: float, min_delta: float, similarity: float = novelty.DEFAULT_SIMILARITY
) -> Replay:
    """Replays a recorded trace through novelty.check, then the similarity check, in iteration order."""
    run = trace.load_trace(directory)
    by_id = {row.id: row for row in run.rows}
    evaluated: dict[str, EarlierResult] = {}
    vectors: dict[str, code_vector.Vector] = {}  # of the evaluated, scored candidates, oldest first
    best_with = best_without = None
    counts = {novelty.DUPLICATE: 0, novelty.RECYCLED: 0, novelty.SIMILAR: 0, "accepted": 0, "candidates": 0}
    for row in run.rows:
        source, score = run.source(row), run.score(row)
        if source is None:
            continue
        best_without = _better(best_without, score, run.direction, min_delta)
        if row.parent_id is not None:
            counts["candidates"] += 1
            lineage = _lineage(run, by_id, row.parent_id)
            verdict = novelty.check(source, lineage, evaluated, NoveltyConfig(threshold))
            if not verdict.skipped:
                verdict = _similar(source, vectors, [a.id for a in lineage], similarity)
            reusable = verdict.metric is None or not is_improvement(verdict.metric, best_with, run.direction, min_delta)
            if verdict.skipped and reusable:
                counts[verdict.kind] += 1
                counts["accepted"] += row.status == "accepted"
                continue
        best_with = _better(best_with, score, run.direction, min_delta)
        if score is not None:
            vectors.setdefault(row.id, code_vector.vector(evolved_code(source)))
            evaluated.setdefault(trace.sha256_text(source), EarlierResult(
                row.id, row.iteration_found, score, dict(row.metrics), row.status, novelty.fingerprint(source)))
    return Replay(counts["candidates"], counts[novelty.DUPLICATE], counts[novelty.RECYCLED], counts[novelty.SIMILAR],
                  counts["accepted"], best_without, best_with)


def _similar(
    source: str, vectors: dict[str, code_vector.Vector], lineage: list[str], threshold: float
) -> NoveltyVerdict:
    """Returns similar when the candidate's code vector lies above threshold to one of the neighbours the live
    filter compares (its lineage and the newest evaluated candidates), else novel."""
    names = [*lineage, *list(vectors)[-RECENT_ROWS:]]
    near = {name: vectors[name] for name in names if name in vectors}
    found = code_vector.nearest(code_vector.vector(evolved_code(source)), near)
    if found is not None and found[1] > threshold:
        return NoveltyVerdict(novelty.SIMILAR, of=found[0], similarity=found[1], threshold=threshold)
    return NoveltyVerdict(novelty.NOVEL)


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
    parser.add_argument("--similarity", type=float, default=novelty.DEFAULT_SIMILARITY,
                        help="novelty-threshold under novelty: embedding (the replay's and the live run's)")
    parser.add_argument("--reword", type=float, default=0.0, help="the share of proposals that only rename variables")
    args = parser.parse_args()
    lines = [
        "program                 seed | replay: cand dup rec sim accepted-skipped | best off  best w/ filter"
        " | live: evals off  on  emb | best off  on  emb | s/it off  on  emb",
    ]
    with tempfile.TemporaryDirectory(prefix="autoloop-novelty-") as tmp:
        for name in args.programs:
            min_delta = load_program(REPO, Path(".autoloop/programs") / name / "program.md").config.min_delta
            for seed in args.seeds:
                runs = {}
                for mode in MODES:
                    print(f"{name} seed {seed}: {mode} …", file=sys.stderr)
                    runs[mode] = run_once(Path(tmp), name, seed, args.budget, mode, args.similarity, args.reword)
                off, on, emb = runs["off"], runs["on"], runs["embedding"]
                assert off.trace_dir is not None
                r = replay(off.trace_dir, args.threshold, min_delta, args.similarity)
                lines.append(
                    f"{name:<23} {seed:>4} | {r.candidates:>12} {r.duplicates:>3} {r.recycled:>3} {r.similar:>3}"
                    f" {r.accepted_skipped:>16} | {_fmt(r.best_without):>8}  {_fmt(r.best_with):>13}"
                    f" | {off.evaluations:>15} {on.evaluations:>3} {emb.evaluations:>4}"
                    f" | {_fmt(off.best):>8} {_fmt(on.best)} {_fmt(emb.best)}"
                    f" | {off.seconds / args.budget:>8.2f} {on.seconds / args.budget:.2f}"
                    f" {emb.seconds / args.budget:.2f}"
                    f"   (live skips on: {on.skipped[novelty.DUPLICATE]} duplicate, {on.skipped[novelty.RECYCLED]}"
                    f" recycled; embedding: {emb.skipped[novelty.SIMILAR]} similar, {emb.embedded} vectors made for"
                    f" {emb.compared} compared;"
                    f" re-worded proposals: {off.reworded})"
                )
    print(f"novelty filter: threshold {args.threshold:g}, min_added {novelty.DEFAULT_MIN_ADDED}, similarity "
          f"{args.similarity:g} (local code vectors), budget {args.budget} tune iterations per run, "
          f"{args.reword:.0%} of them re-worded")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
