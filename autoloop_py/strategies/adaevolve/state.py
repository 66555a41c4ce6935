"""AdaEvolve's state (§2.1): the islands' counters, the global bests and the paradigm tracker, primary values only.

Its markdown form, the `### ⚙️ Strategy State` block, is read and written by adaevolve_markdown.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig

EPS = 1e-8
UCB_C = 1.41
MIN_VISITS = 3
STARTING_PRESET = "balanced"
OUTCOMES = ("SUCCESS", "FAILED")
NEG_INF = -math.inf


@dataclass(frozen=True)
class IslandState:
    """One island's adaptive counters (its archive is read from the Population).

    Attributes:
      preset: the preset it was spawned with ("balanced" for the starting islands).
      g: G, the decayed second moment of normalised improvements.
      best: the island's best oriented fitness (−inf before its first program).
      improvements: admitted children that raised the island's best.
      evaluations: admitted children counted on this island.
      visits: n, raw UCB visits.
      decayed_visits: V, decayed visits.
      decayed_reward: R, decayed globally normalised reward.
    """

    preset: str = STARTING_PRESET
    g: float = 0.0
    best: float = NEG_INF
    improvements: int = 0
    evaluations: int = 0
    visits: int = 0
    decayed_visits: float = 0.0
    decayed_reward: float = 0.0


@dataclass(frozen=True)
class Paradigm:
    """A breakthrough idea from the guide LLM.

    Attributes:
      idea: the idea in one line.
      description: how to apply it (a few sentences, one line).
      approach_type: the main tool, as "library.function".
      what_to_optimize: what the idea targets ("score" by default).
      cautions: pitfalls to avoid ('' when none).
      uses: the prompts it has been applied to.
      retired: a person retired it; it is never applied again.
    """

    idea: str
    description: str
    approach_type: str
    what_to_optimize: str = "score"
    cautions: str = ""
    uses: int = 0
    retired: bool = False


@dataclass(frozen=True)
class TriedParadigm:
    """An idea that was applied and replaced, with how the global best moved while it was installed.

    Attributes:
      idea: the idea in one line.
      approach_type: its main tool.
      outcome: SUCCESS when the global best rose by more than 0.001, else FAILED.
      gain: that rise, rounded to 4 decimals (oriented: positive is better).
    """

    idea: str
    approach_type: str
    outcome: str
    gain: float


@dataclass(frozen=True)
class AdaEvolveState:
    """Everything AdaEvolve carries between iterations (§2.1), primary values only.

    Attributes:
      islands: the islands' counters, by index.
      iteration: t, the last iteration end_iteration ran for (0 before any).
      current_island: the island the next iteration evolves.
      global_best: gb, the best oriented fitness of an admitted child (−inf before any).
      best_program_id: the id of that child (None before any).
      ucb_normaliser: gb_ucb, the best oriented fitness any island has seen, migrants included.
      last_spawn: the iteration of the last spawn (−cooldown at the start).
      rng_seed: the run's seed.
      rng_draws: the uniforms drawn so far.
      window: the global-improvement ticks (1 = a new global best), oldest first, at most W.
      paradigms: the installed ideas.
      current_paradigm: cur, the index of the idea the next prompt applies.
      best_at_gen: gb when the ideas were installed.
      best_during: the best gb seen while they were installed.
      tried: replaced ideas with their outcomes, oldest first.
      guide_failed_at: the iteration of the last guide reply without a valid idea (None: none).
      guide_failures: guide replies without a valid idea in a row (the back-off doubles with each).
    """

    islands: tuple[IslandState, ...]
    iteration: int = 0
    current_island: int = 0
    global_best: float = NEG_INF
    best_program_id: int | None = None
    ucb_normaliser: float = NEG_INF
    last_spawn: int = 0
    rng_seed: int = 42
    rng_draws: int = 0
    window: tuple[int, ...] = ()
    paradigms: tuple[Paradigm, ...] = ()
    current_paradigm: int = 0
    best_at_gen: float = 0.0
    best_during: float = 0.0
    tried: tuple[TriedParadigm, ...] = ()
    guide_failed_at: int | None = None
    guide_failures: int = 0


def initial_state(config: AdaEvolveConfig) -> AdaEvolveState:
    """Returns the state before the first program: num_islands fresh islands, last spawn at −cooldown."""
    return AdaEvolveState(
        islands=tuple(IslandState() for _ in range(config.num_islands)),
        last_spawn=-config.spawn_cooldown_iterations,
        rng_seed=config.random_seed,
    )


# ---------------------------------------------------------------- derived values


def intensity(g: float, config: AdaEvolveConfig) -> float:
    """Returns I = I_min + (I_max − I_min)/(1 + √(G + ε)), or fixed_intensity when adaptive search is off."""
    if not config.use_adaptive_search:
        return config.fixed_intensity
    return config.intensity_min + (config.intensity_max - config.intensity_min) / (1 + math.sqrt(g + EPS))


def ucb_score(island: IslandState, t: int, config: AdaEvolveConfig) -> float | None:
    """Returns R/V + C·√(ln(t+1)/n), or None while the island has fewer than 3 visits or UCB is off."""
    if not config.use_ucb_selection or island.visits < MIN_VISITS:
        return None
    mean = island.decayed_reward / island.decayed_visits if island.decayed_visits > 0 else 0.0
    return mean + UCB_C * math.sqrt(math.log(t + 1) / island.visits)


def raw_value(f: float, direction: str) -> float:
    """Returns the raw metric m of an oriented fitness f (f itself, or −f for lower-is-better)."""
    # 0.0 - f, not -f: a zero must not come out as "-0".
    return f if direction == "higher" else 0.0 - f
