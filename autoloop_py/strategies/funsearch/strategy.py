"""FunSearch: islands of score-signature clusters, cyclic-temperature softmax sampling, dedup and resets (spec §4).

Pure functions of the parsed state, the Population and a uniform source: `decide` picks the island
and the earlier versions a prompt shows, `record` does the bookkeeping once the child is evaluated.
Every random choice is made from an explicit uniform, recorded in the decision, so a test can inject it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from autoloop_py.state.population import Candidate, format_fitness
from autoloop_py.strategies.base import DrawRecorder
from autoloop_py.strategies.funsearch.code import function_length
from autoloop_py.strategies.funsearch.config import FunSearchConfig
from autoloop_py.strategies.funsearch.islands import (
    UniformSource,
    is_duplicate,
    normal_noise,
    oriented,
    register,
    reset_islands,
    seeded,
    uniform_index,
)
from autoloop_py.strategies.funsearch.markdown import parse_state_block, render_state_block
from autoloop_py.strategies.funsearch.state import (
    Cluster,
    FunSearchState,
    Island,
    Member,
    Signature,
    format_signature,
    hash_token,
)
from autoloop_py.strategies.slots import Slot, slot_island

__all__ = [
    "DISPOSITIONS",
    "SAMPLE",
    "SEED",
    "FunSearchDecision",
    "FunSearchState",
    "Outcome",
    "Pick",
    "candidate_bullets",
    "choose_clusters",
    "classify",
    "decide",
    "describe",
    "is_duplicate",
    "length_probabilities",
    "normalized_scores",
    "normal_noise",
    "parse_state_block",
    "record",
    "reduce_scores",
    "register",
    "render_state_block",
    "reset_islands",
    "signature_of",
    "softmax",
    "weighted_index",
]

logger = logging.getLogger(__name__)

SAMPLE, SEED = "sample", "seed"
DISPOSITIONS = ("stored", "duplicate", "failed", "version-mismatch")
_COUNTERS = {"duplicate": "duplicates", "failed": "execution_failed", "version-mismatch": "version_mismatch"}
MIN_PROBABILITY = 1e-6  # Fork: only clusters above this are offered
MIN_TEMPERATURE = 1e-6  # Fork: below this the cluster choice turns uniform
SHRINK = 0.9  # Fork: T shrinks by this factor until some cluster is offered
LENGTH_EPSILON = 1e-6



@dataclass(frozen=True)
class Pick:
    """An earlier version chosen for the prompt.

    Attributes:
      candidate: the Population entry whose function is shown.
      signature: its cluster's signature.
      score: its cluster's raw score.
      cluster_probability: the probability its cluster had when drawn.
      member_probability: its probability within the cluster (shorter is likelier).
    """

    candidate: Candidate
    signature: Signature
    score: float
    cluster_probability: float
    member_probability: float


@dataclass(frozen=True)
class FunSearchDecision:
    """What one FunSearch iteration does, computed before any LLM call.

    Attributes:
      mode: `sample` (prompt with earlier versions) or `seed` (evaluate the Target as it is; it founds
        every island).
      reason: the island, temperature and clusters drawn, for the history.
      island: the island the child is registered on (None for the seed: all islands).
      version: the island's version when prompted (a reset since then makes the child stale).
      temperature: the cluster-sampling temperature used (None for the seed).
      picks: the versions to show, by cluster score ascending (v0 first).
      uniforms: the draws consumed, in order.
    """

    mode: str
    reason: str
    island: int | None = None
    version: int = 0
    temperature: float | None = None
    picks: tuple[Pick, ...] = ()
    uniforms: tuple[float, ...] = ()

    @property
    def parents(self) -> tuple[Candidate, ...]:
        """Returns the candidates shown, v0 first."""
        return tuple(p.candidate for p in self.picks)


@dataclass(frozen=True)
class Outcome:
    """What registration makes of an evaluated child.

    Attributes:
      disposition: stored | duplicate | failed | version-mismatch.
      reason: why, in a sentence ('' when stored).
      signature: its per-test scores in sorted test order (None when failed).
      score: its raw reduced score (None when failed).
      output_hash: the evaluator's output hash as a table token, or None.
      length: len() of its function's source.
    """

    disposition: str
    reason: str = ""
    signature: Signature | None = None
    score: float | None = None
    output_hash: str | None = None
    length: int = 0


# ---------------------------------------------------------------- numbers


def softmax(logits: Sequence[float], temperature: float) -> list[float]:
    """Returns the max-shifted softmax of logits/T, the argmax entry patched so the sum is 1 (Ref `_softmax`)."""
    if not all(math.isfinite(x) for x in logits) or not logits:
        raise ValueError(f"softmax needs finite logits, got {list(logits)!r}")
    top = max(logits)
    # Shifting before dividing keeps even huge scores or a tiny T from overflowing (F6: 512 at T = 0.1).
    weights = [math.exp((x - top) / temperature) for x in logits]
    total = sum(weights)
    probabilities = [w / total for w in weights]
    best = probabilities.index(max(probabilities))
    probabilities[best] = 1 - sum(p for i, p in enumerate(probabilities) if i != best)
    return probabilities


def normalized_scores(scores: Sequence[float], normalization: str = "range") -> list[float]:
    """Returns the scores the cluster softmax reads: scaled to [0, 1] by their range (`range`), or raw (`none`).

    Raw scores spanning tens of units at T = 0.1 leave one cluster above 1e-6, so a prompt shows one version.
    """
    if normalization == "none":
        return list(scores)
    # Halved first (exact in binary floats): scores near ±1.8e308 would overflow their difference to inf.
    low, spread = min(scores) / 2, max(scores) / 2 - min(scores) / 2
    return [(score / 2 - low) / spread if spread > 0 else 0.0 for score in scores]


def length_probabilities(lengths: Sequence[int], normalization: str = "range") -> list[float]:
    """Returns softmax(−ℓ̃) over a cluster's lengths, ℓ̃ = (ℓ − min)/(max − min + ε) (`range`) or /(max + ε) (`max`)."""
    low, high = min(lengths), max(lengths)
    spread = (high - low if normalization == "range" else high) + LENGTH_EPSILON
    return softmax([-(length - low) / spread for length in lengths], 1.0)


