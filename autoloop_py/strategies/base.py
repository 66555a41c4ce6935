"""What every strategy shares: the context it decides from, its decision, and the draws it makes."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Protocol

from autoloop_py.state.population import Candidate
from autoloop_py.strategies.slots import Slot


@dataclass(frozen=True)
class StrategyContext:
    """What a strategy sees when deciding.

    Attributes:
      population: the candidates, newest first (as in the state file).
      recent_statuses: the Machine State's last statuses, oldest first.
      best_metric: the branch's best raw metric (None before the baseline).
      iteration: the iteration number being decided (Iteration Count + 1).
      direction: "higher" or "lower".
      next_id: the id the new candidate will get.
      slot: the slot of a tick of parallel iterations (None: a plain iteration); strategies with islands give
        each slot its own island.
    """

    population: tuple[Candidate, ...]
    recent_statuses: tuple[str, ...]
    best_metric: float | None
    iteration: int
    direction: str
    next_id: int
    slot: Slot | None = None


@dataclass(frozen=True)
class Decision:
    """What this iteration will do, computed before any LLM call.

    Attributes:
      operator: the operator chosen (exploitation, exploration, crossover, migration).
      reason: why (an override rule or the sampled uniform and thresholds), for the prompt and history.
      parents: the parent candidates (the one to edit first), possibly empty (from scratch).
      island: the island the child belongs to.
      new_island: True when the child opens an island nobody has used.
      notes: extra lines for the prompt (e.g. "revisit unused domain knowledge").
      uniforms: the random draws consumed, for replay.
      as_is: the iteration evaluates the Target as it is, without a proposal (the Population's seed).
    """

    operator: str
    reason: str
    parents: tuple[Candidate, ...] = ()
    island: int | None = None
    new_island: bool = False
    notes: tuple[str, ...] = ()
    uniforms: tuple[float, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    as_is: bool = False


def seeds_from_target(context: StrategyContext) -> bool:
    """Returns whether an empty Population should first record the evaluated Target as its seed.

    As SkyDiscover's database starts from the initial program, the islands start from the Target as it is
    (a fresh program's baseline, or the branch's best when a strategy is added to a program that ran): the
    iteration records it with the evaluation already made and no proposal, so the model's first candidate
    has the Target for parent instead of seeding every island itself. In a tick of parallel slots only the
    first slot seeds; the others decide as for an empty Population.
    """
    index = context.slot.index if context.slot is not None else 0
    # In a tick of parallel slots, slot k decides iteration first + k: the tick's first slot alone seeds.
    return not context.population and index == 0 and context.best_metric is not None


class UniformSource(Protocol):
    """Anything that draws uniforms in [0, 1) like `random.Random.random` (tests pass a fake)."""

    def random(self) -> float:
        """Returns the next uniform in [0, 1)."""
        ...


class DrawRecorder:
    """Wraps a uniform source and keeps every draw, so a decision can be replayed and counted."""

    def __init__(self, source: UniformSource) -> None:
        self.source = source
        self.draws: list[float] = []

    def random(self) -> float:
        """Returns the source's next uniform and records it."""
        value = self.source.random()
        self.draws.append(value)
        return value


def exact(value: float | Fraction | str | int) -> Fraction:
    """Returns a number as an exact fraction, reading a float as the decimal it prints as.

    Fraction(0.95) is 0.94999999999999995559…, below the threshold 19/20, so AlphaEvolve's u = 0.95 would
    fall to crossover (and in floats AdaEvolve's .4 + .7·.6 is 0.8200000000000001, not .82); reading
    repr(0.95) gives exactly 19/20 as the specs' tables mean.
    """
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
