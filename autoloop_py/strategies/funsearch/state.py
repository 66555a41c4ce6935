"""FunSearch state: islands of clusters keyed by score signature (§4.1); markdown.py writes and reads its block."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, fields
from typing import Any

from autoloop_py.state.population import format_fitness

Signature = tuple[float, ...]
NONE_WORDS = ("", "—", "–", "-", "none", "null")
_HASH_RE = re.compile(r"[0-9A-Za-z]{1,16}")


@dataclass(frozen=True)
class Member:
    """A program registered in a cluster.

    Attributes:
      id: the candidate id in the Population.
      length: len() of the function's source, in characters (shorter programs are preferred).
      output_hash: the evaluator's output hash as a short token (see `hash_token`), or None.
    """

    id: int
    length: int
    output_hash: str | None = None


@dataclass(frozen=True)
class Cluster:
    """The programs of an island that share one score signature.

    Attributes:
      signature: the per-test scores in sorted test-name order (the cluster's key).
      score: the raw reduced score (the metric as evaluated; sampling orients it).
      members: the programs, shortest first (ties by id).
    """

    signature: Signature
    score: float
    members: tuple[Member, ...] = ()


@dataclass(frozen=True)
class Island:
    """One island of the programs database.

    Attributes:
      index: the island number, from 0.
      version: how many times the island was reset (a prompt from an older version is stale).
      num_programs: programs registered since the last reset (the temperature's n).
      best_score: the best raw reduced score on the island, None while it is empty (−inf).
      best_id: the id of the program holding best_score, None while empty.
      clusters: the island's clusters in order of creation.
    """

    index: int
    version: int = 0
    num_programs: int = 0
    best_score: float | None = None
    best_id: int | None = None
    clusters: tuple[Cluster, ...] = ()


@dataclass(frozen=True)
class FunSearchState:
    """Everything FunSearch keeps between iterations (primary values only).

    Attributes:
      islands: the islands by index; empty until the seed is registered.
      registrations_since_reset: programs stored since the last island reset (the AL reset trigger).
      last_reset_at: the iteration (gen) of the last reset, None before the first.
      stored: programs registered (the seed counts once).
      duplicates: programs discarded because their output hash was already on the island.
      execution_failed: programs without a usable score.
      version_mismatch: programs discarded because their island was reset after their prompt.
      evicted: entries dropped from the Population past max_population (their code stays on the memory
        branch); the field is written only once it is above 0.
      rng_seed: the seed of the run's random draws, as the runner sets it (None when unset).
      rng_draws: uniforms drawn by decide and record so far.

    The fields after `islands` are the block's `| Field | Value |` rows, in this order.
    """

    islands: tuple[Island, ...] = ()
    registrations_since_reset: int = 0
    last_reset_at: int | None = None
    stored: int = 0
    duplicates: int = 0
    execution_failed: int = 0
    version_mismatch: int = 0
    evicted: int = 0
    rng_seed: int | None = None
    rng_draws: int = 0

    def island(self, index: int | None) -> Island | None:
        """Returns the island with that index, or None."""
        return next((i for i in self.islands if i.index == index), None)


FIELDS = tuple(f.name for f in fields(FunSearchState) if f.name != "islands")


def hash_token(output_hash: Any) -> str | None:
    """Returns an output hash as a short table-safe token: kept when 1–16 letters/digits, else hashed to 16 hex."""
    if output_hash is None or isinstance(output_hash, bool) or not isinstance(output_hash, (str, int)):
        return None
    text = str(output_hash).strip()
    if not text:
        return None
    # The token sits in a table cell, so characters markdown reads (|, *, _, `) must not reach it.
    return text if _HASH_RE.fullmatch(text) else hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def sorted_members(members: tuple[Member, ...] | list[Member]) -> tuple[Member, ...]:
    """Returns members shortest first, ties by id."""
    return tuple(sorted(members, key=lambda m: (m.length, m.id)))


def format_signature(signature: Signature) -> str:
    """Returns a signature as written in the table: `(10, 16)`."""
    return "(" + ", ".join(format_fitness(value) for value in signature) + ")"
