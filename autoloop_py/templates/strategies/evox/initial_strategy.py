"""The initial EvoX search strategy: mostly refine a top candidate, now and then diverge from a neglected one."""

from __future__ import annotations

import math

from autoloop_py.strategies.evox.contract import Genome, StrategyBase


class EvolvedStrategy(StrategyBase):
    """Tournament among the top quartile of the genomes that beat their parent (the Pareto front, with objectives)
    under "refine"; sometimes the least-used parent under "diverge"."""

    DIVERGE_RATE = 0.2
    TOURNAMENT_SIZE = 2

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.times_parent: dict[int, int] = {}

    def add(self, genome: Genome) -> int:
        """Stores the genome and counts how often its parent has been used."""
        self.genomes[genome.id] = genome
        if genome.parent_id is not None:
            self.times_parent[genome.parent_id] = self.times_parent.get(genome.parent_id, 0) + 1
        self._update_best(genome)
        return genome.id

    def sample(self, num_context: int = 4) -> tuple[dict[str, Genome], dict[str, list[Genome]]]:
        """Picks a parent and its label, then the best few others plus one random genome as context."""
        ranked = self._ranked()
        if not ranked:
            parent = self.genomes[self.rng.choice(sorted(self.genomes))]
            label = ""
        elif len(ranked) >= 4 and self.rng.random() < self.DIVERGE_RATE:
            parent = self._least_used(ranked[self._top_size(ranked):])
            label = self.DIVERGE_LABEL
        else:
            # With Pareto objectives the parent comes from the front, as the reference's multi-objective sample.
            front = [g for g in ranked if g.metrics.get("front") == 0]
            # A child no better than its parent stays out of the pool: counted, every rejected child would widen
            # the quartile and make the best ever less likely to be drawn.
            kept = [g for g in ranked if not self._no_better_than_parent(g)]
            parent = self._tournament(front or kept[: self._top_size(kept)])
            label = self.REFINE_LABEL if len(ranked) >= 2 else ""
        return {label: parent}, {"": self._context(parent, ranked, num_context)}

    def _ranked(self) -> list[Genome]:
        """Returns the genomes with a score, best first (older first on ties)."""
        scored = [g for g in self.genomes.values() if self.score(g) is not None]
        return sorted(scored, key=lambda g: (-(self.score(g) or 0.0), g.id))

    @staticmethod
    def _top_size(ranked: list[Genome]) -> int:
        """Returns the size of the top quartile (at least one)."""
        return max(1, math.ceil(len(ranked) / 4))

    def _no_better_than_parent(self, genome: Genome) -> bool:
        parent = self.genomes.get(genome.parent_id) if genome.parent_id is not None else None
        return parent is not None and self.score(parent) is not None and self.score(genome) <= self.score(parent)

    def _tournament(self, pool: list[Genome]) -> Genome:
        """Returns the best of a few genomes drawn from pool."""
        drawn = self.rng.sample(pool, min(self.TOURNAMENT_SIZE, len(pool)))
        return min(drawn, key=lambda g: (-(self.score(g) or 0.0), g.id))

    def _least_used(self, pool: list[Genome]) -> Genome:
        """Returns a genome of pool that has served as a parent the fewest times."""
        fewest = min(self.times_parent.get(g.id, 0) for g in pool)
        return self.rng.choice([g for g in pool if self.times_parent.get(g.id, 0) == fewest])

    def _context(self, parent: Genome, ranked: list[Genome], num_context: int) -> list[Genome]:
        """Returns the best genomes other than parent, with one random other genome in the last slot."""
        if num_context <= 0:
            return []
        best = [g for g in ranked if g.id != parent.id][: num_context - 1]
        taken = {parent.id} | {g.id for g in best}
        rest = [self.genomes[i] for i in sorted(self.genomes) if i not in taken]
        if rest:
            return best + [self.rng.choice(rest)]
        return [g for g in ranked if g.id != parent.id][:num_context]
