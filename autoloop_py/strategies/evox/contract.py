"""The EvoX strategy contract: the read-only candidate record and the base class evolved strategies subclass.

This module is imported inside the EvoX sandbox worker, so it uses the standard library only.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping

DIVERGE = "diverge"
REFINE = "refine"
LABELS = ("", DIVERGE, REFINE)

ParentDict = dict[str, "Genome"]
ContextDict = dict[str, list["Genome"]]
Choice = tuple[list[tuple[str, int]], list[tuple[str, list[int]]]]


@dataclass(frozen=True)
class Genome:
    """What a strategy sees of one candidate; read-only, and unhashable on purpose (key by id).

    Attributes:
      id: the candidate's id (monotonic from 1).
      code: the candidate's source text.
      metrics: the primary metric under "score" (oriented: higher is better) plus any others; with Pareto
        objectives, each objective's raw value and "front" (0: no other genome dominates it). A failed
        evaluation has no numeric "score". Wrapped in a read-only mapping.
      parent_id: the id of the candidate it was derived from, or None for a root.
      iteration: the iteration that produced it (replay order).
      label: the label its parent was sampled under: "", "diverge" or "refine".
      context_ids: the ids of the candidates shown as context when it was produced.
    """

    id: int
    code: str
    metrics: Mapping[str, float | str]
    parent_id: int | None
    iteration: int
    label: str = ""
    context_ids: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        # A private copy behind a read-only view: neither the caller nor the strategy can change scores.
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))
        object.__setattr__(self, "context_ids", tuple(self.context_ids))


def score_of(genome: Genome) -> float | None:
    """Returns the genome's oriented score, or None when it has no finite numeric score."""
    value = genome.metrics.get("score")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


class StrategyBase:
    """Base class of every EvoX strategy: stores genomes by id, tracks the best, and samples.

    Subclasses are named `EvolvedStrategy`, take all randomness from `self.rng`, track progress in
    `add()` and return from `sample(num_context)` a pair (parent, context): parent maps one label
    ("", DIVERGE_LABEL or REFINE_LABEL) to exactly one genome, context maps "" to a list of others.
    """

    DIVERGE_LABEL = DIVERGE
    REFINE_LABEL = REFINE

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.genomes: dict[int, Genome] = {}
        self.best_id: int | None = None

    def add(self, genome: Genome) -> int:
        """Stores a genome, updates the best, and returns its id."""
        self.genomes[genome.id] = genome
        self._update_best(genome)
        return genome.id

    def sample(self, num_context: int = 4) -> tuple[ParentDict, ContextDict]:
        """Returns a uniformly drawn parent (label "") and up to num_context other genomes as context."""
        ids = sorted(self.genomes)
        parent_id = self.rng.choice(ids)
        others = [i for i in ids if i != parent_id]
        chosen = self.rng.sample(others, min(max(num_context, 0), len(others)))
        return {"": self.genomes[parent_id]}, {"": [self.genomes[i] for i in chosen]}

    def pareto_front(self) -> list[Genome]:
        """Returns the stored genomes on the program's Pareto front (metrics["front"] == 0), by id; [] without one."""
        return [self.genomes[i] for i in sorted(self.genomes) if self.genomes[i].metrics.get("front") == 0]

    def get(self, genome_id: int) -> Genome | None:
        """Returns the stored genome with this id, or None."""
        return self.genomes.get(genome_id)

    def get_best(self) -> Genome | None:
        """Returns the stored genome with the highest score (the first added on ties), or None."""
        if self.best_id not in self.genomes:
            self.best_id = None
            for genome in self.genomes.values():
                self._update_best(genome)
        return self.genomes.get(self.best_id) if self.best_id is not None else None

    def _update_best(self, genome: Genome) -> None:
        """Makes genome the best when its score beats the current best's."""
        score = score_of(genome)
        if score is None:
            return
        best = self.genomes.get(self.best_id) if self.best_id is not None else None
        best_score = score_of(best) if best is not None else None
        if best_score is None or score > best_score:
            self.best_id = genome.id

    @staticmethod
    def score(genome: Genome) -> float | None:
        """Returns the genome's oriented score, or None when it failed or has none."""
        return score_of(genome)


def choice_problem(choice: Choice, known: Iterable[int], num_context: int) -> str | None:
    """Returns what is wrong with one sample (parent and context as label/id pairs), or None."""
    parent, context = choice
    known_ids = set(known)
    if len(parent) != 1:
        return f"sample() must return exactly one parent, got {len(parent)}"
    label, parent_id = parent[0]
    if label not in LABELS:
        return f"the parent label {label!r} is not one of '', DIVERGE_LABEL or REFINE_LABEL"
    if parent_id not in known_ids:
        return f"the parent #{parent_id} is not a stored genome"
    ids = [genome_id for _, group in context for genome_id in group if genome_id != parent_id]
    return _context_problem(context, ids, known_ids, num_context)


def _context_problem(
    context: list[tuple[str, list[int]]], ids: list[int], known: set[int], num_context: int
) -> str | None:
    """Returns what is wrong with the context of a sample, or None."""
    labels = sorted({label for label, _ in context if label != ""})
    if labels:
        return f"context labels must be \"\", got {', '.join(repr(label) for label in labels)}"
    unknown = sorted({genome_id for genome_id in ids if genome_id not in known})
    if unknown:
        return f"the context holds ids that are not stored genomes: {', '.join(f'#{i}' for i in unknown)}"
    repeated = sorted({genome_id for genome_id in ids if ids.count(genome_id) > 1})
    if repeated:
        return f"the context repeats {', '.join(f'#{i}' for i in repeated)}"
    limit = min(max(num_context, 0), len(known))
    if len(ids) > limit:
        return f"the context holds {len(ids)} genomes; at most {limit} (num_context={num_context}) are allowed"
    return None


def validation_genomes() -> list[Genome]:
    """Returns the synthetic genomes the validator replays: 11 scored ones and 2 failed ones."""
    code = "def solve():\n    return {}\n"
    genomes = [Genome(1, code.format(0), {"score": 0.5, "runtime": 1.25}, None, 0)]
    for i in range(1, 11):
        label = LABELS[i % 3]
        context = (i - 1,) if i > 1 else ()
        metrics = {"score": i / 10, "runtime": 1.0 + i}
        genomes.append(Genome(i + 1, code.format(i), metrics, 1 + (i // 2), i, label, context))
    genomes.append(Genome(12, "def solve(:\n", {"error": "SyntaxError: invalid syntax"}, 11, 11, REFINE))
    genomes.append(Genome(13, code.format(13), {"score": "N/A", "error": "timed out after 360 s"}, 2, 12))
    return genomes
