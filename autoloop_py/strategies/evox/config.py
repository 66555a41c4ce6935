"""EvoX tunables (strategies.md §3.3): the playbook's Settings table, overridden by `code/config.yaml`."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

from autoloop_py.program.objectives import Objective
from autoloop_py.program.playbook import Playbook
from autoloop_py.strategies import settings

SWITCH_RATIO = 0.1


@dataclass(frozen=True)
class EvoXConfig:
    """EvoX settings; defaults are the reference's (strategies.md §3.3).

    Attributes:
      num_context_programs: the context programs a strategy's `sample` is asked for.
      switch_interval: stagnant turns before the strategy is rewritten (None: 10 % of max_iterations, at least 1).
      max_iterations: the run's iteration budget (only the switch interval's default reads it).
      auto_generate_variation_operators: ask the guide LLM once for the DIVERGE/REFINE examples (else our defaults).
      improvement_threshold: a turn whose best rose by more than this resets the stagnation count.
      meta_attempts: the meta LLM's attempts at a valid rewrite, each fed the validator's reasons.
      max_attempts: the attempts of one iteration on the same parent and context (a failed one is retried).
      num_previous_attempts: the best earlier programs a solution prompt lists.
      random_seed: the seed of the meta step's reference draws, recorded in the state's rng_seed.
      diff_based_generation: ask for SEARCH/REPLACE edits (else a full rewrite).
      sandbox_seconds: the wall-clock limit of one sandboxed strategy run.
      sandbox_memory_mb: the address-space limit of the sandbox process.
      sandbox_cpu_seconds: the CPU-time limit of the sandbox process.
      direction: the program's metric direction, "higher" or "lower" (not a playbook setting).
      initial_code: the source of the strategy a run starts with (ours, shipped with the package).
      pareto_objectives: the metrics ranked by non-dominated sorting (empty: the frontmatter's `objectives:`).
      higher_is_better: per-metric directions of the Pareto objectives (a name it lacks is higher-is-better).
      objectives: the Pareto objectives in force, with directions: each genome carries their values and its front,
        and `pareto_front()` lists front 0 (the reference's `pareto_objectives`).
    """

    num_context_programs: int = 4
    switch_interval: int | None = None
    max_iterations: int = 100
    auto_generate_variation_operators: bool = True
    improvement_threshold: float = 0.01
    meta_attempts: int = 3
    max_attempts: int = 3
    num_previous_attempts: int = 3
    random_seed: int = 42
    diff_based_generation: bool = True
    sandbox_seconds: float = 10.0
    sandbox_memory_mb: int = 512
    sandbox_cpu_seconds: int = 10
    direction: str = "higher"
    initial_code: str = ""
    pareto_objectives: tuple[str, ...] = ()
    higher_is_better: tuple[tuple[str, bool], ...] = ()
    objectives: tuple[Objective, ...] = ()

    @property
    def attempts(self) -> int:
        """Returns the attempts an iteration may make (max_attempts), as AdaEvolve's config names them."""
        return self.max_attempts

    @property
    def interval(self) -> int:
        """Returns the switch interval in force (the configured one, else the 10 % rule)."""
        return switch_interval(self.switch_interval, self.max_iterations)


def switch_interval(configured: int | None, max_iterations: int) -> int:
    """Returns the stagnant turns before a rewrite: configured, else max(1, ⌊0.1·max_iterations⌋) (E5)."""
    return configured if configured is not None else max(1, math.floor(SWITCH_RATIO * max_iterations))


def _optional_whole(value: Any) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in settings.NONE_WORDS):
        return None
    try:
        return int(settings.whole(1)(value))
    except ValueError:
        raise ValueError("a whole number >= 1, or `none` for 10 % of max_iterations") from None


SETTINGS: dict[str, settings.Convert] = {
    "num_context_programs": settings.whole(0),
    "switch_interval": _optional_whole,
    "max_iterations": settings.whole(1),
    "auto_generate_variation_operators": settings.flag,
    "improvement_threshold": settings.number(0, inclusive=True, example="0.01"),
    "meta_attempts": settings.whole(1),
    "max_attempts": settings.whole(1),
    "num_previous_attempts": settings.whole(0),
    "random_seed": settings.whole(0),
    "diff_based_generation": settings.flag,
    "sandbox_seconds": settings.number(0, inclusive=False, example="10"),
    "sandbox_memory_mb": settings.whole(64),
    "sandbox_cpu_seconds": settings.whole(1),
    "pareto_objectives": settings.names,
    "higher_is_better": settings.directions,
}


def parse_evox_config(
    playbook: Playbook, overrides: Mapping[str, Any] | None = None, direction: str = "higher"
) -> EvoXConfig:
    """Returns the settings of a customised EvoX playbook, with `code/config.yaml` overrides applied."""
    values = settings.playbook_settings(playbook, SETTINGS, overrides, direction)
    return replace(EvoXConfig(), direction=direction, **values)