def weighted_index(probabilities: Sequence[float], u: float) -> int:
    """Returns the first index whose cumulative probability exceeds u (the last possible one on rounding)."""
    total = 0.0
    for index, probability in enumerate(probabilities):
        total += probability
        if u < total:
            return index
    return max(i for i, p in enumerate(probabilities) if p > 0)


# ---------------------------------------------------------------- deciding


def decide(
    state: FunSearchState, population: Sequence[Candidate], config: FunSearchConfig, rng: UniformSource,
    slot: Slot | None = None,
) -> FunSearchDecision:
    """Returns the island and the earlier versions to prompt with (§4.2 steps 1–6), or the seed decision.

    Slot i of a parallel tick takes island i mod n instead of a uniform draw (the next island that has
    programs to offer, when that one has none).
    """
    draws = DrawRecorder(rng)
    by_id = {c.id: c for c in population}
    offered = [(island, clusters) for island in state.islands if (clusters := _offered(island, by_id))]
    if not offered:
        return _seed_decision(state, config)
    if slot is not None and slot.parallel:
        home = slot_island(slot, [island.index for island in state.islands])
        island, clusters = min(offered, key=lambda pair: (pair[0].index - home) % len(state.islands))
    else:
        island, clusters = offered[uniform_index(draws.random(), len(offered))]
    temperature = config.temperature(island.num_programs)
    scores = normalized_scores([oriented(c.score, config) for c in clusters], config.score_normalization)
    chosen, probabilities, used = choose_clusters(scores, temperature, config, draws)
    picks = [_pick_member(clusters[i], probabilities[i], by_id, config, draws) for i in chosen]
    picks.sort(key=lambda p: oriented(p.score, config))
    among = f"slot {slot}'s island, i mod n" if slot is not None and slot.parallel else None
    reason = _reason(island, len(offered), len(state.islands), used, picks, among)
    logger.debug("funsearch decided: %s", reason)
    return FunSearchDecision(SAMPLE, reason, island.index, island.version, used, tuple(picks), tuple(draws.draws))


