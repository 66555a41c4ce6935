"""Search quality: regret of every flow on landscapes of different character, driven by a scripted mutation model.

The model is ours and seeded, the same for every flow (and for OpenEvolve): a loopback OpenAI-compatible server
that reads the parent (and any other programs) from each prompt, perturbs it or crosses it with another program
the prompt shows, and answers in the requested edit format (a SEARCH/REPLACE block of the parent's `return`
line; for FunSearch the next version of the function). A prompt that asks to explore or diverge (AlphaEvolve's
exploration, EvoX's DIVERGE, AdaEvolve's high intensity and paradigms) gets a larger move, as a model's answer
to such a prompt is. Any other request (a guide's paradigm list, EvoX's strategy code) gets an unusable reply.

Landscapes (regret = value − optimum, 0 is perfect; the Target's `solution()` returns the point or the tour):
- rastrigin: 8-D shifted Rastrigin from x = 3.5 everywhere, smooth and multimodal;
- deceptive: 4-D, a wide trap basin (regret 8 at its bottom) around the start and a narrower global basin far
  away whose outskirts are worse than the trap, so a climber that keeps only its best never crosses; diversity pays;
- tour: a 12-city closed tour (seeded cities, the optimum by Held-Karp), combinatorial.

Every flow (default, alphaevolve, adaevolve, evox, funsearch) runs `--iterations` iterations per landscape and
seed, in this process (`run_iteration` with the llm proposer, isolation none: the evaluators are ours). It prints
median / min / max best regret at 10, 25, 50 and 100 iterations (those within the budget) and model calls per
run. With OpenEvolve installed (`--openevolve-venv`, default benchmarks/peer_overhead.py's virtualenv; `--install`
installs it there) its default configuration runs the same landscapes against the same model, side by side.

    nice -n 10 python3 benchmarks/search_quality.py [--seeds 5] [--iterations 100] [--landscapes ...] [--flows ...]
    python3 benchmarks/search_quality.py --first-seed 3 --seeds 1 --results r3.jsonl   # one share of a long run
    python3 benchmarks/search_quality.py --report r*.jsonl                             # the tables of the shares
    python3 benchmarks/search_quality.py --quick     # 1 seed x 10 iterations: about a minute
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from peer_overhead import Server, install_peer, serve

from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.program.playbook import Marker, customize_markers, resolve_markers
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore

REPO = Path(__file__).resolve().parents[1]
STRATEGIES_DIR = REPO / ".autoloop/strategies"
FLOWS = ("default", "alphaevolve", "adaevolve", "evox", "funsearch")
CHECKPOINTS = (10, 25, 50, 100)
FUNCTION = "solution"


@dataclass(frozen=True)
class Spec:
    """What a landscape's customised playbooks say about it.

    Attributes:
      name: the program's name.
      framing: 2–4 sentences on the artifact, the fitness and validity.
      islands: AlphaEvolve's (family, one-line description) islands.
      validity: the cheap invariants, `;`-separated.
      facts: domain knowledge bullets for the prompts.
      function: the function FunSearch evolves.
      skeleton: FunSearch's specification: (problem, test inputs, function skeleton).
    """

    name: str
    framing: str
    islands: tuple[tuple[str, str], ...]
    validity: str
    facts: str
    function: str
    skeleton: tuple[str, str, str]


# --- landscapes ----------------------------------------------------------------------------------

EVALUATOR = '''"""Scores `solution()` of code/solution.py on the {name} landscape: its regret, and `score` = −regret."""

import hashlib
import json
import math
import pathlib
import sys

{constants}


def main() -> int:
    namespace: dict = {{}}
    try:
        exec(pathlib.Path(__file__).with_name("solution.py").read_text(encoding="utf-8"), namespace)
        value = [float(v) for v in namespace["solution"]()]
        loss = regret(value)
    except Exception as err:  # any failure of the candidate is its error, not the benchmark's
        print(json.dumps({{"error": f"{{type(err).__name__}}: {{err}}"}}))
        return 1
    digest = hashlib.sha256(json.dumps([round(v, 6) for v in value]).encode()).hexdigest()[:16]
    print(json.dumps({{"score": -loss, "regret": loss, "scores": {{"value": -loss}}, "output_hash": digest}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

RASTRIGIN = '''SHIFT = {shift!r}


def regret(x: list) -> float:
    if len(x) != len(SHIFT) or not all(math.isfinite(v) for v in x):
        raise ValueError(f"expected {{len(SHIFT)}} finite numbers")
    z = [min(5.12, max(-5.12, v)) - s for v, s in zip(x, SHIFT)]
    return 10 * len(z) + sum(t * t - 10 * math.cos(2 * math.pi * t) for t in z)'''

DECEPTIVE = '''TRAP = {trap!r}
GLOBAL = {best!r}


def regret(x: list) -> float:
    if len(x) != len(TRAP) or not all(math.isfinite(v) for v in x):
        raise ValueError(f"expected {{len(TRAP)}} finite numbers")
    x = [min(5.0, max(-5.0, v)) for v in x]
    trap = 8 + sum((v - a) ** 2 for v, a in zip(x, TRAP)) / 4  # wide and shallow: its bottom is 8
    far = 16 * (1 - math.exp(-sum((v - b) ** 2 for v, b in zip(x, GLOBAL)) / 8))  # its outskirts are worse
    return min(trap, far)'''

TOUR = '''CITIES = {cities!r}
OPTIMUM = {optimum!r}


def regret(order: list) -> float:
    if sorted(order) != list(range(len(CITIES))):
        raise ValueError(f"expected a permutation of 0..{{len(CITIES) - 1}}")
    stops = [CITIES[int(i)] for i in order]
    return sum(math.dist(stops[i - 1], stops[i]) for i in range(len(stops))) - OPTIMUM'''


def held_karp(cities: Sequence[tuple[float, float]]) -> float:
    """Returns the length of the shortest closed tour through the cities (exact; fine up to ~13 cities)."""
    n = len(cities)
    dist = [[math.dist(a, b) for b in cities] for a in cities]
    best = {(1 << k, k): dist[0][k] for k in range(1, n)}
    for size in range(2, n):
        for subset in itertools.combinations(range(1, n), size):
            bits = sum(1 << k for k in subset)
            for k in subset:
                rest = bits & ~(1 << k)
                best[(bits, k)] = min(best[(rest, m)] + dist[m][k] for m in subset if m != k)
    full = (1 << n) - 2
    return min(best[(full, k)] + dist[k][0] for k in range(1, n))


@dataclass(frozen=True)
class Landscape:
    """A landscape: the Target's first `solution()`, its evaluator and what the playbooks say about it.

    Attributes:
      spec: the playbooks' answers.
      goal: program.md's Goal paragraph.
      initial: the first solution's values.
      evaluator: code/evaluate.py.
    """

    spec: Spec
    goal: str
    initial: tuple[float, ...]
    evaluator: str

    @property
    def tour(self) -> bool:
        return self.spec.name == "tour"

    def solution(self, values: Sequence[float]) -> str:
        return (f"# EVOLVE-BLOCK-START\ndef {FUNCTION}():\n    \"\"\"{self.spec.skeleton[2].split(chr(34) * 3)[1]}\"\"\"\n"
                f"    return {format_values(values, self.tour)}\n# EVOLVE-BLOCK-END\n")


def format_values(values: Sequence[float], tour: bool) -> str:
    return "[" + ", ".join(str(int(v)) if tour else f"{v:.4f}" for v in values) + "]"


def _spec(name: str, framing: str, islands: tuple[tuple[str, str], ...], validity: str, facts: str,
          doc: str) -> Spec:
    header = f'def {FUNCTION}() -> list:\n    """{doc}"""'
    return Spec(name, framing, islands, validity, facts, FUNCTION,
                (framing, "- value: −regret of the returned solution; 0 is the optimum.", header))


def landscapes() -> dict[str, Landscape]:
    """Returns the three landscapes (their constants drawn from a fixed seed)."""
    rng = random.Random(2026)
    shift = [round(rng.uniform(-2.0, 2.0), 3) for _ in range(8)]
    cities = [(round(rng.uniform(0, 100), 1), round(rng.uniform(0, 100), 1)) for _ in range(12)]
    optimum = held_karp(cities)
    numbers = (("local refinement", "small steps on one or two coordinates of the best point."),
               ("global jumps", "large moves of every coordinate, to leave the current basin."),
               ("recombination", "coordinates taken from two good points."),
               ("restarts", "a fresh point elsewhere in the box."))
    tours = (("2-opt", "reverse one segment of the best tour."), ("swaps", "exchange two cities."),
             ("recombination", "order crossover of two good tours."), ("restarts", "a new tour."))
    rastrigin = _spec(
        "rastrigin", "The artifact is `solution()` in `code/solution.py`, returning 8 numbers in [-5.12, 5.12]. "
        "The fitness is `score`, minus the regret of the shifted Rastrigin function at that point (0 is the optimum).",
        numbers, "8 finite numbers", "- The function is smooth with a local minimum near every integer offset.",
        "Returns the point: 8 numbers in [-5.12, 5.12].")
    deceptive = _spec(
        "deceptive", "The artifact is `solution()` in `code/solution.py`, returning 4 numbers in [-5, 5]. The "
        "fitness is `score`, minus the regret at that point (0 is the optimum).",
        numbers, "4 finite numbers", "- A wide basin surrounds the start; other basins may lie far away.",
        "Returns the point: 4 numbers in [-5, 5].")
    tour = _spec(
        "tour", "The artifact is `solution()` in `code/solution.py`, returning a visiting order of 12 cities "
        "(a permutation of 0..11). The fitness is `score`, minus the tour's excess length over the optimum.",
        tours, "a permutation of 0..11", "- Crossing edges can always be removed by reversing a segment.",
        "Returns the tour: a permutation of 0..11, visited in order and back to the start.")
    return {
        "rastrigin": Landscape(rastrigin, "Minimise the 8-D shifted Rastrigin function.", (3.5,) * 8,
                               EVALUATOR.format(name="rastrigin", constants=RASTRIGIN.format(shift=shift))),
        "deceptive": Landscape(deceptive, "Minimise a 4-D function whose nearest basin is not the best one.",
                               (-1.0,) * 4, EVALUATOR.format(name="deceptive", constants=DECEPTIVE.format(
                                   trap=[-2.5] * 4, best=[3.0] * 4))),
        "tour": Landscape(tour, "Find the shortest closed tour through 12 cities.", tuple(range(12)),
                          EVALUATOR.format(name="tour", constants=TOUR.format(cities=cities, optimum=optimum))),
    }


# --- the scripted model --------------------------------------------------------------------------

RETURN_RE = re.compile(r"^([ \t]*)return (\[[-0-9., ]*\])[ \t]*$", re.MULTILINE)
# The prompt's ask for a bold attempt: AlphaEvolve's exploration operator, AdaEvolve's exploration mode, EvoX's DIVERGE.
EXPLORE_RE = re.compile(r"Operator: \*\*exploration|Mode: \*\*exploration|^## IMPORTANT: take a different route",
                        re.MULTILINE)
PATH_RE = re.compile(r"Write the path `([^`]+)` on its own line")
UNUSABLE = "I am not sure how to help with this request."


@dataclass
class ScriptedModel(Server):
    """The loopback model: mutation and crossover of the programs each prompt shows, seeded per run."""

    calls: int = 0
    lo: float = -5.0
    hi: float = 5.0

    def start(self, seed: int, landscape: Landscape) -> None:
        self.reset()
        self.rng = random.Random(seed)
        self.calls = 0
        self.lo, self.hi = (-5.12, 5.12) if landscape.spec.name == "rastrigin" else (-5.0, 5.0)

    def reply(self, messages: list[dict[str, str]]) -> str:
        self.calls += 1
        prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        return answer(prompt, self.rng, self.lo, self.hi)


def answer(prompt: str, rng: random.Random, lo: float = -5.0, hi: float = 5.0) -> str:
    """Returns the reply to a prompt: a child of the programs it shows, in the edit format it asks for.

    The parent is the program under the files to change (ours) or the current program (OpenEvolve's), else the
    last one shown (FunSearch's best version); the other programs shown are crossover partners.
    """
    shown = [(m.start(), m.group(0), json.loads(m.group(2))) for m in RETURN_RE.finditer(prompt)]
    shown = [item for item in shown if item[2]]
    if not shown:
        return UNUSABLE
    heading = re.search(r"(?im)^#+ *(files you may change|current program) *$", prompt)
    after = [item for item in shown if heading and item[0] > heading.end()]
    _, parent_line, parent = after[0] if after else shown[-1]
    others = [values for _, _, values in shown if values != parent and len(values) == len(parent)]
    tour = sorted(parent) == list(range(len(parent))) and all(float(v).is_integer() for v in parent)
    explore = bool(EXPLORE_RE.search(prompt)) or rng.random() < 0.1
    partner = rng.choice(others) if others and rng.random() < 0.4 else None
    mutate = mutate_tour if tour else mutate_point
    child = mutate(parent, partner, explore, rng, lo, hi)
    while child == parent:
        child = mutate(parent, None, explore, rng, lo, hi)
    new = format_values(child, tour)
    how = ("crossed with another program, then " if partner else "") + ("a large move" if explore else "a small move")
    path = PATH_RE.search(prompt)
    if path:  # FunSearch: the path, then the evolved block holding the new version named as the function
        return f"SUMMARY: {how}\n\n{path.group(1)}\n```python\ndef {FUNCTION}() -> list:\n    return {new}\n```\n"
    indent = re.match(r"[ \t]*", parent_line).group(0)
    return f"SUMMARY: {how}\n\n<<<<<<< SEARCH\n{parent_line}\n=======\n{indent}return {new}\n>>>>>>> REPLACE\n"


def mutate_point(parent: list, partner: list | None, explore: bool, rng: random.Random, lo: float,
                 hi: float) -> list:
    x = [float(v) for v in parent]
    if partner is not None:
        x = [a if rng.random() < 0.5 else float(b) for a, b in zip(x, partner)]
    if explore:
        x = [v + rng.gauss(0, 2.0) for v in x]
    else:
        for i in rng.sample(range(len(x)), rng.randint(1, 2)):
            x[i] += rng.gauss(0, 0.3)
    return [round(min(hi, max(lo, v)), 4) for v in x]


def mutate_tour(parent: list, partner: list | None, explore: bool, rng: random.Random, lo: float,
                hi: float) -> list:
    order = [int(v) for v in parent]
    n = len(order)
    if partner is not None:  # order crossover: a slice of the parent, the rest in the partner's order
        i, j = sorted(rng.sample(range(n + 1), 2))
        kept = order[i:j]
        rest = [int(v) for v in partner if int(v) not in kept]
        order = rest[:i] + kept + rest[i:]
    moves = rng.randint(2, 4) if explore else 1
    for _ in range(moves):
        i, j = sorted(rng.sample(range(n), 2))
        order[i : j + 1] = reversed(order[i : j + 1])
    return order


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

PROGRAM_MD = """\
---
metric_direction: higher
evaluation-timeout: 30
seed: {seed}
---

# {name}

## Goal

{goal} `code/solution.py`'s `solution()` returns the candidate; `code/evaluate.py` scores it.

## Target

Only modify:
- `code/solution.py` — the solution (inside the EVOLVE-BLOCK)

Do NOT modify:
- `code/evaluate.py`

## Evaluation

```bash
python3 "$AUTOLOOP_PROGRAM_DIR/code/evaluate.py"
```

The metric is `score`. Higher is better.

## Evolution Strategy

{strategy}
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def build_repo(tmp: Path, landscape: Landscape, flow: str, seed: int) -> Path:
    """Returns a scratch repository on `main` holding the landscape's program for the flow, committed."""
    spec = landscape.spec
    root = tmp / f"{spec.name}-{flow}-{seed}"
    _git(tmp, "init", "-q", "-b", "main", str(root))
    _git(root, "config", "user.name", "bench")
    _git(root, "config", "user.email", "bench@example.invalid")
    base = root / ".autoloop/programs" / spec.name
    (base / "code").mkdir(parents=True)
    (base / "code/solution.py").write_text(landscape.solution(landscape.initial), encoding="utf-8")
    (base / "code/evaluate.py").write_text(landscape.evaluator, encoding="utf-8")
    pointer = "Plain hill climbing: propose one focused change per iteration.\n"
    if flow in BUILDERS:
        for rel, text in BUILDERS[flow](spec).items():
            path = base / "strategy" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        pointer = POINTERS[flow]
    (base / "program.md").write_text(PROGRAM_MD.format(seed=seed, name=spec.name, goal=landscape.goal,
                                                       strategy=pointer), encoding="utf-8")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", f"{spec.name} with {flow}")
    return root


# --- runs and the table ------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One run: best regret after each iteration (None before any evaluation), model calls, wall time."""

    curve: tuple[float | None, ...]
    calls: int
    seconds: float


def run_ours(tmp: Path, landscape: Landscape, flow: str, seed: int, iterations: int, model: ScriptedModel) -> Run:
    """Runs `iterations` iterations of the flow on the landscape with seed; returns the best-regret curve."""
    started = time.perf_counter()
    model.start(seed, landscape)
    root = build_repo(tmp, landscape, flow, seed)
    name = landscape.spec.name
    program = load_program(root, Path(".autoloop/programs") / name / "program.md")
    memory = MemoryStore(root)
    options = RunOptions(proposer="llm", model="openai/mock", isolation="none")
    curve: list[float | None] = []
    for _ in range(iterations):
        run_iteration(root, program, options, datetime.now(timezone.utc))
        best = statefile.parse_state(memory.read(f"{name}.md") or "", f"{name}.md").machine.best_metric
        curve.append(None if best is None else -best)
    shutil.rmtree(root, ignore_errors=True)
    return Run(tuple(curve), model.calls, time.perf_counter() - started)


OE_EVALUATOR = '''"""OpenEvolve's side: the landscape's own evaluate.py on the candidate, in a subprocess."""
import json, pathlib, shutil, subprocess, sys, tempfile

HERE = pathlib.Path(__file__).resolve().parent


def evaluate(program_path):
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(program_path, pathlib.Path(tmp) / "solution.py")
        shutil.copy(HERE / "evaluate.py", pathlib.Path(tmp) / "evaluate.py")
        done = subprocess.run([sys.executable, "evaluate.py"], cwd=tmp, capture_output=True, text=True, timeout=60)
    lines = [line for line in done.stdout.splitlines() if line.strip().startswith("{")]
    result = json.loads(lines[-1]) if lines else {"error": done.stderr[-300:]}
    if "error" in result:
        return {"combined_score": -1e9, "error": 1.0}
    with open(HERE / "regrets.txt", "a") as log:
        log.write(f"{result['regret']}\\n")
    return {"combined_score": result["score"]}
'''
OE_CONFIG = """\
max_iterations: {iterations}
checkpoint_interval: 100000
log_level: WARNING
random_seed: {seed}
diff_based_evolution: true
llm:
  api_base: {api_base}
  api_key: sk-bench
  models:
    - name: mock
      weight: 1.0
  timeout: 60
  retries: 0
evaluator:
  timeout: 60
  cascade_evaluation: false
  parallel_evaluations: 1
"""


def run_peer(tmp: Path, cli: Path, landscape: Landscape, seed: int, iterations: int, model: ScriptedModel,
             url: str) -> Run:
    """Runs OpenEvolve's default configuration on the landscape; the curve is best regret per evaluation after the first."""
    started = time.perf_counter()
    model.start(seed, landscape)
    run = tmp / f"{landscape.spec.name}-openevolve-{seed}"
    run.mkdir(parents=True)
    (run / "initial_program.py").write_text(landscape.solution(landscape.initial), encoding="utf-8")
    (run / "evaluate.py").write_text(landscape.evaluator, encoding="utf-8")
    (run / "evaluator.py").write_text(OE_EVALUATOR, encoding="utf-8")
    (run / "config.yaml").write_text(OE_CONFIG.format(iterations=iterations, seed=seed, api_base=url))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AUTOLOOP_"))}
    env.update(OPENAI_API_KEY="sk-bench", OPENAI_API_BASE=url)
    subprocess.run([str(cli), "initial_program.py", "evaluator.py", "--config", "config.yaml", "--iterations",
                    str(iterations), "--output", str(run / "out")], cwd=run, env=env, capture_output=True,
                   timeout=3600, check=True)
    regrets = [float(line) for line in (run / "regrets.txt").read_text().split()]
    best = list(itertools.accumulate(regrets, min))[1:]  # the first evaluation is the initial program's
    curve = [best[min(i, len(best) - 1)] if best else None for i in range(iterations)]
    shutil.rmtree(run, ignore_errors=True)
    return Run(tuple(curve), model.calls, time.perf_counter() - started)


def _cell(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def table(name: str, runs: dict[str, list[Run]], iterations: int) -> str:
    """Returns the landscape's table: per flow, median (min–max) best regret at the checkpoints and calls per run."""
    points = [c for c in CHECKPOINTS if c <= iterations] or [iterations]
    rows = [["flow", *(f"regret@{c}" for c in points), f"vs default@{points[-1]}", "calls/run", "s/run"]]
    final = {flow: [r.curve[points[-1] - 1] for r in done if r.curve[points[-1] - 1] is not None]
             for flow, done in runs.items()}
    base = statistics.median(final["default"]) if final.get("default") else None
    for flow, done in runs.items():
        at = [[r.curve[c - 1] for r in done if r.curve[c - 1] is not None] for c in points]
        # The goal: no strategy's median regret above the default flow's by more than 25 % of it.
        versus = f"{statistics.median(final[flow]) / base - 1:+.0%}" if base and final[flow] else "—"
        rows.append([flow, *(_cell(values) for values in at), versus, f"{statistics.median(r.calls for r in done):g}",
                     f"{statistics.median(r.seconds for r in done):.0f}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return f"### {name}\n\n" + "\n".join(lines)


def main() -> None:
    """Runs every flow on every landscape and seed, then prints one table per landscape."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="seeds per flow (first-seed..first-seed+N-1)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="1 seed x 10 iterations")
    parser.add_argument("--landscapes", nargs="+", default=list(landscapes()), choices=sorted(landscapes()))
    parser.add_argument("--flows", nargs="+", default=[*FLOWS, "openevolve"], choices=[*FLOWS, "openevolve"],
                        help="openevolve runs only when installed")
    parser.add_argument("--openevolve-venv", type=Path,
                        default=Path.home() / ".cache/autoloop/bench/openevolve-0.4.0")
    parser.add_argument("--install", action="store_true", help="install OpenEvolve 0.4.0 into --openevolve-venv")
    parser.add_argument("--results", type=Path, help="append each run to this JSON-lines file as it ends")
    parser.add_argument("--jobs", type=int, default=1, help="landscapes run in this many processes at once")
    parser.add_argument("--report", type=Path, nargs="+", metavar="RESULTS",
                        help="print the tables of earlier --results files (several processes' runs) and stop")
    args = parser.parse_args()
    if args.report:
        print_report([json.loads(line) for path in args.report for line in path.read_text().splitlines() if line])
        return
    if args.quick:
        args.seeds, args.iterations, args.jobs = 1, 10, len(args.landscapes)
    if args.jobs > 1:
        rows = in_processes(args)
        if args.results:  # the shares wrote to their own files, which go with their temporary folder
            with args.results.open("a", encoding="utf-8") as out:
                out.writelines(json.dumps(row) + "\n" for row in rows)
        print_report(rows)
        return
    # The evaluators are ours: no slot user is needed to keep a candidate from the runner's files.
    os.environ.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
                      AUTOLOOP_SLOT_USER="off")
    cli = args.openevolve_venv / "bin/openevolve-run"
    if args.install and not cli.exists():
        install_peer(args.openevolve_venv, "0.4.0")
    model = ScriptedModel()
    server = serve(model)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    os.environ.update(OPENAI_API_KEY="sk-bench", OPENAI_API_BASE=url, OPENAI_BASE_URL=url)
    worlds, rows = landscapes(), []
    with tempfile.TemporaryDirectory() as tmp:
        # Untimed: a process's first iteration pays its imports (litellm alone took 36–50 s on a loaded machine),
        # which made the first flow run, always the default, look three times slower than the others.
        run_ours(Path(tmp), worlds[args.landscapes[0]], "default", 0, 1, model)
        started = time.perf_counter()
        for name in args.landscapes:
            for flow in [f for f in args.flows if f != "openevolve" or cli.exists()]:
                for seed in range(args.first_seed, args.first_seed + args.seeds):
                    if flow == "openevolve":
                        run = run_peer(Path(tmp), cli, worlds[name], seed, args.iterations, model, url)
                    else:
                        run = run_ours(Path(tmp), worlds[name], flow, seed, args.iterations, model)
                    row = {"landscape": name, "flow": flow, "seed": seed, "curve": run.curve, "calls": run.calls,
                           "seconds": run.seconds}
                    rows.append(row)
                    if args.results:
                        with args.results.open("a", encoding="utf-8") as out:
                            out.write(json.dumps(row) + "\n")
                    print(f"{name} {flow} seed {seed}: regret {run.curve[-1]}, {run.calls} model calls, "
                          f"{run.seconds:.0f} s", file=sys.stderr, flush=True)
    server.shutdown()
    print_report(rows)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


def in_processes(args: argparse.Namespace) -> list[dict]:
    """Returns the rows of the landscapes run in args.jobs processes of this script (a share of them each)."""
    with tempfile.TemporaryDirectory() as tmp:
        shares = [args.landscapes[i :: args.jobs] for i in range(min(args.jobs, len(args.landscapes)))]
        results = [Path(tmp) / f"share{i}.jsonl" for i in range(len(shares))]
        common = ["--seeds", str(args.seeds), "--first-seed", str(args.first_seed), "--iterations",
                  str(args.iterations), "--flows", *args.flows, "--openevolve-venv", str(args.openevolve_venv)]
        running = [subprocess.Popen([sys.executable, __file__, *common, "--landscapes", *share, "--results",
                                     str(out)], stdout=subprocess.DEVNULL) for share, out in zip(shares, results)]
        for process in running:
            process.wait()
        return [json.loads(line) for out in results if out.exists() for line in out.read_text().splitlines() if line]


def print_report(rows: list[dict]) -> None:
    """Prints one table per landscape of the runs' rows (landscape, flow, seed, curve, calls, seconds)."""
    iterations = min(len(row["curve"]) for row in rows)
    seeds = {row["seed"] for row in rows}
    peer = "with OpenEvolve 0.4.0" if any(row["flow"] == "openevolve" for row in rows) else "OpenEvolve not run"
    print(f"search quality: {len(seeds)} seeds x {iterations} iterations, scripted model; best regret median "
          f"(min–max) over seeds; {peer}\n")
    tables = []
    for name in dict.fromkeys(row["landscape"] for row in rows):
        runs: dict[str, list[Run]] = {}
        for row in rows:
            if row["landscape"] == name:
                runs.setdefault(row["flow"], []).append(Run(tuple(row["curve"]), row["calls"], row["seconds"]))
        tables.append(table(name, runs, iterations))
    print("\n\n".join(tables))


if __name__ == "__main__":
    main()
