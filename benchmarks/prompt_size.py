"""Prints the tokens of the rendered AlphaEvolve prompt next to what an agent reads the upstream way (issue 4).

What it measures. For populations of 10, 40 and 200 candidates of the proof-of-concept program
`.autoloop/programs/groupby_evolve`, it builds a state file the way production does: each of N
synthetic iterations is decided by the real AlphaEvolve engine (`strategy.decide`), its candidate's
code is a seeded variant of the parent's evolved block (other constants, helper functions added,
dropped or taken from a second parent), and the record goes through `statefile.apply_iteration` and
`strategy.record_candidate`, so non-elite code is folded into `memory/autoloop` references under the
30720-byte budget exactly as `recording.record_iteration` does. A dict stands in for the memory
branch. The population cap is raised to N (archive N/4) so the populations really reach N.

It then runs `--samples` further iterations (each adds a candidate and evicts one, so the
population stays at N) and counts the prompt each one renders exactly as the runner does (decide
with the iteration's seeded rng, put the first parent's code in place, render), reporting the
median and the maximum. Next to that it counts what an agent reads following upstream autoloop:
the agentic workflow prompt, program.md, the playbook, both framing files, the whole state file
and the Target file. Upstream keeps every candidate's full code in the Population (the seed
schema), so the state file is counted with the code unfolded; the folded variant is shown too,
for fairness. A second comparison swaps our workflow file for upstream's own workflow prompt at
its documented size (about 52 KB, 12,500 tokens; /work/shared/specs/upstream-autoloop.md §6 item 5):
that figure is documented, not measured.

Assumptions of the synthetic run: fitness is the parent's times a seeded log-normal step whose
gains shrink towards a ceiling of 2.5 (an error 8 % of the time); a candidate is accepted when it
beats the best by min-delta; half the iterations report a lesson drawn from a pool of 24, so
Lessons Learned stays bounded.

Tokens are counted with `litellm.token_counter(model="gpt-4o")` (offline, no API key).

    python benchmarks/prompt_size.py [--samples 12] [--seed 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402  (must follow the environment variable above)

from autoloop_py.loop.iteration.iteration import iteration_rng  # noqa: E402
from autoloop_py.loop.record.recording import parse_or_new, rejection_note, state_path  # noqa: E402
from autoloop_py.program.model import Program, load_program
from autoloop_py.program.regions import evolved_code, place_code  # noqa: E402
from autoloop_py.program.target import target_files  # noqa: E402
from autoloop_py.state import file as statefile  # noqa: E402
from autoloop_py.state import population as pop  # noqa: E402
from autoloop_py.state.population import population_of  # noqa: E402
from autoloop_py.strategies import runner as strategy  # noqa: E402
from autoloop_py.strategies.alphaevolve.config import AlphaEvolveConfig  # noqa: E402
from autoloop_py.strategies.alphaevolve.engine import AlphaEvolveEngine  # noqa: E402
from autoloop_py.strategies.base import Decision  # noqa: E402
from autoloop_py.strategies.runner import StrategyRunner  # noqa: E402


def _config(runner: StrategyRunner) -> AlphaEvolveConfig:
    assert isinstance(runner.engine, AlphaEvolveEngine)
    return runner.engine.config

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = Path(".autoloop/programs/groupby_evolve/program.md")
WORKFLOW = Path(".github/workflows/autoloop.md")
SIZES = (10, 40, 200)
TARGET_N = 40
TARGET_RATIO = 4.0
UPSTREAM_WORKFLOW_TOKENS = 12_500  # documented (≈52 KB), not measured: upstream-autoloop.md §6 item 5
MODEL = "gpt-4o"
BASELINE = 0.62
CEILING = 2.5
ERROR_RATE = 0.08
START = datetime(2025, 3, 1, tzinfo=timezone.utc)
RUN_URL = "https://github.com/acme/dataframes/actions/runs/{}"


@dataclass(frozen=True)
class Helper:
    """A helper an evolved candidate may carry.

    Attributes:
      name: the function's name (marks whether a block has it).
      constant: a module-level constant line it needs ('' when none).
      dispatch: the line group_sum gains to call it ('' when none).
      source: the function's source.
    """

    name: str
    constant: str
    dispatch: str
    source: str


HELPERS = (
    Helper(
        "_dict_sum",
        "SMALL_INPUT_ROWS = 64  # below this many rows a Python dict beats numpy's call overhead\n",
        "    if keys.size <= SMALL_INPUT_ROWS:\n        return _dict_sum(keys, values)\n",
        '''def _dict_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sums with a Python dict over the rows, for inputs too small to amortise numpy calls."""
    totals: dict[int, int] = {}
    for key, value in zip(keys.tolist(), values.tolist()):
        totals[key] = totals.get(key, 0) + value
    ordered = sorted(totals)
    return np.array(ordered, dtype=np.int64), np.array([totals[k] for k in ordered], dtype=np.int64)
