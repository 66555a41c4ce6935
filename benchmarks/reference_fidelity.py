"""Measures how exactly AdaEvolve's archive and the Pareto ranking follow SkyDiscover's `UnifiedArchive` (issue 32).

Needs the reference itself, which is no dependency of autoloop_py: `pip install --no-deps skydiscover==0.1.0` (its
archive module imports nothing beyond the standard library). Three figures, on seeded random inputs:

1. Pareto ranking: front ranks, crowding distances and Pareto percentiles of random vector sets (2–3 objectives,
   with and without ties) from strategies/pareto.py against the reference's `_compute_pareto_ranking`, and the
   newcomer's Pareto share against its `_dominates` count.
2. Admission with the fitness share clamped: newcomers (many worse than every member, where the clamp matters)
   offered to full archives with a novelty weight above 0, ours (strategies/adaevolve/archive.py) against
   `UnifiedArchive.add`.
3. Pareto admission: the same with 2–3 objectives (`pareto_objectives`, each higher or lower is better, values with
   ties) and a Pareto weight above 0, each member's objectives read back from its Objectives bullet as the
   strategy reads them: elite scores with the Pareto percentile, the front protected, the newcomer's Pareto share.
   It also counts the decisions the objectives changed (against the same archive without them), so that the check
   is seen to reach the Pareto terms.

The reference orders a front by iterating a set of string ids, which changes from run to run; the script gives it
integer-like ids in stored order (an insertion-ordered set), the order autoloop uses.

    python3 benchmarks/reference_fidelity.py [--trials 3000] [--seed 2026]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoloop_py.program.objectives import Objective  # noqa: E402
from autoloop_py.state.population import Candidate  # noqa: E402
from autoloop_py.strategies import pareto  # noqa: E402
from autoloop_py.strategies.adaevolve.archive import Weights, admit  # noqa: E402
from autoloop_py.strategies.pareto import with_objectives  # noqa: E402


class _OrderedSet:
    """A set that iterates in insertion order, standing in for the reference's set of ids."""

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items = dict.fromkeys(items)

    def __iter__(self) -> Any:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item: Any) -> bool:
        return item in self._items

    def add(self, item: Any) -> None:
        self._items[item] = None

    def discard(self, item: Any) -> None:
        self._items.pop(item, None)

    def update(self, items: Iterable[Any]) -> None:
        for item in items:
            self.add(item)


class _Program:
    """The fields of the reference's Program the archive reads."""

    def __init__(self, id: Any, solution: str, metrics: dict[str, float]) -> None:
        self.id, self.solution, self.metrics, self.parent_id = id, solution, metrics, None


def _code(rng: random.Random) -> str:
    lines = [rng.choice(["import numpy as np", "from math import sqrt", ""]),
             f"rate = {rng.choice(['0.9', '0.95', '2', '10'])}", "def step(n):",
             f"    {rng.choice(['for i in range(n):', 'while n > 0:', 'if n:'])}",
             f"        n = n * rate + {rng.randint(1, 99)}"]
    return "\n".join(line for line in lines if line) + "\n"


def pareto_ranking(ua: Any, trials: int, rng: random.Random) -> tuple[int, int]:
    """Returns (identical rankings, identical newcomer shares) over random vector sets."""
    same = shares = 0
    for _ in range(trials):
        names = [f"o{k}" for k in range(rng.choice([2, 2, 3]))]
        higher = {name: rng.random() < 0.5 for name in names}
        ints = rng.random() < 0.5
        draw = (lambda: float(rng.randint(-3, 3))) if ints else (lambda: rng.uniform(-100, 100))
        programs = [_Program(i, "", {name: draw() for name in names}) for i in range(rng.randint(1, 14))]
        archive = ua.UnifiedArchive(ua.ArchiveConfig(pareto_objectives=names, higher_is_better=higher))
        archive._compute_pareto_ranking(programs)
        ranks = archive._pareto_ranks
        order = sorted(ranks, key=lambda pid: (ranks[pid], -archive._crowding_distances.get(pid, 0.0)))
        last = max(len(order) - 1, 1)
        percentile = {pid: 1.0 - i / last for i, pid in enumerate(order)}
        objectives = [Objective(name, "higher" if higher[name] else "lower") for name in names]
        vectors = [pareto.objective_vector(p.metrics, objectives) for p in programs]
        ours_ranks = pareto.front_ranks(vectors)
        ours = (ours_ranks, pareto.crowding_distances(vectors, ours_ranks), pareto.pareto_percentiles(vectors))
        theirs = ([ranks[p.id] for p in programs], [archive._crowding_distances[p.id] for p in programs],
                  [percentile[p.id] for p in programs])
        same += ours == theirs
        child = _Program(len(programs), "", {name: draw() for name in names})
        dominated_by = sum(archive._dominates(archive._get_objective_vector(p), archive._get_objective_vector(child))
                           for p in programs)
        share = max(0.0, min(1.0, 1.0 - dominated_by / max(len(programs), 1)))
        shares += pareto.newcomer_percentile(pareto.objective_vector(child.metrics, objectives), vectors) == share
    return same, shares


