"""Compares the search strategies' efficiency: median best fitness against evaluations, same budget.

Runs hill climbing (the default flow), AlphaEvolve, AdaEvolve, FunSearch and EvoX on the example
programs with the offline `tune` proposer (no network, no API key), several seeds each. Every run
builds a scratch git repository holding a copy of the program, customised for the strategy (a
fully resolved playbook under `strategy/`, the pointer in program.md's `## Evolution Strategy`,
and for FunSearch a wrapper evaluator printing per-test `scores` and an `output_hash`), sets
program.md's `seed:` and runs `run_iteration` once per iteration in this process.

After each iteration it reads the best metric from the state file; an evaluation is an iteration
that ran the evaluator on a candidate, plus one for the baseline. It prints, per program, each
strategy's median best-so-far at 10, 20 and 30 evaluations, the median final best, the median
number of evaluations the budget bought, and the seconds per run. Progress goes to stderr.

    python benchmarks/search_efficiency.py [--seeds 3] [--budget 30] [--programs function_minimization circle_packing]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.program.playbook import Marker, customize_markers, resolve_markers
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore

REPO = Path(__file__).resolve().parents[1]
STRATEGIES_DIR = REPO / ".autoloop/strategies"
STRATEGIES = ("hill-climbing", "alphaevolve", "adaevolve", "funsearch", "evox")
CHECKPOINTS = (10, 20, 30)


@dataclass(frozen=True)
class Spec:
    """What a program's customised playbooks say about it.

    Attributes:
      name: the program's folder under `.autoloop/programs/`.
      target: the Target file, relative to the program folder.
      framing: 2–4 sentences on the artifact, the fitness and validity.
      islands: AlphaEvolve's (family, one-line description) islands.
      validity: the cheap invariants, `;`-separated.
      facts: domain knowledge bullets for the mutation/crossover/solution prompts.
      function: the function FunSearch evolves.
      skeleton: FunSearch's specification: (problem, test inputs, function skeleton).
      wrapper: a FunSearch evaluator adding per-test `scores` and an `output_hash` to the metrics.
    """

    name: str
    target: str
    framing: str
    islands: tuple[tuple[str, str], ...]
    validity: str
    facts: str
    function: str
    skeleton: tuple[str, str, str]
    wrapper: str


FM_WRAPPER = '''"""Runs the program's evaluator and adds per-trial scores and a hash of the returned points."""

import hashlib
import json
import math
import sys

import evaluate


def main() -> int:
    try:
        points = evaluate.trial_points()  # the search runs in a process of its own
        results = [(evaluate.objective(*p), math.dist(p, evaluate.GLOBAL_MIN)) for p in points]
    except Exception as err:
        print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
        return 1
    metrics = evaluate.score([v for v, _ in results], [d for _, d in results])
    metrics["scores"] = {f"trial_{t:02d}": round(-v, 4) for t, (v, _) in enumerate(results)}
    points = json.dumps([[round(v, 9), round(d, 9)] for v, d in results])
    metrics["output_hash"] = hashlib.sha256(points.encode()).hexdigest()[:16]
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

