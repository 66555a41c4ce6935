"""Similarity: under `novelty: embedding`, whether a candidate is too close to an evaluated one to evaluate.

The candidate and the evaluated candidates it is compared with (its island's Population members under a
strategy; the parent's lineage and the newest evaluated rows in the default flow) are embedded, by the
`role: embedding` entry of `models:` or, without one, by local code vectors (analysis/code_vector.py);
one whose cosine similarity to the nearest lies above `novelty-threshold` is not evaluated, unless a
`role: judge` entry, asked whether it is meaningfully different, says it is. Only the evolved region
(the first EVOLVE-BLOCK, else the whole file) is compared.

The cache: a candidate's vector is kept in its trace row (`metadata.embedding`: what made it, the hash of the code
it is of, the vector packed), so each evaluated candidate is embedded once: later iterations read a neighbour's
vector from its row (a Population copy: its origin's) when the same embedder made it of the same code. A neighbour
whose code changed since (a Population entry edited by hand), one made by another embedder, or one without a kept
vector (rows before the cache) is embedded again; the seed's row keeps its vector as a candidate's does. A row holds
one vector of bounded size (code_vector.MAX_PACKED).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from autoloop_py.analysis import code_vector
from autoloop_py.loop.iteration.lineage_store import TraceReader
from autoloop_py.loop.iteration.novelty import SIMILAR, NoveltyVerdict
from autoloop_py.program import models
from autoloop_py.program.model import Program
from autoloop_py.program.models import ModelSpec
from autoloop_py.program.regions import evolved_code
from autoloop_py.proposers import novelty_calls
from autoloop_py.proposers.base import Usage
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError
from autoloop_py.proposers.model_calls import ModelCalls
from autoloop_py.state import population as pop
from autoloop_py.state.trace import sha256_text
from autoloop_py.state.untrusted_text import plain

log = logging.getLogger(__name__)
LOCAL = "local"
EMBEDDING = "embedding"  # the trace row metadata keeping the candidate's vector


@dataclass(frozen=True)
class Kept:
    """A vector read from a trace row: what made it (`local` or the model's name), the hash of its code, the vector."""

    by: str
    of: str
    vector: code_vector.Vector


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


def screen(
    source: str, neighbours: Mapping[str, str], threshold: float, embedder: Embedder, language: str = "python",
    kept: Mapping[str, Kept] | None = None,
) -> tuple[NoveltyVerdict | None, dict[str, Any]]:
    """Returns (the similar verdict when the candidate's nearest neighbour lies above threshold and no judge says it
    differs, else None; the trace row metadata keeping the candidate's vector). neighbours: {id: source} of evaluated
    candidates; kept: their vectors read from their rows (see stored_vectors)."""
    code = evolved_code(source)
    others = {name: evolved_code(text) for name, text in neighbours.items()}
    mine, vectors, used = _embedded(code, others, kept or {}, embedder, language)
    packed = code_vector.pack(mine)
    row = {EMBEDDING: {"by": used, "of": _hash(code), "vector": packed}} if packed else {}
    found = code_vector.nearest(mine, vectors)
    if found is None or found[1] <= threshold:
        return None, row
    nearest, similarity = found
    judged = None
    if embedder.judge is not None:
        try:
            same, judged = novelty_calls.judge_same(embedder.judge, code, others[nearest], language,
                                                    limits=embedder.limits, spent=embedder.spent, models=embedder.calls)
        except ModelCallError as err:
            log.warning("the novelty judge %s failed (%s); the candidate is evaluated", embedder.judge.name, err)
            return None, row
        if not same:
            log.info("similarity %.4f to %s, but the judge says: %s; evaluating it", similarity, nearest, judged)
            return None, row
    return NoveltyVerdict(SIMILAR, of=nearest, similarity=round(similarity, 6), threshold=threshold, embedder=used,
                          judged=plain(judged) if judged is not None else None), row


def stored_vectors(
    reader: TraceReader, ids: Iterable[str], origins: Mapping[str, str] | None = None,
    unwritten: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Kept]:
    """Returns the vectors the trace rows of these ids keep (a row without a readable one is left out); origins: the
    id a Population copy came from (lineage_store.copy_origins), whose row is read when the copy has none;
    unwritten: the metadata of rows this iteration writes (the seed's, when it measured the baseline)."""
    found = {}
    for name in ids:
        row = reader.row(name) or (reader.row(origins[name]) if origins and name in origins else None)
        metadata = row.extra.get("metadata") if row is not None else (unwritten or {}).get(name)
        data = metadata.get(EMBEDDING) if isinstance(metadata, dict) else None
        vector = code_vector.unpack(data.get("vector")) if isinstance(data, dict) else None
        if vector is not None and isinstance(data, dict):
            found[name] = Kept(str(data.get("by")), str(data.get("of")), vector)
    return found


def population_neighbours(population: pop.Population, island: int | None) -> dict[str, str]:
    """Returns {id: code} of the Population's scored candidates on the island (every island's when None)."""
    return {str(c.id): c.code for c in population.candidates
            if c.code is not None and c.fitness is not None and c.status != "error"
            and (island is None or c.island == island)}


def _embedded(
    code: str, others: Mapping[str, str], kept: Mapping[str, Kept], embedder: Embedder, language: str
) -> tuple[Sequence[float], dict[str, Sequence[float]], str]:
    """Returns (the candidate's vector, the neighbours' by id, what made them): a neighbour's kept vector when this
    embedder made it of the same code, the others embedded in one request with the candidate."""
    by = embedder.model.name if embedder.model is not None else LOCAL
    known = {name: kept[name].vector for name, text in others.items()
             if name in kept and kept[name].by == by and kept[name].of == _hash(text)}
    missing = [name for name in others if name not in known]
    vectors, used = _vectors([code, *(others[name] for name in missing)], embedder, language)
    if used != by and known:  # the model failed: every vector is a local one, the kept ones are not comparable
        return _embedded(code, others, {}, replace(embedder, model=None), language)
    made = dict(zip(missing, vectors[1:]))
    return vectors[0], {name: known[name] if name in known else made[name] for name in others}, used


def _hash(code: str) -> str:
    return sha256_text(code)[:16]


def _vectors(texts: Sequence[str], embedder: Embedder, language: str) -> tuple[list[Sequence[float]], str]:
    """Returns the texts' vectors and what made them: the embedding model, or local code vectors when it failed."""
    if embedder.model is not None:
        try:
            return list(novelty_calls.embed(embedder.model, texts, limits=embedder.limits, spent=embedder.spent,
                                            models=embedder.calls)), embedder.model.name
        except ModelCallError as err:
            log.warning("the embedding model %s failed (%s); local code vectors instead", embedder.model.name, err)
    return [code_vector.vector(text, language) for text in texts], LOCAL
