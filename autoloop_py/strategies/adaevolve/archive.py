"""AdaEvolve's quality-diversity archive: membership, code distance, novelty, admission and sampling (§2.2).

An island's archive is read from the Population: its scored entries whose `- **Island**: k · **Mode**: … ·
**Archive**: admitted` bullet says so (entries without the bullet count when scored), in stored (id)
order, which breaks every tie.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from typing import Iterable, Sequence

from autoloop_py.program.objectives import Objective
from autoloop_py.state.population import Candidate, oriented
from autoloop_py.strategies import pareto
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.base import UniformSource

Scored = tuple[Candidate, float]
BALANCED_SPLIT = 0.5
NOVELTY_FLOOR = 0.001
SIBLINGS = 5

# The code distance's regular expressions, as the reference `CodeDiversity` has them (ASCII classes, unanchored).
_TOKEN_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*|[0-9]+\.?[0-9]*")
_IMPORT_RE = re.compile(r"(?:from\s+(\S+)\s+)?import\s+(\S+)")
_FUNC_RE = re.compile(r"def\s+([a-zA-Z_][a-zA-Z0-9_]*)\s*\(")
_CLASS_RE = re.compile(r"class\s+([a-zA-Z_][a-zA-Z0-9_]*)\s*[:\(]")
_CALL_RE = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*(?:\.[a-zA-Z_][a-zA-Z0-9_]*)+)\s*\(")
# Substring tests, not word matches: `therefor e` sets the `for` flag in the reference too.
_FLAGS = (
    ("for_loop", ("for ",)),
    ("while_loop", ("while ",)),
    ("try_except", ("try:", "try :")),
    ("context_manager", ("with ",)),
    ("generator", ("yield ",)),
    ("async", ("async ", "await ")),
    ("lambda", ("lambda ",)),
)


@dataclass(frozen=True)
class Weights:
    """An island's elite-score weights.

    Attributes:
      fitness: the fitness weight (fitness + Pareto in scalar mode).
      novelty: the novelty weight.
      elite_ratio: the protected share of the archive.
      pareto: the Pareto-objectives weight (`pareto_objectives_weight`; used only with objectives).
    """

    fitness: float
    novelty: float
    elite_ratio: float
    pareto: float = 0.0


@dataclass(frozen=True)
class Admission:
    """Whether a program enters a full archive, and whom it evicts.

    Attributes:
      admitted: it enters.
      evicted: the member it replaces (None under capacity or when rejected).
      rival: the unprotected member nearest to it that it was compared with (None under capacity).
      child_elite: its elite score (None under capacity).
      rival_elite: the rival's elite score (None under capacity).
    """

    admitted: bool
    evicted: Candidate | None = None
    rival: Candidate | None = None
    child_elite: float | None = None
    rival_elite: float | None = None


# ---------------------------------------------------------------- archive bullets

_ISLAND_BULLET = "Island"
_MIGRATED = "Migrated from"
_COPIED = "Copied from"
_BULLET_RE = re.compile(
    r"^(\d+)\s*·\s*\*\*Mode\*\*:\s*([\w-]+)\s*·\s*\*\*Archive\*\*:\s*(admitted|rejected|evicted@-?\d+)$", re.IGNORECASE
)


def archive_bullets(island: int, mode: str, archive: str, origin: tuple[str, int, int] | None = None
                    ) -> tuple[tuple[str, str], ...]:
    """Returns a candidate's AdaEvolve bullets: island, mode and archive status, and where a copy came from."""
    bullets = [(_ISLAND_BULLET, f"{island} · **Mode**: {mode} · **Archive**: {archive}")]
    if origin is not None:
        label, source_island, source_id = origin
        bullets.append((label, f"island {source_island} (#{source_id})"))
    return tuple(bullets)


def archive_status(candidate: Candidate) -> str | None:
    """Returns admitted, rejected or evicted@<t> from the candidate's Island bullet (None without one)."""
    for label, value in candidate.extra:
        found = _BULLET_RE.match(value.strip()) if label == _ISLAND_BULLET else None
        if found:
            return found.group(3).lower()
    return None


