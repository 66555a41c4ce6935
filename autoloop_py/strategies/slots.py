"""Slots: the k parallel iterations of one program in a tick, and what each of them may decide from.

A tick reads one state snapshot; slot i of k is iteration `first + i` and decides alone, so every
choice that keeps slots apart (the island a slot works, the seed of its random draws) is a pure
function of (seed, program, iteration, slot) and a replayed tick decides the same.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

from autoloop_py.errors import AutoloopError

MAX_SLOTS = 64
_SLOT_RE = re.compile(r"^(\d{1,3})/(\d{1,3})$")


@dataclass(frozen=True)
class Slot:
    """One slot of a tick.

    Attributes:
      index: the slot's place in the tick, 0 ≤ index < count.
      count: how many slots the tick runs (the program's `parallel:`).
      launch: in a run without a barrier (`autoloop run --parallel k`), the slot's place in the order the run
        launched its slots; index is then the lane (the process) it runs in. None: a slot of a tick.
      busy: in a run without a barrier, the islands the other slots in flight said they work when this one
        started (a strategy with islands keeps clear of them); () in a tick, whose slots pick apart by index.
    """

    index: int
    count: int
    launch: int | None = None
    busy: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SLOTS or not 0 <= self.index < self.count:
            raise AutoloopError(f"slot {self.index}/{self.count}: need 0 ≤ slot < count ≤ {MAX_SLOTS}")
        if self.launch is not None and self.launch < 0:
            raise AutoloopError(f"slot {self}: a launch number counts from 0, got {self.launch}")

    @property
    def parallel(self) -> bool:
        """Returns whether the tick runs more than one slot (a tick of one decides as a plain iteration)."""
        return self.count > 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_slot(text: str) -> Slot:
    """Returns the slot written `I/K` (slot I of K, counted from 0); raises AutoloopError otherwise."""
    found = _SLOT_RE.match(text.strip())
    if found is None:
        raise AutoloopError(f"--slot {text!r}: write it I/K, slot I (from 0) of K, e.g. 2/4")
    return Slot(int(found[1]), int(found[2]))


def slot_iteration(first: int, slot: Slot | None) -> int:
    """Returns the iteration number a slot records: the tick's first iteration plus its index."""
    return first + (slot.index if slot is not None else 0)


def slot_seed(seed: object, program: str, iteration: int, slot: Slot | None) -> str:
    """Returns the seed text of an iteration's random draws.

    A tick of one slot keeps the plain iteration's seed, so `parallel: 1` replays runs made before slots.
    """
    if slot is None or not slot.parallel:
        return f"{seed}:{program}:{iteration}"
    if slot.launch is not None:  # the lane's iteration number may repeat; the launch number never does
        return f"{seed}:{program}:{iteration}:launch{slot.launch}/{slot.count}"
    return f"{seed}:{program}:{iteration}:slot{slot.index}/{slot.count}"


def slot_rng(seed: object, program: str, iteration: int, slot: Slot | None) -> random.Random:
    """Returns the seeded random source of one slot's iteration."""
    return random.Random(slot_seed(seed, program, iteration, slot))


def slot_island(slot: Slot, islands: Sequence[int]) -> int:
    """Returns the island slot i works: the i mod n-th of the islands in index order (island 0 without any)."""
    ordered = sorted(set(islands))
    return ordered[slot.index % len(ordered)] if ordered else 0
