"""FunSearch islands: a program registered in its signature's cluster, output-hash dedup, resets (§4.2 steps 9–10)."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from statistics import NormalDist
from typing import Any, Sequence

from autoloop_py.state.population import Candidate
from autoloop_py.strategies.base import UniformSource
from autoloop_py.strategies.funsearch.config import FunSearchConfig
from autoloop_py.strategies.funsearch.state import (
    Cluster,
    FunSearchState,
    Island,
    Member,
    Signature,
    hash_token,
    sorted_members,
)

logger = logging.getLogger(__name__)

NOISE_SIGMA = 1e-6  # Ref: the noise that breaks ties between island bests before a reset



def oriented(value: float, config: FunSearchConfig) -> float:
    """Returns a raw score oriented so that higher is better (§0)."""
    return value if config.direction == "higher" else -value


def uniform_index(u: float, count: int) -> int:
    """Returns the index a uniform u picks among count equally likely items."""
    return min(int(u * count), count - 1)


def normal_noise(u: float, sigma: float = NOISE_SIGMA) -> float:
    """Returns the N(0, sigma) quantile of u (u = 0 is nudged inside (0, 1))."""
    tiny = 2.0**-53
    return NormalDist(0.0, sigma).inv_cdf(min(max(u, tiny), 1 - tiny))


def is_duplicate(state: FunSearchState, island: int | None, output_hash: Any) -> bool:
    """Returns whether a program with this output hash is already on the island (False without a hash)."""
    token = hash_token(output_hash)
    found = state.island(island)
    if token is None or found is None:
        return False
    return any(m.output_hash == token for c in found.clusters for m in c.members)


def seeded(state: FunSearchState, config: FunSearchConfig) -> FunSearchState:
    """Returns the state with config.num_islands empty islands when it has none yet (§4.2 Init)."""
    if state.islands:
        return state
    return replace(state, islands=tuple(Island(index) for index in range(config.num_islands)))


def register(island: Island, member: Member, signature: Signature, score: float, config: FunSearchConfig) -> Island:
    """Returns the island with the program added to its signature's cluster (a new cluster scores `score`)."""
    clusters = list(island.clusters)
    at = next((i for i, c in enumerate(clusters) if c.signature == signature), None)
    if at is None:
        clusters.append(Cluster(signature, score, (member,)))
    else:
        clusters[at] = replace(clusters[at], members=sorted_members([*clusters[at].members, member]))
    island = replace(island, clusters=tuple(clusters), num_programs=island.num_programs + 1)
    if _beats_best(island, signature, score, config):
        island = replace(island, best_score=score, best_id=member.id)
    return island


def _beats_best(island: Island, signature: Signature, score: float, config: FunSearchConfig) -> bool:
    """Returns whether score beats the island's best; on a tie the larger signature wins (Fork)."""
    if island.best_score is None:
        return True
    new, old = oriented(score, config), oriented(island.best_score, config)
    if new != old:
        return new > old
    held = cluster_of(island, island.best_id)
    return held is not None and signature > held.signature


def cluster_of(island: Island, member_id: int | None) -> Cluster | None:
    """Returns the island's cluster holding that program, or None."""
    return next((c for c in island.clusters if any(m.id == member_id for m in c.members)), None)


def reset_islands(state: FunSearchState, config: FunSearchConfig, rng: UniformSource, at: int) -> FunSearchState:
    """Returns the state with the weaker half of the islands reset and refounded (§4.2 step 10; F5).

    Islands are ordered by best + N(0, 1e-6) noise (one uniform each, in index order); each reset
    island, weakest first, is refounded with the best program of a uniformly drawn kept island (one
    uniform each). A single island is never reset.
    """
    islands = state.islands
    half = len(islands) // 2
    if half == 0:
        return state
    keys = [_best_key(island, config) + normal_noise(rng.random()) for island in islands]
    order = sorted(range(len(islands)), key=lambda i: keys[i])
    reset, keep = order[:half], order[half:]
    new = list(islands)
    for position in reset:
        donor = islands[keep[uniform_index(rng.random(), len(keep))]]
        new[position] = _refounded(islands[position], donor, config)
    logger.info("funsearch: reset islands %s at iteration %d", ", ".join(str(islands[i].index) for i in reset), at)
    return replace(state, islands=tuple(new), registrations_since_reset=0, last_reset_at=at)


def _best_key(island: Island, config: FunSearchConfig) -> float:
    return -math.inf if island.best_score is None else oriented(island.best_score, config)


def _refounded(island: Island, donor: Island, config: FunSearchConfig) -> Island:
    """Returns the island emptied, its version raised, holding the donor's best program."""
    fresh = Island(island.index, version=island.version + 1)
    cluster = cluster_of(donor, donor.best_id)
    member = next((m for m in cluster.members if m.id == donor.best_id), None) if cluster else None
    if cluster is None or member is None:
        logger.warning(
            "island %d has no best program to found island %d with; it restarts empty", donor.index, island.index
        )
        return fresh
    return register(fresh, member, cluster.signature, cluster.score, config)


def evictions(state: FunSearchState, candidates: Sequence[Candidate], cap: int, config: FunSearchConfig) -> list[int]:
    """Returns the ids to drop so that at most cap entries stay, in the order they go (AL: the spec has no cap).

    Entries outside every cluster (failed, duplicates, programs of reset islands) go first, then cluster
    members; each group weakest first, oldest first on ties. An island's best and the newest entry stay.
    """
    over = len(candidates) - cap
    if over <= 0:
        return []
    clustered = {m.id for i in state.islands for c in i.clusters for m in c.members}
    kept = {i.best_id for i in state.islands} | {max(c.id for c in candidates)}

    def weakness(candidate: Candidate) -> tuple[bool, float, int]:
        fitness = candidate.fitness
        score = oriented(fitness, config) if fitness is not None and math.isfinite(fitness) else -math.inf
        return candidate.id in clustered, score, candidate.id

    return [c.id for c in sorted((c for c in candidates if c.id not in kept), key=weakness)[:over]]


def without_members(state: FunSearchState, ids: set[int]) -> FunSearchState:
    """Returns the state with those programs taken out of every cluster (emptied clusters dropped).

    An island's `Programs` count stays: it counts registrations, which set the temperature.
    """
    islands = []
    for island in state.islands:
        clusters = tuple(
            replace(c, members=kept)
            for c in island.clusters
            if (kept := tuple(m for m in c.members if m.id not in ids))
        )
        islands.append(replace(island, clusters=clusters))
    return replace(state, islands=tuple(islands), evicted=state.evicted + len(ids))
