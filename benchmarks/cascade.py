"""Prints evaluation seconds per iteration on circle_packing with and without its stages, and the share stopped early.

The example evaluates in two stages (`validity`, then `score`; `.autoloop/programs/circle_packing/program.md`).
N candidates are made from its packing: a share `--invalid` grow every radius past what fits (stage 1
rejects them), the others shrink the radii by a random factor (valid, both stages run). Each candidate is
evaluated through `evaluate()` twice: with the program's stages, and with `evaluation-stages` removed (one
command, as before). `--slow S` makes the score stage S seconds slower in the benchmark's copy, as an
expensive measure (a test suite, a training run) would be.

    python benchmarks/cascade.py [--candidates 20] [--invalid 0.5] [--slow 0] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import tempfile
from pathlib import Path

from autoloop_py.loop.evaluation.evaluate import EvaluationResult, evaluate
from autoloop_py.program.model import load_program

REPO = Path(__file__).resolve().parents[1]
FOLDER = Path(".autoloop/programs/circle_packing")


def _copy(root: Path, stages: bool, slow: float) -> None:
    shutil.copytree(REPO / FOLDER, root / FOLDER, ignore=shutil.ignore_patterns("__pycache__"))
    program = root / FOLDER / "program.md"
    if not stages:
        text = program.read_text(encoding="utf-8")
        program.write_text(re.sub(r"evaluation-stages:\n(?:  .*\n)+", "", text), encoding="utf-8")
    if slow:
        evaluator = root / FOLDER / "code/evaluate.py"
        text = evaluator.read_text(encoding="utf-8")
        marker = "    centers, radii = valid_packing()\n"
        evaluator.write_text(text.replace(marker, f"    __import__('time').sleep({slow})\n" + marker), encoding="utf-8")


def _candidate(source: str, invalid: bool, rng: random.Random) -> str:
    change = "[r + 0.05 for r in radii]" if invalid else f"[r * {rng.uniform(0.9, 0.999):.4f} for r in radii]"
    return source.replace("    return radii\n", f"    return {change}\n")


def _evaluate(root: Path, source: str) -> EvaluationResult:
    (root / FOLDER / "code/packing.py").write_text(source, encoding="utf-8")
    return evaluate(load_program(root, FOLDER / "program.md"), root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--invalid", type=float, default=0.5, help="share of invalid packings (default 0.5)")
    parser.add_argument("--slow", type=float, default=0.0, help="seconds added to the score stage (default 0)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    seed_source = (REPO / FOLDER / "code/packing.py").read_text(encoding="utf-8")
    candidates = [_candidate(seed_source, rng.random() < args.invalid, rng) for _ in range(args.candidates)]
    timings: dict[bool, list[float]] = {True: [], False: []}
    stopped = 0
    with tempfile.TemporaryDirectory(prefix="autoloop-bench-cascade-") as tmp:
        roots = {stages: Path(tmp) / ("staged" if stages else "single") for stages in (True, False)}
        for stages, root in roots.items():
            _copy(root, stages, args.slow)
        for index, source in enumerate(candidates):  # interleaved, each order half the time: load hits both alike
            for stages in ((True, False) if index % 2 == 0 else (False, True)):
                result = _evaluate(roots[stages], source)
                timings[stages].append(result.duration)
                stopped += bool(stages and result.stopped)
    with_stages, without = statistics.mean(timings[True]), statistics.mean(timings[False])
    print(f"circle_packing, {args.candidates} candidates ({args.invalid:.0%} invalid asked), score stage +{args.slow:g} s")
    print(f"  evaluation seconds per iteration, with stages:    {with_stages:.3f} (median {statistics.median(timings[True]):.3f})")
    print(f"  evaluation seconds per iteration, without stages: {without:.3f} (median {statistics.median(timings[False]):.3f})")
    print(f"  stopped early by stage 1: {stopped} of {args.candidates} ({stopped / args.candidates:.0%})")
    print(f"  change per iteration: {with_stages - without:+.3f} s ({(with_stages - without) / without:+.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