def choose_clusters(
    scores: Sequence[float], temperature: float, config: FunSearchConfig, rng: UniformSource
) -> tuple[list[int], list[float], float]:
    """Returns (chosen cluster indices, the cluster probabilities, the temperature used) (§4.2 steps 3–4)."""
    if config.cluster_sampling == "with_replacement":
        probabilities = softmax(scores, temperature)
        count = min(len(scores), config.functions_per_prompt)
        return [weighted_index(probabilities, rng.random()) for _ in range(count)], probabilities, temperature
    probabilities, used = _offered_probabilities(scores, temperature)
    remaining = [i for i, p in enumerate(probabilities) if p > MIN_PROBABILITY] or list(range(len(scores)))
    chosen: list[int] = []
    for _ in range(min(len(remaining), config.functions_per_prompt)):
        weights = [probabilities[i] for i in remaining]
        total = sum(weights)
        chosen.append(remaining.pop(weighted_index([w / total for w in weights], rng.random())))
    return chosen, probabilities, used


def _offered_probabilities(scores: Sequence[float], temperature: float) -> tuple[list[float], float]:
    """Returns the Fork's probabilities: T shrinks ×0.9 until a cluster clears 1e-6, uniform below T = 1e-6."""
    used = temperature
    while True:
        probabilities = softmax(scores, used)
        if any(p > MIN_PROBABILITY for p in probabilities):
            return probabilities, used
        used *= SHRINK
        if used < MIN_TEMPERATURE:
            return [1 / len(scores)] * len(scores), used


def _offered(island: Island, by_id: Mapping[int, Candidate]) -> list[Cluster]:
    """Returns the island's clusters cut to the members still in the Population (empty clusters left out)."""
    clusters = []
    for cluster in island.clusters:
        members = tuple(m for m in cluster.members if m.id in by_id)
        if len(members) < len(cluster.members):
            missing = ", ".join(str(m.id) for m in cluster.members if m.id not in by_id)
            logger.debug("island %d: cluster member(s) %s are not in the Population; skipped", island.index, missing)
        if members:
            clusters.append(replace(cluster, members=members))
    return clusters


def _pick_member(
    cluster: Cluster, probability: float, by_id: Mapping[int, Candidate], config: FunSearchConfig, rng: UniformSource
) -> Pick:
    """Returns one member of the cluster, shorter ones likelier (§4.2 step 5)."""
    weights = length_probabilities([m.length for m in cluster.members], config.length_normalization)
    index = weighted_index(weights, rng.random())
    return Pick(by_id[cluster.members[index].id], cluster.signature, cluster.score, probability, weights[index])


def _seed_decision(state: FunSearchState, config: FunSearchConfig) -> FunSearchDecision:
    count = len(state.islands) or config.num_islands
    if state.islands:
        why = "no island has a cluster member left in the Population"
    else:
        why = "no island holds a program yet"
    reason = f"{why}: evaluate the Target as it is and register it on all {count} islands"
    return FunSearchDecision(SEED, reason)


def _reason(
    island: Island, offered: int, total: int, temperature: float, picks: Sequence[Pick], among: str | None = None
) -> str:
    if among is not None:
        pass
    elif total == 1:
        among = "the only island"
    else:
        among = f"uniform among {offered} of {total} islands" if offered < total else f"uniform among {total} islands"
    shown = ", ".join(
        f"#{p.candidate.id} from {format_signature(p.signature)} (p {p.cluster_probability:.3g})" for p in picks
    )
    return f"island {island.index} ({among}), T = {temperature:.6g}: {shown}"


# ---------------------------------------------------------------- registering


def signature_of(scores: Mapping[Any, float]) -> Signature:
    """Returns the per-test scores in sorted test order (§4.2 step 9; F7: {(6,1): 10, (7,1): 16} → (10, 16))."""
    return tuple(float(scores[key]) for key in sorted(scores))


def reduce_scores(scores: Mapping[Any, float], reduction: str, metric: float | None = None) -> float | None:
    """Returns a cluster score: the last test as listed (Ref), the average, or the primary metric."""
    if reduction == "metric":
        return float(metric) if metric is not None and _finite(metric) else None
    values = [float(v) for v in scores.values()]
    if not values:
        return None
    return values[-1] if reduction == "last" else sum(values) / len(values)