CP_WRAPPER = '''"""Runs the program's evaluator and adds the one test's score and a hash of the packing."""

import hashlib
import json
import sys

import evaluate


def main() -> int:
    try:
        metrics = evaluate.measure()  # the packing runs in a process of its own
        centers = evaluate.as_floats(evaluate.call(evaluate.PACKING, "construct_packing"), 2, "centres")
    except Exception as err:
        print(json.dumps({"error": f"{type(err).__name__}: {err}", "validity": 0.0}))
        return 1
    metrics["scores"] = {"sum_radii": metrics["sum_radii"]}
    layout = json.dumps([[round(x, 9), round(y, 9)] for x, y in centers])
    metrics["output_hash"] = hashlib.sha256(layout.encode()).hexdigest()[:16]
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

FUNCTION_MINIMIZATION = Spec(
    name="function_minimization",
    target="code/search.py",
    framing=(
        "The artifact is `search_algorithm(rng, bounds)` in `code/search.py`, a stochastic search for the global "
        "minimum of f(x, y) = sin(x)·cos(y) + sin(x·y) + (x² + y²)/20 on [-5, 5]². The fitness is "
        "`combined_score` in [0, 1.5] over ten seeded trials (value, distance to (-1.704, 0.678), reliability). "
        "A candidate is valid if it returns a finite in-bounds point and calls `objective` at most 20000 times per trial."
    ),
    islands=(
        ("simulated annealing", "temperature-scheduled random moves with restarts (the initial candidate)."),
        ("multistart local search", "many random starts, each polished by coordinate or pattern search."),
        ("population methods", "differential evolution or a particle swarm over the square."),
        ("grid then refine", "a coarse grid scan, then a local refinement of the best cells."),
    ),
    validity=(
        "every function value comes from `objective`; the returned point is finite and inside the bounds; "
        "at most 20000 `objective` calls per trial; only `rng` supplies randomness"
    ),
    facts=(
        "- The global minimum is about -1.5187 at (-1.704, 0.678).\n"
        "- A wide local minimum near (1.6, 2.9) at about -1.42 traps short or greedy searches.\n"
        "- 20000 evaluations per trial are plenty for a 2-D problem: spend them on restarts and a final polish.\n"
        "- Steps much larger than the basins (about 1 wide) waste evaluations near the optimum."
    ),
    function="search_algorithm",
    skeleton=(
        "Find the global minimum of f(x, y) = sin(x)·cos(y) + sin(x·y) + (x² + y²)/20 on [-5, 5]². A better search "
        "returns points closer to (-1.704, 0.678) in more of the ten seeded trials.",
        "- trial_00 … trial_09: one seeded run each; the score is −f at the returned point.",
        'def search_algorithm(rng, bounds):\n    """Returns (x, y, value): the best point found; call objective for every value."""',
    ),
    wrapper=FM_WRAPPER,
)

CIRCLE_PACKING = Spec(
    name="circle_packing",
    target="code/packing.py",
    framing=(
        "The artifact is `construct_packing()` and `compute_max_radii(centers)` in `code/packing.py`: 26 circle "
        "centres in the unit square and the largest valid radii for them. The fitness is `combined_score`, the sum "
        "of radii divided by the best known 2.635. A candidate is valid if every circle lies inside the square and "
        "no two overlap."
    ),
    islands=(
        ("concentric rings", "a centre circle plus rings of circles (the initial candidate)."),
        ("hexagonal lattice", "offset rows of a hexagonal packing, scaled to the square."),
        ("square grid", "a near-square grid with the leftover circles in the gaps."),
        ("radius optimisation", "any layout followed by a better radius computation or local moves of centres."),
    ),
    validity=(
        "exactly 26 centres; every circle inside [0, 1]²; no two circles overlap; no radius negative or NaN"
    ),
    facts=(
        "- The best known sum of radii for 26 circles is about 2.635.\n"
        "- Circles at the walls and corners are the most valuable: the walls only touch one side of them.\n"
        "- Hexagonal rows beat square grids in the interior.\n"
        "- Ring layouts clipped by a margin waste the corners."
    ),
    function="construct_packing",
    skeleton=(
        "Place 26 circles in the unit square without overlaps so that the sum of their radii is as large as "
        "possible; a better `construct_packing` leaves room for larger radii.",
        "- sum_radii: the one packing's sum of radii; the best known is about 2.635.",
        'def construct_packing() -> list[tuple[float, float]]:\n    """Returns the 26 centres; compute_max_radii sizes the circles."""',
    ),
    wrapper=CP_WRAPPER,
)

SPECS = {spec.name: spec for spec in (FUNCTION_MINIMIZATION, CIRCLE_PACKING)}


# --- customised playbooks --------------------------------------------------------------------


Answer = Callable[[str, Marker, int], str]


def _resolved(files: dict[str, str], answer_of: Answer) -> dict[str, str]:
    """Returns files with every marker answered by answer_of(file, marker, nth on its line), via resolve_markers."""
    answers: dict[str, list[str]] = {}
    for name, text in files.items():
        for marker in customize_markers(text, Path(name)):
            place = answers.setdefault(f"{name}:{marker.line}", [])
            place.append(answer_of(name, marker, len(place)))
    resolved, unused = resolve_markers(files, answers, Path("benchmark answers"))
    assert not unused, unused
    return resolved


def _read_tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.md"))}


def _playbook(strategy: str) -> dict[str, str]:
    """Returns a shipped playbook's files as a program holds them: `<strategy>.md`, prompts/, no CUSTOMIZE.md."""
    files = _read_tree(STRATEGIES_DIR / strategy)
    files.pop("CUSTOMIZE.md")
    files[f"{strategy}.md"] = files.pop("strategy.md")
    return files


def _from_table(table: list[tuple[str, str]], matches: Callable[[str, Marker], bool]) -> Answer:
    """Returns an Answer giving the value of the first (key, value) whose key matches the marker."""

    def answer(name: str, marker: Marker, nth: int) -> str:
        for key, value in table:
            if matches(key, marker):
                return value
        raise SystemExit(f"benchmark: no answer for {name}:{marker.line} {marker.preview}")

    return answer


def _label_starts(key: str, marker: Marker) -> bool:
    return marker.label.lower().startswith(key)


def alphaevolve_files(spec: Spec) -> dict[str, str]:
    """Returns the customised AlphaEvolve playbook files, keyed by path under `strategy/`."""
    files = _playbook("alphaevolve")
    island_lines: dict[int, int] = {}
    for number, line in enumerate(files["alphaevolve.md"].splitlines(), start=1):
        found = re.match(r"- \*\*Island (\d+) —", line)
        if found:
            island_lines[number] = int(found.group(1))
    table = [
        ("program-name", spec.name),
        ("2–4 sentences", spec.framing),
        ("tune defaults", "defaults kept"),
        ("replace with real islands", f"{len(spec.islands)} search families for this problem"),
        ("list the cheap invariants", spec.validity),
        ("full rewrite of the evolve block", "full rewrite of the evolve block"),
        ("population_size", "40"),
        ("archive_size", "10"),
        ("approach_family", "`approach_family`"),
        ("code_complexity", "`code_complexity`"),
        ("<40 / 40–100", "<30 / 30–80 / >80 lines of the evolved block"),
        ("paste the high-leverage facts", spec.facts),
        ("same set of domain facts", spec.facts),
        ("pick one", "Full rewrite of the evolve block."),
    ]
    by_content = _from_table(table, lambda key, marker: key.lower() in marker.content.lower())

    def answer(name: str, marker: Marker, nth: int) -> str:
        if name == "alphaevolve.md" and marker.line in island_lines:
            # The template's island bullets are `Island N — <family>: <description>`.
            return spec.islands[island_lines[marker.line]][nth]
        return by_content(name, marker, nth)

    return _resolved(files, answer)


def adaevolve_files(spec: Spec) -> dict[str, str]:
    """Returns the customised AdaEvolve playbook files (reference presets and tunables kept)."""
    files = _playbook("adaevolve")
    families = "\n".join(f"- {family}: {description}" for family, description in spec.islands)
    table = [
        ("program-name", spec.name),
        ("problem framing", spec.framing),
        ("tuning notes", "evaluations take well under a second, so the reference values are kept."),
        ("island presets", "The reference presets are kept."),
        ("idea space", families + "\n- Only the Python standard library is available."),
        ("dead ends", "none known yet."),
        ("domain knowledge", spec.facts),
        ("validity checks", spec.validity + "."),
    ]
    return _resolved(files, _from_table(table, _label_starts))


def funsearch_files(spec: Spec) -> dict[str, str]:
    """Returns the customised FunSearch playbook (4 islands, scores reduced by the metric) and skeleton."""
    files = _playbook("funsearch")
    problem, inputs, code = spec.skeleton
    table = [
        ("program-name", spec.name),
        ("problem framing", spec.framing + " The evaluator wrapper reports each test as a `scores` entry."),
        ("function name", spec.function),
        ("problem", problem),
        ("test inputs", inputs),
        ("function skeleton", code),
    ]
    files = _resolved(files, _from_table(table, lambda key, marker: marker.label.lower() == key))
    text = files["funsearch.md"].replace("| num_islands | 10 |", "| num_islands | 4 |")
    files["funsearch.md"] = text.replace("| score_reduction | last |", "| score_reduction | metric |")
    return files


def evox_files(spec: Spec) -> dict[str, str]:
    """Returns the customised EvoX playbook (our initial strategy; no meta step without an LLM)."""
    files = _playbook("evox")
    families = "\n".join(f"- {family}: {description}" for family, description in spec.islands)
    table = [
        ("program-name", spec.name),
        ("problem framing", spec.framing),
        ("tuning notes", "evaluations take well under a second, so the reference values are kept."),
        ("search landscape", families),
        ("approach families", families),
        ("knobs", "- the numeric constants of the Target."),
        ("domain knowledge", spec.facts),
        ("validity checks", spec.validity + "."),
    ]
    return _resolved(files, _from_table(table, _label_starts))


POINTERS = {
    "alphaevolve": (
        "This program uses the **AlphaEvolve** strategy. On every iteration, read `strategy/alphaevolve.md` and "
        "follow it literally.\nSupport files:\n- `strategy/prompts/mutation.md`\n- `strategy/prompts/crossover.md`\n"
    ),
    "adaevolve": (
        "This program uses the **AdaEvolve** strategy. On every iteration, read `strategy/adaevolve.md` and follow it "
        "literally.\n\nSupport files:\n- `strategy/prompts/solution.md`\n- `strategy/prompts/paradigm.md`\n"
    ),
    "funsearch": (
        "This program uses the **FunSearch** strategy. On every iteration, read `strategy/funsearch.md` and follow it "
        "literally.\nSupport files:\n- `strategy/funsearch.md` — the runtime playbook.\n"
        "- `strategy/prompts/skeleton.md` — the specification every prompt opens with.\n"
    ),
    "evox": (
        "This program uses the **EvoX** strategy. On every iteration, read `strategy/evox.md` and follow it "
        "literally.\n\nSupport files:\n- `strategy/prompts/solution.md`\n- `strategy/prompts/meta.md`\n"
        "- `strategy/prompts/operators.md`\n"
    ),
}
BUILDERS = {
    "alphaevolve": alphaevolve_files, "adaevolve": adaevolve_files, "funsearch": funsearch_files, "evox": evox_files,
}


# --- scratch repositories ----------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def install(base: Path, spec: Spec, strategy: str, seed: int) -> None:
    """Writes the program folder at base, customised for strategy, with program.md's seed set."""
    shutil.copytree(REPO / ".autoloop/programs" / spec.name, base, ignore=shutil.ignore_patterns("__pycache__"))
    program_md = (base / "program.md").read_text(encoding="utf-8")
    program_md = re.sub(r"(?m)^seed:.*$", f"seed: {seed}", program_md, count=1)
    if strategy in BUILDERS:
        for rel, text in BUILDERS[strategy](spec).items():
            path = base / "strategy" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        program_md = program_md[: program_md.index("## Evolution Strategy")]
        program_md += "## Evolution Strategy\n\n" + POINTERS[strategy]
    if strategy == "funsearch":
        (base / "code/evaluate_funsearch.py").write_text(spec.wrapper, encoding="utf-8")
        program_md = program_md.replace("code/evaluate.py\"", "code/evaluate_funsearch.py\"")
    (base / "program.md").write_text(program_md, encoding="utf-8")


def build_repo(tmp: Path, spec: Spec, strategy: str, seed: int) -> Path:
    """Returns a scratch repository on `main` holding the customised program, committed."""
    root = tmp / f"{spec.name}-{strategy}-{seed}"
    _git(tmp, "init", "-q", "-b", "main", str(root))
    _git(root, "config", "user.name", "bench")
    _git(root, "config", "user.email", "bench@example.invalid")
    install(root / ".autoloop/programs" / spec.name, spec, strategy, seed)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", f"{spec.name} with {strategy}")
    return root


# --- runs and the table ------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One run's best-so-far curve.

    Attributes:
      curve: (evaluations so far, best metric) after each iteration, in order.
      seconds: wall time of the run, repository building included.
    """

    curve: tuple[tuple[int, float | None], ...]
    seconds: float


def run_once(tmp: Path, spec: Spec, strategy: str, seed: int, budget: int) -> Run:
    """Runs budget iterations of strategy on spec with seed; returns the best-so-far curve."""
    start = time.perf_counter()
    root = build_repo(tmp, spec, strategy, seed)
    program = load_program(root, Path(".autoloop/programs") / spec.name / "program.md")
    memory = MemoryStore(root)
    evaluations, curve = 0, []
    for _ in range(budget):
        outcome = run_iteration(root, program, RunOptions(proposer="tune"), datetime.now(timezone.utc))
        evaluations += ("evaluate" in outcome.timings) + ("evaluate baseline" in outcome.timings)
        text = memory.read(f"{spec.name}.md") or ""
        best = statefile.parse_state(text, f"{spec.name}.md").machine.best_metric
        curve.append((evaluations, best))
    shutil.rmtree(root, ignore_errors=True)
    return Run(tuple(curve), time.perf_counter() - start)


def best_at(run: Run, evaluations: int) -> float | None:
    """Returns the run's best metric once it had made at most `evaluations` evaluations (None before any)."""
    best = None
    for count, value in run.curve:
        if count > evaluations:
            break
        best = value
    return best


def _median(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "—"
    return f"{statistics.median(known):.4f}" + ("*" if len(known) < len(values) else "")


def table(name: str, runs: dict[str, list[Run]], budget: int) -> str:
    """Returns the program's table: per strategy, median best at the checkpoints, final best, evaluations, s/run."""
    points = [c for c in CHECKPOINTS if c <= budget + 1]
    head = ["strategy", *(f"best@{c} evals" for c in points), "final best", "evals", "s/run"]
    rows = [head]
    for strategy, done in runs.items():
        finals = [r.curve[-1][1] if r.curve else None for r in done]
        evals = statistics.median(r.curve[-1][0] for r in done) if done else 0
        rows.append([
            strategy,
            *(_median([best_at(r, c) if r.curve and r.curve[-1][0] >= c else None for r in done]) for c in points),
            _median(finals),
            f"{evals:g}",
            f"{statistics.median(r.seconds for r in done):.1f}",
        ])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return f"## {name}\n" + "\n".join(lines)


def main() -> None:
    """Runs every strategy on every program and seed, then prints one table per program."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="seeds per strategy (1..N)")
    parser.add_argument("--budget", type=int, default=30, help="iterations per run")
    parser.add_argument("--programs", nargs="+", default=["function_minimization", "circle_packing"], choices=sorted(SPECS))
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    args = parser.parse_args()
    # The scratch repositories must not pick up the user's git config (signing, hooks).
    os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    started = time.perf_counter()
    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.programs:
            runs: dict[str, list[Run]] = {}
            for strategy in args.strategies:
                for seed in range(1, args.seeds + 1):
                    run = run_once(Path(tmp), SPECS[name], strategy, seed, args.budget)
                    runs.setdefault(strategy, []).append(run)
                    print(f"{name} {strategy} seed {seed}: best {run.curve[-1][1]} after {run.curve[-1][0]} "
                          f"evaluations, {run.seconds:.1f} s", file=sys.stderr, flush=True)
            tables.append(table(name, runs, args.budget))
    print(f"search efficiency: {args.seeds} seeds x {args.budget} iterations, offline `tune` proposer, "
          f"medians over seeds (* = some runs had no value there)\n")
    print("\n\n".join(tables))
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
