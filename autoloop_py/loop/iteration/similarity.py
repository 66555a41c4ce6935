"""Similarity: under `novelty: embedding`, whether a candidate is too close to an evaluated one to evaluate.

The candidate and the evaluated candidates it is compared with (its island's Population members under a
strategy; the parent's lineage and the newest evaluated rows in the default flow) are embedded, by the
`role: embedding` entry of `models:` or, without one, by local code vectors (analysis/code_vector.py);
one whose cosine similarity to the nearest lies above `novelty-threshold` is not evaluated, unless a
`role: judge` entry, asked whether it is meaningfully different, says it is. Only the evolved region
(the first EVOLVE-BLOCK, else the whole file) is compared.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from autoloop_py.analysis import code_vector
from autoloop_py.loop.iteration.lineage_store import TraceReader
from autoloop_py.loop.iteration.novelty import DEFAULT_SIMILARITY, SIMILAR, NoveltyVerdict
from autoloop_py.program import models
from autoloop_py.program.model import Program
from autoloop_py.program.models import ModelSpec
from autoloop_py.program.regions import evolved_code
from autoloop_py.proposers import novelty_calls
from autoloop_py.proposers.base import Usage
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError
from autoloop_py.proposers.model_calls import ModelCalls
from autoloop_py.state import population as pop
from autoloop_py.state.untrusted_text import plain

log = logging.getLogger(__name__)
LOCAL = "local"


@dataclass(frozen=True)
class Embedder:
    """How this iteration embeds and judges candidates.

    Attributes:
      model: the `role: embedding` entry (None: local code vectors).
      judge: the `role: judge` entry (None: the similarity alone decides).
      limits: the bounds of each model call.
      spent: gets each model call's usage (the iteration's record counts it in its spend).
      calls: where model calls are made (None: in this process).
    """

    model: ModelSpec | None = None
    judge: ModelSpec | None = None
    limits: CallLimits = CallLimits()
    spent: list[Usage] = field(default_factory=list)
    calls: ModelCalls | None = None


def embedder_for(program: Program, limits: CallLimits, spent: list[Usage], calls: ModelCalls | None) -> Embedder:
    """Returns the program's embedder: its `role: embedding` and `role: judge` entries, if any."""
    specs = program.config.models
    return Embedder(models.with_role(specs, models.EMBEDDING), models.with_role(specs, models.JUDGE), limits, spent,
                    calls)


def threshold_of(program: Program) -> float:
    """Returns the similarity above which a candidate is not evaluated."""
    return program.config.novelty_threshold or DEFAULT_SIMILARITY


def screen(
    source: str, neighbours: Mapping[str, str], threshold: float, embedder: Embedder, language: str = "python"
) -> NoveltyVerdict | None:
    """Returns the similar verdict when the candidate's nearest neighbour lies above threshold (and no judge
    says it differs), else None. neighbours: {id: source} of evaluated candidates."""
    if not neighbours:
        return None
    code = evolved_code(source)
    others = {name: evolved_code(text) for name, text in neighbours.items()}
    vectors, used = _vectors([code, *others.values()], embedder, language)
    found = code_vector.nearest(vectors[0], dict(zip(others, vectors[1:])))
    if found is None or found[1] <= threshold:
        return None
    nearest, similarity = found
    judged = None
    if embedder.judge is not None:
        try:
            same, judged = novelty_calls.judge_same(embedder.judge, code, others[nearest], language,
                                                    limits=embedder.limits, spent=embedder.spent, models=embedder.calls)
        except ModelCallError as err:
            log.warning("the novelty judge %s failed (%s); the candidate is evaluated", embedder.judge.name, err)
            return None
        if not same:
            log.info("similarity %.4f to %s, but the judge says: %s; evaluating it", similarity, nearest, judged)
            return None
    return NoveltyVerdict(SIMILAR, of=nearest, similarity=round(similarity, 6), threshold=threshold, embedder=used,
                          judged=plain(judged) if judged is not None else None)


def population_neighbours(population: pop.Population, island: int | None) -> dict[str, str]:
    """Returns {id: code} of the Population's scored candidates on the island (every island's when None)."""
    return {str(c.id): c.code for c in population.candidates
            if c.code is not None and c.fitness is not None and c.status != "error"
            and (island is None or c.island == island)}


def trace_neighbours(reader: TraceReader, parent_id: str | None) -> dict[str, str]:
    """Returns {id: source} of the parent's lineage and the newest rows, evaluated and scored."""
    return reader.evaluated_sources(reader.lineage(parent_id))


def _vectors(texts: Sequence[str], embedder: Embedder, language: str) -> tuple[list[Sequence[float]], str]:
    """Returns the texts' vectors and what made them: the embedding model, or local code vectors when it failed."""
    if embedder.model is not None:
        try:
            return list(novelty_calls.embed(embedder.model, texts, limits=embedder.limits, spent=embedder.spent,
                                            models=embedder.calls)), embedder.model.name
        except ModelCallError as err:
            log.warning("the embedding model %s failed (%s); local code vectors instead", embedder.model.name, err)
    return [code_vector.vector(text, language) for text in texts], LOCAL
