"""Prints the regret and spend of `model-selection: weighted`, `ucb` and `thompson` over 100 iterations.

Two modes:

- simulated (the default): the pure draw (proposers/model_choice.py) runs against a simulated environment,
  many seeds in seconds. Each iteration draws a model from the real Models table, the environment says
  whether its candidate is kept, what it gained and what it cost, and the real table code
  (state/model_stats.py) adds the record, exactly as the runner does.
- `--loopback`: one seed, end to end. The arms are loopback OpenAI-compatible servers
  (benchmarks/loopback_models.py) whose edits of a counter program are kept and gain as scripted below,
  priced per token in the program's `models:` list; the real `autoloop run --proposer llm` CLI runs
  `--iterations` iterations per method over a temporary repository with a bare origin, and the figures
  come from the state file's Models table. An iteration takes about a third of a second of git and
  evaluation on 2 shared cores: the default 100 iterations take about 35 s per method, under 2 minutes
  for the three (more under load).

Arms (expected gain per dollar in brackets; the cheap model is the best buy):
  cheap   kept 30 %, gain U(0, 0.5), $0.001 a call   [75]
  strong  kept 60 %, gain U(0, 1.0), $0.020 a call   [15]
  useless kept  2 %, gain U(0, 0.1), $0.005 a call   [0.2]

Regret of one pull of arm a = its cost x (best gain per dollar - a's gain per dollar): the improvement
the same money would have bought from the best model, minus what a was expected to buy.

    python benchmarks/model_bandit.py [--iterations 100] [--seeds 200]
    python benchmarks/model_bandit.py --loopback [--iterations 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone

from autoloop_py.program.models import ModelSpec
from autoloop_py.proposers.model_choice import choose, model_rng
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.model_stats import ModelTable, ModelUse, use_bullets, with_record

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TOKENS_PER_CALL = 2000


@dataclass(frozen=True)
class Arm:
    """A simulated model: how often its candidate is kept, the most a kept one gains, its price per call."""

    name: str
    keep: float
    gain: float
    usd: float

    @property
    def per_dollar(self) -> float:
        """Returns the expected gain per dollar (mean gain U(0, gain) is gain / 2)."""
        return self.keep * self.gain / 2 / self.usd


ARMS = (Arm("sim/cheap", 0.30, 0.5, 0.001), Arm("sim/strong", 0.60, 1.0, 0.020), Arm("sim/useless", 0.02, 0.1, 0.005))


def run(method: str, iterations: int, seed: int) -> tuple[float, float, float, float]:
    """Returns (regret, spend in dollars, gain, share of pulls on the best arm) of one simulated program."""
    specs = tuple(ModelSpec(arm.name) for arm in ARMS)
    by_name = {arm.name: arm for arm in ARMS}
    best = max(arm.per_dollar for arm in ARMS)
    world = random.Random(f"world:{seed}")
    table, regret, spend, gain, best_pulls = ModelTable(), 0.0, 0.0, 0.0, 0
    for iteration in range(1, iterations + 1):
        arm = by_name[choose(specs, table, method, model_rng(seed, "bench", iteration)).name]
        kept = world.random() < arm.keep
        gained = world.uniform(0, arm.gain) if kept else 0.0
        record = IterationRecord(
            "accepted" if kept else "rejected", NOW, "simulated", 0.0, tokens=TOKENS_PER_CALL, cost=arm.usd,
            extra=use_bullets(ModelUse(arm.name, {arm.name: (TOKENS_PER_CALL, arm.usd)})),
        )
        table = with_record(table, record, gained)
        regret += arm.usd * (best - arm.per_dollar)
        spend, gain = spend + arm.usd, gain + gained
        best_pulls += arm.per_dollar == best
    return regret, spend, gain, best_pulls / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--loopback", action="store_true", help="real CLI runs against loopback model servers")
    parser.add_argument("--seed", type=int, default=0, help="--loopback: the servers' script seed")
    args = parser.parse_args()
    if args.loopback:
        from loopback_models import run_loopback  # benchmarks/ is the script's folder, first on sys.path

        run_loopback(ARMS, args.iterations, args.seed)
        return
    print(f"{args.iterations} iterations, mean ± sd over {args.seeds} seeds (simulated arms, real draw and table code)")
    print(f"{'method':<10} {'regret':>14} {'spend $':>16} {'gain':>14} {'gain per $':>11} {'best-arm pulls':>15}")
    for method in ("weighted", "ucb", "thompson"):
        results = [run(method, args.iterations, seed) for seed in range(args.seeds)]
        regret, spend, gain, share = (list(column) for column in zip(*results))
        print(f"{method:<10} {_pm(regret):>14} {_pm(spend, 3):>16} {_pm(gain):>14} "
              f"{statistics.mean(gain) / statistics.mean(spend):>11.1f} {statistics.mean(share):>14.0%}")


def _pm(values: list[float], digits: int = 2) -> str:
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


if __name__ == "__main__":
    main()