def is_copy(candidate: Candidate) -> bool:
    """Returns whether the candidate is a migrant, seed or spawn copy of another program."""
    return any(label in (_MIGRATED, _COPIED) for label, _ in candidate.extra)


def with_archive_status(candidate: Candidate, status: str) -> Candidate:
    """Returns the candidate with its Island bullet's archive status replaced (added when it has none)."""
    extra = list(candidate.extra)
    for index, (label, value) in enumerate(extra):
        found = _BULLET_RE.match(value.strip()) if label == _ISLAND_BULLET else None
        if found:
            extra[index] = (label, f"{found.group(1)} · **Mode**: {found.group(2)} · **Archive**: {status}")
            return replace(candidate, extra=tuple(extra), raw=None)
    island = candidate.island if candidate.island is not None else 0
    return replace(candidate, extra=(*archive_bullets(island, candidate.operator, status), *extra), raw=None)


def in_archive(candidate: Candidate, direction: str) -> bool:
    """Returns whether the candidate is in its island's archive: admitted and scored (no bullet: scored)."""
    if candidate.island is None or oriented(candidate.fitness, direction) is None:
        return False
    status = archive_status(candidate)
    return status is None or status == "admitted"


# ---------------------------------------------------------------- members


def archive_of(population: Iterable[Candidate], island: int | None, direction: str) -> list[Scored]:
    """Returns an island's archive (all islands' when island is None) as (member, oriented f), by id."""
    members = [c for c in population if in_archive(c, direction) and (island is None or c.island == island)]
    return [(c, _f(c, direction)) for c in sorted(members, key=lambda c: c.id)]


def ranked(members: Sequence[Scored]) -> list[Scored]:
    """Returns members best first; ties keep stored order."""
    return sorted(members, key=lambda s: -s[1])


def _f(candidate: Candidate, direction: str) -> float:
    value = oriented(candidate.fitness, direction)
    return -math.inf if value is None else value


def island_weights(index: int, preset: str, config: AdaEvolveConfig) -> Weights:
    """Returns the weights of an island: the config's for a starting island, its preset's for a spawned one."""
    found = config.preset(preset) if index >= config.num_islands else None
    if config.objectives:
        # With Pareto objectives the reference weighs fitness alone and adds pareto_objectives_weight times the
        # Pareto percentile (a preset's own Pareto weight is then unused).
        fitness, novelty, ratio = ((config.fitness_weight, config.novelty_weight, config.archive_elite_ratio)
                                   if found is None else (found.fitness, found.novelty, found.elite_ratio))
        return Weights(fitness, novelty, ratio, config.pareto_objectives_weight)
    if found is None:
        return Weights(config.fitness_weight + config.pareto_weight, config.novelty_weight, config.archive_elite_ratio)
    return Weights(found.fitness + found.pareto, found.novelty, found.elite_ratio)


# ---------------------------------------------------------------- pool sizes (A10)


