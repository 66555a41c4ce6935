"""Which model proposes next: a pure draw over the `models:` list, by weight or by a cost-aware bandit.

The bandit's reward is what a model's proposals bought per unit of spend: the metric its kept candidates
gained, divided by the dollars it cost (by tokens when some model's price is unknown). Its statistics are
the rows of the state file's Models table (state/model_stats.py), so a person can read and correct them,
and the draw is reproducible: the same rows and the same `random.Random` give the same model.

- weighted: draws by weight (the table's Weight when set, else the frontmatter's).
- ucb: ShinkaEvolve's asymmetric UCB in our own words: a model never drawn goes first; then each model
  scores its improvement per spend (with one pseudo-call at the pooled averages, so a few fruitless
  calls do not rank it at zero), scaled by the best model's so that it lies in [0, 1] (improvement is
  never negative: a worse candidate gains 0, the asymmetry), plus an exploration bonus
  `C * sqrt(2 ln N / n)`; the best score gets 1 - EPSILON of the draw and the others share EPSILON.
- thompson: each model draws a keep rate from Beta(1 + kept, 1 + not kept) and scores that rate times its
  mean gain per kept candidate, divided by its mean spend per call; the highest draw proposes.

A weight of 0 takes a model out of every method's draw.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence

from autoloop_py.program.models import ModelSpec
from autoloop_py.state.model_stats import ModelRow, ModelTable

UCB_C = 1.0
EPSILON = 0.1
_TINY = 1e-12


@dataclass(frozen=True)
class Arm:
    """A model the draw may pick, with its statistics.

    Attributes:
      spec: the model's frontmatter entry.
      weight: the weight that counts (the table's when set, else the entry's).
      row: its Models row (zeros before its first call).
    """

    spec: ModelSpec
    weight: float
    row: ModelRow


def draw_rng(kind: str, seed: int, program: str, iteration: int) -> random.Random:
    """Returns the random source of one iteration's draw of `kind` (`models`, `prompts`), seeded from all four."""
    return random.Random(f"{kind}:{seed}:{program}:{iteration}")


def arms(specs: Sequence[ModelSpec], table: ModelTable) -> list[Arm]:
    """Returns the proposing models with their weights and rows; those weighted 0 are left out (all, if every
    one is)."""
    rows = [table.row(spec.name) or ModelRow(spec.name) for spec in specs]
    found = [Arm(spec, spec.weight if row.weight is None else row.weight, row) for spec, row in zip(specs, rows)]
    live = [arm for arm in found if arm.weight > 0]
    return live or found


def choose(specs: Sequence[ModelSpec], table: ModelTable, method: str, rng: random.Random) -> ModelSpec:
    """Returns the model that proposes next, drawn by `method` (weighted, ucb, thompson) from the rows."""
    candidates = arms(specs, table)
    if len(candidates) == 1:
        return candidates[0].spec
    if method == "weighted":
        return _draw(candidates, [arm.weight or 1.0 for arm in candidates], rng)
    unseen = [arm for arm in candidates if arm.row.calls == 0]
    if unseen:
        return unseen[rng.randrange(len(unseen))].spec
    if method == "ucb":
        return _draw(candidates, ucb_shares(candidates), rng)
    if method == "thompson":
        draws = thompson_draws(candidates, rng)
        return candidates[max(range(len(draws)), key=draws.__getitem__)].spec
    raise ValueError(f"unknown model-selection {method!r}")


def ucb_shares(candidates: Sequence[Arm]) -> list[float]:
    """Returns each model's share of the UCB draw: 1 - EPSILON for the best score, EPSILON for the others."""
    spends = _spends(candidates)
    calls = max(sum(arm.row.calls for arm in candidates), 1)
    # One pseudo-call at the pooled averages: a model whose first sparse calls gained nothing is not ranked
    # at zero (kept candidates are rare, so a mean over few calls is mostly noise).
    prior_gain, prior_spend = sum(arm.row.improvement for arm in candidates) / calls, sum(spends) / calls
    values = [(arm.row.improvement + prior_gain) / max(spent + prior_spend, _TINY)
              for arm, spent in zip(candidates, spends)]
    top = max(values)
    scores = [
        (value / top if top > 0 else 0.0) + UCB_C * math.sqrt(2 * math.log(max(calls, 2)) / max(arm.row.calls, 1))
        for arm, value in zip(candidates, values)
    ]
    best = max(scores)
    winners = [i for i, score in enumerate(scores) if math.isclose(score, best, rel_tol=1e-12, abs_tol=1e-15)]
    if len(winners) == len(candidates):
        return [1.0] * len(candidates)
    rest = len(candidates) - len(winners)
    return [(1 - EPSILON) / len(winners) if i in winners else EPSILON / rest for i in range(len(candidates))]


def thompson_draws(candidates: Sequence[Arm], rng: random.Random) -> list[float]:
    """Returns each model's sampled gain per spend: a Beta keep rate times mean gain per kept, over spend per call."""
    spends = _spends(candidates)
    kept = sum(arm.row.accepted for arm in candidates)
    mean_gain = sum(arm.row.improvement for arm in candidates) / kept if kept else 1.0
    draws = []
    for arm, spent in zip(candidates, spends):
        row = arm.row
        rate = rng.betavariate(1 + row.accepted, 1 + max(row.calls - row.accepted, 0))
        gain = row.improvement / row.accepted if row.accepted else mean_gain
        draws.append(rate * gain / max(spent / max(row.calls, 1), _TINY))
    return draws


def _spends(candidates: Sequence[Arm]) -> list[float]:
    """Returns each model's spend: dollars when every drawn model has a price, else tokens."""
    drawn = [arm for arm in candidates if arm.row.calls]
    dollars = bool(drawn) and all(arm.row.usd > 0 for arm in drawn)
    return [arm.row.usd if dollars else float(arm.row.tokens) for arm in candidates]


def _draw(candidates: Sequence[Arm], weights: Sequence[float], rng: random.Random) -> ModelSpec:
    """Returns one model drawn by weight (one rng.random() call, so a draw is one step of the stream)."""
    point = rng.random() * sum(weights)
    for arm, weight in zip(candidates, weights):
        point -= weight
        if point < 0:
            return arm.spec
    return candidates[-1].spec