''',
    ),
    Helper(
        "_unique_codes_sum",
        "",
        "",
        '''def _unique_codes_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maps keys to dense codes with np.unique, then sums per code with an exact bincount."""
    distinct, codes = np.unique(keys, return_inverse=True)
    if _float_sums_exact(values):
        return distinct, np.bincount(codes, weights=values, minlength=distinct.size).astype(np.int64)
    sums = np.zeros(distinct.size, dtype=np.int64)
    np.add.at(sums, codes, values)
    return distinct, sums
''',
    ),
    Helper(
        "_scatter_sum",
        "",
        "",
        '''def _scatter_sum(keys: np.ndarray, values: np.ndarray, low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
    """Accumulates into an int64 array indexed by key offset with np.add.at (exact for any values)."""
    sums = np.zeros(high - low + 1, dtype=np.int64)
    seen = np.zeros(high - low + 1, dtype=bool)
    np.add.at(sums, keys - low, values)
    seen[keys - low] = True
    present = np.flatnonzero(seen)
    return present + low, sums[present]
''',
    ),
    Helper(
        "_run_sum",
        "",
        "    if keys.size > 1 and bool(np.all(keys[1:] >= keys[:-1])):\n        return _run_sum(keys, values)\n",
        '''def _run_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sums runs of already sorted keys without sorting again."""
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[starts], np.add.reduceat(values, starts)
''',
    ),
    Helper(
        "_sample_distinct",
        "SAMPLE_ROWS = 2048  # rows sampled to estimate the number of distinct keys\n",
        "",
        '''def _sample_distinct(keys: np.ndarray, rows: int) -> float:
    """Estimates the fraction of distinct keys from an evenly spaced sample of the rows."""
    step = max(1, keys.size // max(rows, 1))
    sample = keys[::step]
    return np.unique(sample).size / max(sample.size, 1)
''',
    ),
    Helper(
        "_packed_sort_sum",
        "",
        "",
        '''def _packed_sort_sum(keys: np.ndarray, values: np.ndarray, low: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorts keys offset to unsigned 32-bit when the range allows, which argsorts faster than int64."""
    if int(keys.max()) - low >= 2**32:
        return _sort_sum(keys, values)
    order = np.argsort((keys - low).astype(np.uint32), kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return ordered[starts], np.add.reduceat(values[order], starts)
''',
    ),
)

LESSONS = tuple(
    f"{text} (seen at {rows})"
    for text, rows in (
        ("np.bincount with float weights is exact only while partial sums stay below 2**53", "int64 extremes"),
        ("argsort kind='stable' on int64 costs about twice a uint32 argsort of offset keys", "250k rows"),
        ("np.add.at is 5-10x slower than bincount; use it only when float sums are not exact", "all datasets"),
        ("np.unique(return_inverse=True) sorts internally, so it never beats one argsort", "medium range"),
        ("chunking the sort helps only when the chunk fits in L2 (about 4k rows)", "sparse keys"),
        ("a dict over 250k rows is far slower than any numpy path; keep it for tiny inputs", "one row"),
        ("dense paths win when max-min is under about one key per row", "narrow range"),
        ("checking sortedness costs one comparison pass and pays off only on sorted input", "all datasets"),
        ("sampling 2k rows estimates the distinct count well enough to dispatch", "sparse keys"),
        ("np.r_ with a boolean head allocates; np.flatnonzero on a diff is cheaper", "medium range"),
        ("reduceat on an empty starts array raises; guard empty input first", "empty input"),
        ("astype(np.int64) after bincount must round first when weights are large", "values beyond 2**53"),
        ("process_time noise is about 3%, so gains under min-delta are not real", "repeated runs"),
        ("gathering values[order] dominates the sort path; gather once", "250k rows"),
        ("a second reduce over chunk partial sums doubles the sort cost", "sparse keys"),
        ("int32 codes halve memory traffic in bincount", "narrow range"),
        ("minlength avoids a resize when codes are dense", "medium range"),
        ("np.searchsorted over sorted distinct keys is a cheap dense-code map", "medium range"),
        ("keys-min can overflow int64 at the extremes; check the range in Python ints", "int64 extremes"),
        ("boolean presence arrays cost less than counting with a second bincount", "narrow range"),
        ("hash tables in pure numpy need linear probing loops that are slower than sorting", "sparse keys"),
        ("dispatch thresholds tuned on one dataset overfit; check all three", "all datasets"),
        ("np.concatenate of many small chunks is slower than one preallocated array", "sparse keys"),
        ("the pandas baseline itself sorts, so beating it needs to avoid a full sort", "sparse keys"),
    )
)


# ---------------------------------------------------------------- synthetic candidates


def variant_code(base: str, parents: tuple[pop.Candidate, ...], rng: random.Random) -> tuple[str, str]:
    """Returns (a seeded variant of the first parent's evolved block, a one-line summary of the change)."""
    code = parents[0].code if parents and parents[0].code else base
    code, summary = _retune(code, rng)
    if len(parents) > 1 and parents[1].code:
        donated = [h for h in HELPERS if _has(parents[1].code, h) and not _has(code, h)]
        if donated:
            code = _add_helper(code, donated[0])
            return code, f"{summary}; grafts {donated[0].name} from candidate {parents[1].id}"
    present = [h for h in HELPERS if _has(code, h)]
    absent = [h for h in HELPERS if not _has(code, h)]
    roll = rng.random()
    if absent and roll < 0.4:
        helper = rng.choice(absent)
        return _add_helper(code, helper), f"{summary}; adds {helper.name}"
    if present and roll > 0.85:
        helper = rng.choice(present)
        return _drop_helper(code, helper), f"{summary}; drops {helper.name}"
    return code, summary


def _retune(code: str, rng: random.Random) -> tuple[str, str]:
    """Returns the code with its two tunable constants moved by seeded factors, and what changed."""
    dense = float(_constant(code, "DENSE_RANGE_PER_ROW")) * math.exp(rng.gauss(0, 0.3))
    chunk = float(_constant(code, "CHUNK_ROWS")) * math.exp(rng.gauss(0, 0.4))
    code = re.sub(r"^DENSE_RANGE_PER_ROW = [0-9.]+", f"DENSE_RANGE_PER_ROW = {dense:.3f}", code, flags=re.M)
    code = re.sub(r"^CHUNK_ROWS = [0-9.]+", f"CHUNK_ROWS = {chunk:.1f}", code, flags=re.M)
    return code, f"dense threshold {dense:.3f} per row, sort chunks of {chunk:.0f} rows"


def _constant(code: str, name: str) -> str:
    found = re.search(rf"^{name} = ([0-9.]+)", code, flags=re.M)
    assert found, f"the evolved block lost {name}"
    return found.group(1)


def _has(code: str, helper: Helper) -> bool:
    return f"def {helper.name}(" in code


def _add_helper(code: str, helper: Helper) -> str:
    """Returns the code with the helper's constant, dispatch line and function added."""
    anchor = "def group_sum("
    if helper.constant:
        code = code.replace(anchor, helper.constant + "\n\n" + anchor, 1)
    if helper.dispatch:
        code = code.replace("    low, high = ", helper.dispatch + "    low, high = ", 1)
    return code.rstrip("\n") + "\n\n\n" + helper.source


def _drop_helper(code: str, helper: Helper) -> str:
    """Returns the code without the helper's pieces."""
    for piece in ("\n\n\n" + helper.source, helper.dispatch, helper.constant + "\n\n"):
        if piece:
            code = code.replace(piece, "", 1)
    return code if code.endswith("\n") else code + "\n"


def next_fitness(parents: tuple[pop.Candidate, ...], rng: random.Random) -> float | None:
    """Returns a seeded fitness: the first parent's times a log-normal step (None: an evaluation error)."""
    if rng.random() < ERROR_RATE:
        return None
    start = parents[0].fitness if parents and parents[0].fitness is not None else BASELINE
    # Gains shrink near a ceiling, as real speedups do; without it the ratchet compounds forever.
    drift = 0.05 * math.log(CEILING / start) - 0.02
    return round(start * math.exp(rng.gauss(drift, 0.12)), 4)


# ---------------------------------------------------------------- building the state file


@dataclass
class Run:
    """A synthetic run in progress (mutable on purpose: it is the benchmark's own loop state).

    Attributes:
      program: the PoC program; runner: its strategy with the cap raised.
      state: the state file; memory: memory-branch path -> content (folded code).
      branch_source: the Target file as on the program branch (the last accepted code).
    """

    program: Program
    runner: StrategyRunner
    state: statefile.StateFile
    memory: dict[str, str]
    branch_source: str


def start_run(program: Program, runner: StrategyRunner, n: int, source: str) -> Run:
    """Returns a fresh run whose runner caps the population at n (archive n/4)."""
    engine = runner.engine
    assert isinstance(engine, AlphaEvolveEngine)
    config = dataclasses.replace(engine.config, population_size=n, archive_size=max(2, n // 4))
    runner = dataclasses.replace(runner, engine=AlphaEvolveEngine(config))
    state = parse_or_new(None, program, state_path(program))
    return Run(program, runner, state, {}, source)


def step(run: Run, iteration: int, base: str, seed: int) -> str:
    """Runs one synthetic iteration as the runner does (decide, prompt, record); returns the prompt."""
    rng = random.Random(f"{seed}:{iteration}")
    best = run.state.machine.best_metric if iteration > 1 else BASELINE
    program = run.program
    decision = strategy.decide(
        run.runner, run.state, best, iteration, program.direction, iteration_rng(program, iteration), run.memory.get
    )
    files = {path: run.branch_source for path in target_files(program.target, ROOT)}
    placed = strategy.with_parent(run.runner, decision, files)
    prompt = strategy.render_prompt(run.runner, decision, program, placed, run.state, best, ROOT)
    code, summary = variant_code(base, decision.parents, rng)
    source = place_code(run.branch_source, code)
    record = _record(run, decision, next_fitness(decision.parents, rng), best, summary, iteration, rng)
    candidate = strategy.candidate_for(run.runner, decision, record, source, _approach(code), iteration)
    _record_iteration(run, record, candidate)
    if record.status == "accepted":
        run.branch_source = source
    return prompt


def _record_iteration(run: Run, record: statefile.IterationRecord, candidate: pop.Candidate) -> None:
    """Applies the record and the candidate as recording.record_iteration does, keeping the code in memory."""
    program = run.program
    state = statefile.apply_iteration(
        run.state,
        record,
        direction=program.direction,
        target_metric=program.config.target_metric,
        min_delta=program.config.min_delta,
        budget=1 << 40,  # as record_iteration: with a Population, code folds before history
    )
    run.state, recorded = strategy.record_candidate(state, run.runner, candidate, program, statefile.DEFAULT_BUDGET)
    run.memory[strategy.code_path(program, recorded)] = recorded.code or ""


def _record(
    run: Run,
    decision: Decision,
    metric: float | None,
    best: float | None,
    summary: str,
    iteration: int,
    rng: random.Random,
) -> statefile.IterationRecord:
    """Returns the iteration's history record, its status decided as the ratchet does."""
    program = run.program
    if metric is None:
        status, notes = "error", "evaluation failed: result differs from pandas on the int64 extremes edge case"
    elif statefile.is_improvement(metric, best, program.direction, program.config.min_delta):
        status, notes = "accepted", f"speedup improved to {metric:g}"
    else:
        status, notes = "rejected", rejection_note(metric, best, program)
    lesson = rng.choice(LESSONS) if status != "error" and rng.random() < 0.5 else None
    return statefile.IterationRecord(
        status=status,
        timestamp=START + timedelta(hours=6 * iteration),
        change=summary,
        metric=metric,
        commit=f"{rng.getrandbits(28):07x}" if status == "accepted" else None,
        notes=notes,
        lesson=lesson,
        run_url=RUN_URL.format(9_000_000_000 + iteration),
        baseline=BASELINE if iteration == 1 else None,
        tokens=rng.randint(9_000, 16_000),
        cost=round(rng.uniform(0.02, 0.09), 4),
        extra=strategy.history_bullets(decision, metric),
    )


def _approach(code: str) -> str:
    """Returns a one-line approach naming the paths the code dispatches between."""
    helpers = [h.name for h in HELPERS if _has(code, h)]
    extra = f" plus {', '.join(helpers)}" if helpers else ""
    return f"dense bincount for narrow ranges, chunked stable sort with reduceat otherwise{extra}"


def build_run(program: Program, runner: StrategyRunner, n: int, seed: int) -> Run:
    """Returns a run after n synthetic iterations, with n candidates in its Population."""
    source = (ROOT / runner.primary).read_text(encoding="utf-8")
    run = start_run(program, runner, n, source)
    base = evolved_code(source)
    for iteration in range(1, n + 1):
        step(run, iteration, base, seed)
    return run


# ---------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Snapshot:
    """What the memory and program branches hold when an iteration starts.

    Attributes:
      state: the state file; branch_source: the Target file on the program branch.
    """

    state: statefile.StateFile
    branch_source: str


def sample(run: Run, samples: int, seed: int) -> tuple[list[str], list[Snapshot]]:
    """Returns the prompts of the next iterations (the population stays at its cap) and what each one saw."""
    base = evolved_code((ROOT / run.runner.primary).read_text(encoding="utf-8"))
    first = run.state.machine.iteration_count + 1
    prompts, seen = [], []
    for iteration in range(first, first + samples):
        seen.append(Snapshot(run.state, run.branch_source))
        prompts.append(step(run, iteration, base, seed))
    return prompts, seen


def unfolded(state: statefile.StateFile, memory: dict[str, str]) -> statefile.StateFile:
    """Returns the state file with every candidate's full code inline, as upstream keeps it."""
    population = population_of(state)
    full = []
    for candidate in population.candidates:
        if candidate.code is None and candidate.code_ref is not None:
            candidate = dataclasses.replace(candidate, code=memory[candidate.code_ref], code_ref=None, raw=None)
        full.append(candidate)
    text = pop.render_population(dataclasses.replace(population, candidates=tuple(full)))
    return statefile.with_section(state, statefile.POPULATION, text)


def upstream_reads(run: Run, seen: Snapshot, state: statefile.StateFile) -> dict[str, str]:
    """Returns what an agent following upstream reads: workflow, program, playbook, framing, state, Target."""
    playbook = run.runner.playbook
    return {
        "workflow prompt": (ROOT / WORKFLOW).read_text(encoding="utf-8"),
        "program.md": run.program.text,
        "playbook": playbook.text,
        "mutation.md": (ROOT / playbook.framing_path("exploitation")).read_text(encoding="utf-8"),
        "crossover.md": (ROOT / playbook.framing_path("crossover")).read_text(encoding="utf-8"),
        "state file": statefile.render_state(state),
        "Target file": seen.branch_source,
    }


def tokens(text: str) -> int:
    """Returns the gpt-4o token count of text."""
    return int(litellm.token_counter(model=MODEL, text=text))


@dataclass(frozen=True)
class Row:
    """The figures for one population size.

    Attributes:
      n: candidates in the Population (the cap); archive: elites whose code is never folded.
      ours: our prompt tokens per sampled iteration; operators: the operator of each.
      parts_unfolded / parts_folded: upstream-approach tokens per file read (median over the points measured).
      state_bytes_unfolded / state_bytes_folded: the state file's size both ways (median).
    """

    n: int
    archive: int
    ours: tuple[int, ...]
    operators: tuple[str, ...]
    parts_unfolded: dict[str, float]
    parts_folded: dict[str, float]
    state_bytes_unfolded: float
    state_bytes_folded: float

    @property
    def median(self) -> float:
        """Returns our median prompt tokens."""
        return statistics.median(self.ours)

    def upstream(self, folded: bool, documented_workflow: bool) -> float:
        """Returns the upstream-approach tokens, optionally with upstream's documented workflow prompt."""
        parts = dict(self.parts_folded if folded else self.parts_unfolded)
        if documented_workflow:
            parts["workflow prompt"] = UPSTREAM_WORKFLOW_TOKENS
        return sum(parts.values())


def measure(program: Program, runner: StrategyRunner, n: int, samples: int, seed: int) -> Row:
    """Returns the figures of one population size."""
    started = time.perf_counter()
    run = build_run(program, runner, n, seed)
    _progress(f"N={n}: {n} iterations recorded in {time.perf_counter() - started:.1f} s")
    prompts, seen = sample(run, samples, seed)
    _progress(f"N={n}: {samples} prompts rendered; counting tokens")
    ours = tuple(tokens(p) for p in prompts)
    operators = tuple(m.group(1) if (m := _OPERATOR_RE.search(p)) else "?" for p in prompts)
    # Only the state and Target files change between iterations, and the state at N=200 is large,
    # so the upstream side is counted at the first, middle and last sampled iteration.
    points = [seen[i] for i in sorted({0, len(seen) // 2, len(seen) - 1})]
    full = [_upstream_parts(run, p, unfolded(p.state, run.memory)) for p in points]
    folded = [_upstream_parts(run, p, p.state) for p in points]
    _progress(f"N={n}: done in {time.perf_counter() - started:.1f} s")
    return Row(
        n=n,
        archive=_config(run.runner).archive_size,
        ours=ours,
        operators=operators,
        parts_unfolded=_medians([parts for parts, _ in full]),
        parts_folded=_medians([parts for parts, _ in folded]),
        state_bytes_unfolded=statistics.median(size for _, size in full),
        state_bytes_folded=statistics.median(size for _, size in folded),
    )


_OPERATOR_RE = re.compile(r"^- Operator: \*\*(\w+)\*\*", re.M)


def _upstream_parts(run: Run, seen: Snapshot, state: statefile.StateFile) -> tuple[dict[str, int], int]:
    """Returns the tokens of each file an upstream agent reads, and the state file's bytes."""
    reads = upstream_reads(run, seen, state)
    return {name: tokens(text) for name, text in reads.items()}, len(reads["state file"].encode("utf-8"))


def _medians(points: list[dict[str, int]]) -> dict[str, float]:
    return {name: statistics.median(p[name] for p in points) for name in points[0]}


# ---------------------------------------------------------------- printing

_COMPARISONS = (
    ("A full code", False, False),
    ("A folded", True, False),
    ("B full code", False, True),
    ("B folded", True, True),
)


def print_report(rows: list[Row], samples: int) -> None:
    """Prints the table, the per-file breakdown at the target size, and the verdict lines."""
    print(f"Tokens: litellm.token_counter(model={MODEL!r}). Ours: the runner's AlphaEvolve prompt for {samples}")
    print("consecutive iterations at each population size (the population held at its cap N, archive N/4).")
    print("Upstream approach: workflow prompt + program.md + playbook + mutation.md + crossover.md")
    print("  + the whole state file + the Target file.")
    print("  A = with our workflow file (.github/workflows/autoloop.md), measured;")
    print(f"  B = with upstream's own workflow prompt instead, at its documented size of {UPSTREAM_WORKFLOW_TOKENS:,}")
    print("      tokens (~52 KB; documented, not measured).")
    print("  full code = every candidate's code inline in the Population (upstream's schema);")
    print("  folded = our state file as written (non-elite code folded into memory/autoloop references).")
    print()
    _print_table(rows)
    _print_context(rows)
    target = next(r for r in rows if r.n == TARGET_N)
    _print_breakdown(target)
    _print_verdicts(target)


def _print_table(rows: list[Row]) -> None:
    titles = ["N", "ours median", "ours max"] + [t for name, _, _ in _COMPARISONS for t in (name, "ratio")]
    widths = [max(len(t), 6) for t in titles]
    print(" | ".join(t.rjust(w) for t, w in zip(titles, widths)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        cells = [str(row.n), f"{row.median:,.0f}", f"{max(row.ours):,}"]
        for _, folded, documented in _COMPARISONS:
            value = row.upstream(folded, documented)
            cells += [f"{value:,.0f}", f"{value / row.median:.1f}x"]
        print(" | ".join(c.rjust(w) for c, w in zip(cells, widths)))
    print("(ratio = upstream-approach tokens / our median prompt tokens)")
    print()


def _print_context(rows: list[Row]) -> None:
    for row in rows:
        counts = ", ".join(f"{op} {row.operators.count(op)}" for op in sorted(set(row.operators)))
        print(
            f"N={row.n}: archive {row.archive}; sampled operators: {counts}; state file "
            f"{row.state_bytes_folded:,.0f} bytes folded, {row.state_bytes_unfolded:,.0f} bytes with full code"
        )
    print()


def _print_breakdown(row: Row) -> None:
    print(f"Upstream-approach tokens per file at N={row.n} (full code / folded):")
    for name, value in row.parts_unfolded.items():
        print(f"  {name:<16} {value:>8,.0f} / {row.parts_folded[name]:>8,.0f}")
    print(f"  {'upstream workflow prompt (documented, used in B)':<16} {UPSTREAM_WORKFLOW_TOKENS:,}")
    print()


def _print_verdicts(row: Row) -> None:
    for name, folded, documented in _COMPARISONS:
        total = row.upstream(folded, documented)
        ratio = total / row.median
        verdict = "MET" if ratio >= TARGET_RATIO else "NOT MET"
        print(
            f"Target >= {TARGET_RATIO:g}x smaller at N={row.n}, {name:<11}: {verdict} "
            f"({ratio:.1f}x against our median, {total / max(row.ours):.1f}x against our max)"
        )


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    """Builds the three populations, measures them and prints the report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=12, help="prompts rendered per population size")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic run")
    args = parser.parse_args()
    # Over-budget warnings at N=200 are expected (that is what folding is for); the sizes are printed instead.
    logging.getLogger("autoloop_py").setLevel(logging.ERROR)
    program = load_program(ROOT, PROGRAM)
    runner = strategy.load_runner(program, ROOT)
    assert runner is not None, f"{PROGRAM} no longer opts into a strategy"
    rows = [measure(program, runner, n, args.samples, args.seed) for n in SIZES]
    print_report(rows, args.samples)


if __name__ == "__main__":
    main()