def exploit_pool_size(n: int) -> int:
    """Returns the top-quartile pool exploitation samples from: max(1, ⌊N/4⌋)."""
    return max(1, n // 4)


def balanced_pool_size(n: int) -> int:
    """Returns the top pool of the balanced mode's fitness half: max(1, min(10, ⌊N/5⌋))."""
    return max(1, min(10, n // 5))


def protected_count(n: int, ratio: float) -> int:
    """Returns how many top-elite members are protected: max(1, ⌊N·ratio⌋), computed exactly."""
    return max(1, math.floor(n * Fraction(repr(ratio))))


def context_split(m: int, ratio: float) -> tuple[int, int]:
    """Returns (local, global) context counts: local = max(1, ⌊ratio·m⌋), global = m − local (0, 0 for m = 0)."""
    if m <= 0:
        return 0, 0
    local = min(m, max(1, math.floor(m * Fraction(repr(ratio)))))
    return local, m - local


def local_pool_size(local: int, n: int) -> int:
    """Returns the island's top pool the local context is drawn from: max(2·local, ⌊N/2⌋)."""
    return max(2 * local, n // 2)


# ---------------------------------------------------------------- distance and novelty


@dataclass(frozen=True)
class _Features:
    tokens: frozenset[str]
    structure: frozenset[str]
    length: int


@lru_cache(maxsize=4096)
def _features(code: str) -> _Features:
    tokens = frozenset(t for t in _TOKEN_RE.findall(code) if len(t) >= 2)
    structure: set[str] = set()
    for module, name in _IMPORT_RE.findall(code):
        if module:
            structure.add(f"import:{module}")
        structure.add(f"import:{name.split('.')[0]}")
    structure |= {f"func:{name}" for name in _FUNC_RE.findall(code)}
    structure |= {f"class:{name}" for name in _CLASS_RE.findall(code)}
    structure |= {f"call:{name}" for name in _CALL_RE.findall(code)}
    structure |= {f"pattern:{name}" for name, needles in _FLAGS if any(n in code for n in needles)}
    return _Features(tokens, frozenset(structure), len(code))


def _jaccard_distance(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return 1.0 - len(a & b) / len(union) if union else 0.0


def code_distance(a: str, b: str) -> float:
    """Returns d = 0.5·token Jaccard + 0.3·structure Jaccard + 0.2·length gap (0 if equal), as CodeDiversity.

    Tokens are identifiers and numbers (`0.95`) of at least 2 characters; structure is imports (the `from` module
    and the first segment of the imported name), defs, classes, dotted calls and one flag per construct found
    as a substring (`for `, `while `, `try:`, `with `, `yield `, `async `/`await `, `lambda `).
    """
    if a == b:
        return 0.0
    fa, fb = _features(a), _features(b)
    gap = abs(fa.length - fb.length) / max(fa.length, fb.length, 1)
    # Summed in the reference's order so that the value matches it to the last bit.
    return (_jaccard_distance(fa.tokens, fb.tokens) * 0.5 + _jaccard_distance(fa.structure, fb.structure) * 0.3
            + gap * 0.2)


def novelty(code: str, others: Sequence[str], k: int) -> float:
    """Returns the mean of the k smallest distances from code to the others; 1.0 when there are none."""
    if not others:
        return 1.0
    nearest = sorted(code_distance(code, other) for other in others)[: max(1, k)]
    return sum(nearest) / len(nearest)


def member_novelties(members: Sequence[Scored], k: int) -> list[float]:
    """Returns each member's novelty against the other members."""
    codes = [_code(c) for c, _ in members]
    return [novelty(code, codes[:i] + codes[i + 1 :], k) for i, code in enumerate(codes)]


def _code(candidate: Candidate) -> str:
    return candidate.code or ""


# ---------------------------------------------------------------- admission


def _fit_pct(rank: int, n: int) -> float:
    return 1.0 - rank / (n - 1) if n > 1 else 1.0


def child_fit_pct(above: int, n: int) -> float:
    """Returns a newcomer's fitness percentile: 1 − above/(N−1) clamped to [0, 1] (N = 1: 1 if none above, else 0).

    As the reference `unified_archive.py`: a newcomer worse than every member gets 0, not a negative share, which
    with a novelty weight above 0 could otherwise lose it a comparison it wins in the reference.
    """
    if n <= 1:
        return 1.0 if above == 0 else 0.0
    return max(0.0, min(1.0, 1.0 - above / (n - 1)))


def novelty_pct(value: float, novelties: Sequence[float]) -> float:
    """Returns the share of novelties strictly below value: lower/N, a share of its own before any weight multiplies
    it, as the reference computes it (w·(lower/N) and (w·lower)/N differ in the last bit, which can flip a tie)."""
    return sum(v < value for v in novelties) / len(novelties)


def elite_scores(scores: Sequence[float], novelties: Sequence[float], weights: Weights,
                 pareto_pcts: Sequence[float] = ()) -> list[float]:
    """Returns w_fit·(1 − rank/(N−1)) + w_nov·nov_pct (+ w_par·Pareto share) per member; rank 0 is the best."""
    n = len(scores)
    order = sorted(range(n), key=lambda i: -scores[i])
    rank = {i: r for r, i in enumerate(order)}
    return [
        weights.fitness * _fit_pct(rank[i], n) + weights.novelty * novelty_pct(novelties[i], novelties)
        + (weights.pareto * pareto_pcts[i] if pareto_pcts else 0.0)
        for i in range(n)
    ]


def admit(code: str, f: float, members: Sequence[Scored], capacity: int, weights: Weights, k: int,
          objectives: Sequence[Objective] = (), vector: Sequence[float] | None = None) -> Admission:
    """Returns whether a program with this code and fitness enters the archive (crowding at capacity, A9).

    With objectives, each member's vector is read from its Objectives bullet (`vector` is the newcomer's): the
    elite score adds the Pareto percentile, and the members on the archive's front are protected too.
    """
    if len(members) < capacity:
        return Admission(True)
    n = len(members)
    scores = [score for _, score in members]
    novelties = member_novelties(members, k)
    vectors = [pareto.vector_of(c, objectives) for c, _ in members] if objectives else []
    elite = elite_scores(scores, novelties, weights, pareto.pareto_percentiles(vectors) if vectors else ())
    protected = set(sorted(range(n), key=lambda i: -elite[i])[: protected_count(n, weights.elite_ratio)])
    protected.add(max(range(n), key=lambda i: (scores[i], -i)))
    protected |= {i for i, rank in enumerate(pareto.front_ranks(vectors)) if rank == 0}
    open_ = [i for i in range(n) if i not in protected]
    if not open_:
        return Admission(False)
    rival = min(open_, key=lambda i: (code_distance(code, _code(members[i][0])), i))
    child_novelty = novelty(code, [_code(c) for c, _ in members], k)
    child = weights.fitness * child_fit_pct(sum(score > f for score in scores), n)
    child += weights.novelty * novelty_pct(child_novelty, novelties)
    if vectors:
        child += weights.pareto * pareto.newcomer_percentile(vector or (0.0,) * len(objectives), vectors)
    winner = child > elite[rival]
    return Admission(winner, members[rival][0] if winner else None, members[rival][0], child, elite[rival])


# ---------------------------------------------------------------- sampling (§2.2 step 2)


def _uniform(items: Sequence[Candidate], u: float) -> Candidate:
    return items[min(int(u * len(items)), len(items) - 1)]


def roulette(weights: Sequence[float], u: float) -> int:
    """Returns the index whose cumulative-weight interval holds u·total."""
    target, total = u * sum(weights), 0.0
    for index, weight in enumerate(weights):
        total += weight
        if target < total:
            return index
    return len(weights) - 1


def select_parent(mode: str, members: Sequence[Scored], config: AdaEvolveConfig, rng: UniformSource) -> Candidate:
    """Returns the parent a mode samples from a non-empty archive (§2.2 step 2)."""
    best_first = [c for c, _ in ranked(members)]
    if mode == "exploitation":
        return _uniform(best_first[: exploit_pool_size(len(members))], rng.random())
    if mode == "balanced" and rng.random() < BALANCED_SPLIT:
        return _uniform(best_first[: balanced_pool_size(len(members))], rng.random())
    weights = [max(value, NOVELTY_FLOOR) for value in member_novelties(members, config.k_neighbors)]
    return members[roulette(weights, rng.random())][0]


def context_programs(parent: Candidate, island: Sequence[Scored], everyone: Sequence[Scored], config: AdaEvolveConfig
                     ) -> tuple[tuple[Candidate, ...], tuple[Candidate, ...]]:
    """Returns (local, global) context: the island's most distant from the parent, and the global top."""
    local_n, global_n = context_split(config.num_context_programs, config.local_context_program_ratio)
    pool = [c for c, _ in ranked(island)[: local_pool_size(local_n, len(island))] if c.id != parent.id]
    far = sorted(pool, key=lambda c: -code_distance(parent.code or "", c.code or ""))
    top = [c for c, _ in ranked(everyone) if c.id != parent.id]
    return tuple(far[:local_n]), tuple(top[:global_n])


def siblings(parent: Candidate, population: Sequence[Candidate], island: int) -> tuple[Candidate, ...]:
    """Returns the parent's last 5 children on the island (copies excluded), newest first."""
    children = [c for c in population if c.island == island and c.parents[:1] == (parent.id,) and not is_copy(c)]
    return tuple(sorted(children, key=lambda c: c.id, reverse=True)[:SIBLINGS])