def clamped_admission(ua: Any, trials: int, rng: random.Random) -> tuple[int, int]:
    """Returns (identical admissions, newcomers worse than every member) over full archives."""
    same = worst = 0
    for _ in range(trials):
        size = rng.randint(2, 8)
        fitness, novelty, ratio = rng.choice([(0.5, 0.5, 0.1), (0.3, 0.3, 0.2), (0.7, 0.3, 0.2), (0.2, 0.5, 0.05)])
        archive = ua.UnifiedArchive(ua.ArchiveConfig(max_size=size, k_neighbors=5, elite_ratio=ratio,
                                                     fitness_weight=fitness, novelty_weight=novelty, pareto_weight=0.0))
        members: list[tuple[Candidate, float]] = []
        for i in range(size):
            code, f = _code(rng), round(rng.random(), 2)
            archive.add(_Program(f"{i:03d}", code, {"combined_score": f}))
            members.append((Candidate(id=i + 1, island=0, fitness=f, gen=i, operator="x", code=code), f))
        code, f = _code(rng), round(rng.random() * 0.3, 2)
        worst += all(f < score for _, score in members)
        theirs = archive.add(_Program("new", code, {"combined_score": f}))
        same += theirs == admit(code, f, members, size, Weights(fitness, novelty, ratio), 5).admitted
    return same, worst


def pareto_admission(ua: Any, trials: int, rng: random.Random) -> tuple[int, int, int]:
    """Returns (identical admissions, admitted, decisions the objectives changed) over full archives with objectives."""
    same = admitted = changed = 0
    for _ in range(trials):
        size = rng.randint(2, 8)
        fitness, novelty, weight = rng.choice([(0.4, 0.3, 0.3), (0.5, 0.2, 0.3), (0.3, 0.3, 0.4), (0.2, 0.5, 0.3)])
        ratio = rng.choice([0.1, 0.2, 0.05])
        names = [f"o{k}" for k in range(rng.choice([2, 2, 3]))]
        higher = {name: rng.random() < 0.5 for name in names}
        objectives = [Objective(name, "higher" if higher[name] else "lower") for name in names]
        ints = rng.random() < 0.5
        draw = (lambda: float(rng.randint(-3, 3))) if ints else (lambda: round(rng.uniform(-10, 10), 2))
        archive = ua.UnifiedArchive(ua.ArchiveConfig(
            max_size=size, k_neighbors=5, elite_ratio=ratio, fitness_weight=fitness, novelty_weight=novelty,
            pareto_weight=0.0, fitness_key="combined_score", pareto_objectives=names, higher_is_better=higher,
            pareto_objectives_weight=weight))
        members: list[tuple[Candidate, float]] = []
        for i in range(size):
            code, f, values = _code(rng), round(rng.random(), 2), {name: draw() for name in names}
            archive.add(_Program(f"{i:03d}", code, {"combined_score": f, **values}))
            member = Candidate(id=i + 1, island=0, fitness=f, gen=i, operator="x", code=code)
            members.append((with_objectives(member, values, objectives), f))
        code, f, values = _code(rng), round(rng.random(), 2), {name: draw() for name in names}
        theirs = archive.add(_Program("new", code, {"combined_score": f, **values}))
        vector = pareto.objective_vector(values, objectives)
        ours = admit(code, f, members, size, Weights(fitness, novelty, ratio, weight), 5, objectives, vector).admitted
        scalar = admit(code, f, members, size, Weights(fitness, novelty, ratio), 5).admitted
        same += theirs == ours
        admitted += theirs
        changed += theirs != scalar
    return same, admitted, changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    try:
        from skydiscover.search.adaevolve.archive import unified_archive as ua
    except ImportError:
        print("the reference is not installed: pip install --no-deps skydiscover==0.1.0", file=sys.stderr)
        return 2
    ua.set = _OrderedSet  # type: ignore[attr-defined]
    rng = random.Random(args.seed)
    same, shares = pareto_ranking(ua, args.trials, rng)
    print(f"pareto ranking: {same}/{args.trials} vector sets identical (ranks, crowding, percentiles); "
          f"newcomer share identical in {shares}/{args.trials}")
    same, worst = clamped_admission(ua, args.trials, rng)
    print(f"admission (novelty weight > 0): {same}/{args.trials} identical ({worst} newcomers worse than every member)")
    same, admitted, changed = pareto_admission(ua, args.trials, rng)
    print(f"pareto admission (objectives, Pareto weight > 0): {same}/{args.trials} identical ({admitted} admitted; "
          f"the objectives changed {changed} decisions)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