def classify(
    state: FunSearchState,
    decision: FunSearchDecision,
    candidate: Candidate,
    metrics: Mapping[str, Any],
    config: FunSearchConfig,
) -> Outcome:
    """Returns what registration makes of an evaluated child: stored, duplicate, failed or version-mismatch."""
    length = function_length(candidate.code, config.function_to_evolve)
    token = hash_token(metrics.get("output_hash"))
    scored = _scored(candidate, metrics, config)
    if isinstance(scored, str):
        return Outcome("failed", scored, output_hash=token, length=length)
    signature, score = scored
    if decision.mode == SAMPLE:
        island = state.island(decision.island)
        if config.deduplicate and is_duplicate(state, decision.island, token):
            why = f"output hash {token} is already on island {decision.island}"
            return Outcome("duplicate", why, signature, score, token, length)
        if island is None or island.version != decision.version:
            now = "gone" if island is None else f"at version {island.version}"
            why = f"island {decision.island} was reset after the prompt (version {decision.version}, now {now})"
            return Outcome("version-mismatch", why, signature, score, token, length)
    return Outcome("stored", "", signature, score, token, length)


def _scored(candidate: Candidate, metrics: Mapping[str, Any], config: FunSearchConfig) -> tuple[Signature, float] | str:
    """Returns (signature, raw score), or why the child has no usable score (§0 missing fitness, §4.5)."""
    if candidate.status == "error":
        return "the evaluation failed"
    raw = metrics.get("scores")
    if raw is None:
        fitness = candidate.fitness
        if fitness is None or not _finite(fitness):
            return "the evaluator reported no finite metric"
        return (float(fitness),), float(fitness)
    if not isinstance(raw, Mapping):
        return f"`scores` must be an object of named per-test scores, got {type(raw).__name__}"
    # A test whose score is not a finite number failed; the others still make a signature.
    kept = {key: float(value) for key, value in raw.items() if _finite(value)}
    if not kept:
        return "no test produced a finite score"
    score = reduce_scores(kept, config.score_reduction, candidate.fitness)
    if score is None:
        return "the evaluator reported no finite metric"
    return signature_of(kept), score


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def record(
    state: FunSearchState,
    decision: FunSearchDecision,
    candidate: Candidate,
    metrics: Mapping[str, Any],
    config: FunSearchConfig,
    rng: UniformSource,
) -> FunSearchState:
    """Returns the state after registering the evaluated child (its id already assigned) (§4.2 steps 8–10)."""
    draws = DrawRecorder(rng)
    outcome = classify(state, decision, candidate, metrics, config)
    state = replace(state, rng_draws=state.rng_draws + len(decision.uniforms))
    if outcome.disposition != "stored":
        logger.info("funsearch: candidate %d %s: %s", candidate.id, outcome.disposition, outcome.reason)
        name = _COUNTERS[outcome.disposition]
        return replace(state, **{name: getattr(state, name) + 1})
    assert outcome.signature is not None and outcome.score is not None
    member = Member(candidate.id, outcome.length, outcome.output_hash)
    targets = seeded(state, config).islands if decision.mode == SEED else state.islands
    chosen = {i.index for i in targets} if decision.mode == SEED else {decision.island}
    islands = tuple(
        register(i, member, outcome.signature, outcome.score, config) if i.index in chosen else i for i in targets
    )
    state = replace(
        state, islands=islands, stored=state.stored + 1, registrations_since_reset=state.registrations_since_reset + 1
    )
    if state.registrations_since_reset >= config.reset_every_registrations and len(state.islands) >= 2:
        state = reset_islands(state, config, draws, candidate.gen)
    return replace(state, rng_draws=state.rng_draws + len(draws.draws))


# ---------------------------------------------------------------- the Population entry


def candidate_bullets(decision: FunSearchDecision, outcome: Outcome) -> tuple[tuple[str, str], ...]:
    """Returns the FunSearch bullets of a Population entry (§4.7): signature, hash, length, versions, disposition."""
    versions = ", ".join(f"v{i}=#{p.candidate.id}" for i, p in enumerate(decision.picks))
    return (
        ("Signature", format_signature(outcome.signature) if outcome.signature else "—"),
        ("Output hash", outcome.output_hash or "—"),
        ("Length (chars)", str(outcome.length)),
        ("Prompt versions", versions or "—"),
        ("Disposition", outcome.disposition),
    )


def describe(outcome: Outcome) -> str:
    """Returns the outcome as one line for notes: disposition, score and why."""
    score = "" if outcome.score is None else f" with score {format_fitness(outcome.score)}"
    return f"{outcome.disposition}{score}" + (f": {outcome.reason}" if outcome.reason else "")
