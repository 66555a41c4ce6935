"""AdaEvolve: adaptive island search made deterministic (strategies.md §2).

decide() picks the island's mode, parent and context; record() books an evaluated candidate into its
island's archive; end_iteration() spawns, picks the next island by UCB and migrates. Each returns
plain values over frozen dataclasses, with every random draw taken from the passed-in uniform source.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Mapping, Sequence

from autoloop_py.state import population as pop
from autoloop_py.state.population import Candidate, Population, oriented
from autoloop_py.strategies.adaevolve.archive import (
    Scored,
    UniformSource,
    admit,
    archive_bullets,
    archive_of,
    context_programs,
    island_weights,
    ranked,
    select_parent,
    siblings,
    with_archive_status,
)
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.markdown import parse_state_block, render_state_block
from autoloop_py.strategies.adaevolve.paradigms import (
    active_paradigm,
    install_paradigms,
    parse_paradigms,
    tick,
    usable,
    use_paradigm,
    wants_paradigms,
)
from autoloop_py.strategies.adaevolve.state import (
    EPS,
    MIN_VISITS,
    NEG_INF,
    AdaEvolveState,
    IslandState,
    Paradigm,
    initial_state,
    intensity,
    ucb_score,
)
from autoloop_py.strategies import pareto
from autoloop_py.strategies.base import DrawRecorder, exact

logger = logging.getLogger(__name__)

MODES = ("exploration", "exploitation", "balanced")
EXPLOIT_SHARE = Fraction(7, 10)
SPAWN_SEEDS = 5
# The state block's parse/render pair and the paradigm entry points are re-exported, so that the
# runner drives the whole strategy through this one module (the prompts are in adaevolve_prompt.py).
__all__ = [
    "AdaEvolveDecision", "Step", "active_paradigm", "advance", "attempted", "decide", "end_iteration", "eval_failed",
    "external_update",
    "global_best", "improvement", "initial_state", "install_paradigms", "local_update", "migration_due",
    "mode_cutoffs", "next_island", "parse_paradigms", "parse_state_block", "pick_mode", "productivity", "record",
    "render_state_block", "spawn_choices", "spawn_due", "spawn_seeds", "tick", "use_paradigm", "wants_paradigms",
]



@dataclass(frozen=True)
class AdaEvolveDecision:
    """What one attempt of an iteration does, computed before the LLM call.

    Attributes:
      island: the island the child belongs to.
      mode: exploration, exploitation or balanced (the prompt's label).
      reason: the intensity, the uniform and the cut-offs that chose the mode (and any override).
      parent: the program to edit (None: the first program, from the files as they are).
      sampled_parent: the parent the mode drew, before an active paradigm swapped in the global best.
      local_context: the island's programs most distant from the parent.
      global_context: the top programs of all islands.
      siblings: the parent's latest children on the island, newest first.
      paradigm: the idea to apply, when one is active.
      paradigm_index: its index among the installed ideas (its use is booked by record()).
      intensity: I of the island.
      uniforms: the draws consumed.
      previous_error: why the previous attempt of this iteration failed, for the prompt.
      guide_reply: the guide LLM's reply text this iteration installed ideas from (None: no guide call).
      attempt: the attempts of the iteration so far, this one included (1 + retries after errors).
      as_is: the Target, as evaluated, is recorded as the seed of every island (the Population is empty).
    """

    island: int
    mode: str
    reason: str
    parent: Candidate | None
    sampled_parent: Candidate | None = None
    local_context: tuple[Candidate, ...] = ()
    global_context: tuple[Candidate, ...] = ()
    siblings: tuple[Candidate, ...] = ()
    paradigm: Paradigm | None = None
    paradigm_index: int | None = None
    intensity: float = 0.0
    uniforms: tuple[float, ...] = ()
    previous_error: str | None = None
    guide_reply: str | None = None
    attempt: int = 1
    as_is: bool = False

    @property
    def operator(self) -> str:
        """Returns the mode (the name the runner records as the candidate's operator)."""
        return self.mode

    @property
    def parents(self) -> tuple[Candidate, ...]:
        """Returns the parent as a tuple (empty for the first program)."""
        return () if self.parent is None else (self.parent,)


@dataclass(frozen=True)
class Step:
    """The outcome of a bookkeeping step.

    Attributes:
      state: the new strategy state.
      population: the Population with new entries, changed archive bullets and the re-rendered state block.
    """

    state: AdaEvolveState
    population: Population


# ---------------------------------------------------------------- level 1: mode, parent, context


def mode_cutoffs(i: float) -> tuple[float, float]:
    """Returns (I, I + 0.7(1 − I)): explore below the first, exploit below the second, else balanced."""
    explore, exploit = _cutoffs(i)
    return float(explore), float(exploit)


def _cutoffs(i: float) -> tuple[Fraction, Fraction]:
    level = exact(i)
    return level, level + EXPLOIT_SHARE * (1 - level)


def pick_mode(i: float, u: float) -> str:
    """Returns the mode a uniform selects at intensity I (A3); compared exactly, so u = .82 at I = .4 is balanced."""
    explore, exploit = _cutoffs(i)
    drawn = exact(u)
    return "exploration" if drawn < explore else "exploitation" if drawn < exploit else "balanced"


def decide(state: AdaEvolveState, population: Sequence[Candidate], config: AdaEvolveConfig, rng: UniformSource,
           previous_error: str | None = None) -> AdaEvolveDecision:
    """Returns one attempt's island, mode, parent and context; each attempt draws afresh (§2.2 step 2)."""
    draws = DrawRecorder(rng)
    k = state.current_island
    level = intensity(state.islands[k].g, config)
    everyone = archive_of(population, None, config.direction)
    if not everyone:
        reason = "no program yet: the first scored candidate seeds island 0 and is copied to the other islands"
        return AdaEvolveDecision(0, "exploration", reason, None, intensity=level, previous_error=previous_error)
    own = archive_of(population, k, config.direction)
    members = own or everyone
    u = draws.random()
    mode = pick_mode(level, u)
    sampled = select_parent(mode, members, config, draws)
    reason = _mode_reason(k, state.islands[k].g, level, u, mode, config)
    if not own:
        reason += f"; island {k}'s archive is empty, so the parent comes from all islands"
    index = active_paradigm(state, config)
    parent = sampled if index is None else global_best(state, everyone)
    if index is not None:
        reason += f"; paradigm {index + 1} is active, so the global best #{parent.id} is the parent"
    local, top = context_programs(parent, members, everyone, config)
    return AdaEvolveDecision(
        k, mode, reason, parent, sampled, local, top, siblings(parent, population, k),
        None if index is None else state.paradigms[index], index, level, tuple(draws.draws), previous_error,
    )


def _mode_reason(k: int, g: float, level: float, u: float, mode: str, config: AdaEvolveConfig) -> str:
    explore, exploit = mode_cutoffs(level)
    source = f"G {g:.4g} gives I = {level:.4f}" if config.use_adaptive_search else f"fixed I = {level:.4f}"
    return f"island {k}: {source}; u = {u!r} against cut-offs {explore:.4f} / {exploit:.4f} → {mode}"


def global_best(state: AdaEvolveState, everyone: Sequence[Scored]) -> Candidate:
    """Returns the database best: best_program_id when still archived, else the top archived program."""
    by_id = {c.id: c for c, _ in everyone}
    if state.best_program_id in by_id:
        return by_id[state.best_program_id]  # type: ignore[index]
    return ranked(everyone)[0][0]


# ---------------------------------------------------------------- island updates


def local_update(state: AdaEvolveState, k: int, f: float, config: AdaEvolveConfig) -> AdaEvolveState:
    """Returns the state after island k's own admitted child: counts, G and best on improvement, UCB reward."""
    island, rho = state.islands[k], config.decay
    reward = 0.0
    if f > island.best:
        old = island.best
        reward = 1.0 if state.ucb_normaliser == NEG_INF else min((f - old) / (abs(state.ucb_normaliser) + EPS), 1.0)
        island = replace(_improved(island, f, rho), improvements=island.improvements + 1)
    island = replace(
        island, evaluations=island.evaluations + 1, visits=island.visits + 1,
        decayed_visits=rho * island.decayed_visits + 1, decayed_reward=rho * island.decayed_reward + reward,
    )
    return _with_island(replace(state, ucb_normaliser=max(state.ucb_normaliser, f)), k, island)


def external_update(state: AdaEvolveState, k: int, f: float, config: AdaEvolveConfig) -> AdaEvolveState:
    """Returns the state after a copy arrives on island k: G and best on improvement, no counts or reward."""
    island = state.islands[k]
    if f > island.best:
        island = _improved(island, f, config.decay)
    return _with_island(replace(state, ucb_normaliser=max(state.ucb_normaliser, f)), k, island)


def improvement(f: float, best: float) -> float:
    """Returns δ: 1 from −inf, else min((f − best)/(|best| + ε), 1)."""
    return 1.0 if best == NEG_INF else min((f - best) / (abs(best) + EPS), 1.0)


def _improved(island: IslandState, f: float, rho: float) -> IslandState:
    delta = improvement(f, island.best)
    return replace(island, g=rho * island.g + _complement(rho) * delta**2, best=f)


def _complement(rho: float) -> float:
    """Returns 1 − ρ computed exactly (1 − 0.9 is 0.09999999999999998 in floats; the seed's G should read 0.1)."""
    return float(1 - exact(rho))


def _with_island(state: AdaEvolveState, k: int, island: IslandState) -> AdaEvolveState:
    return replace(state, islands=(*state.islands[:k], island, *state.islands[k + 1 :]))


# ---------------------------------------------------------------- recording a candidate


def eval_failed(metrics: Mapping[str, Any]) -> bool:
    """Returns whether the metrics mark a failed evaluation (validity 0/−1, a bare timeout, a 0 score with error)."""
    validity = metrics.get("validity")
    if isinstance(validity, (int, float)) and validity in (0, -1):
        return True
    if metrics.get("timeout") is True and "validity" not in metrics:
        return True
    score = metrics.get("combined_score")
    return isinstance(score, (int, float)) and not isinstance(score, bool) and score == 0 and "error" in metrics


def attempted(state: AdaEvolveState, decision: AdaEvolveDecision, config: AdaEvolveConfig, attempts: int = 1
              ) -> AdaEvolveState:
    """Returns the state after an iteration's attempts: their draws, and a use of the paradigm for each attempt.

    Every attempt counts a use, failed ones included (§2.2 step 2); an idea used up meanwhile is not used further.
    """
    state = replace(state, rng_draws=state.rng_draws + len(decision.uniforms))
    index = decision.paradigm_index
    for _ in range(attempts if index is not None else 0):
        assert index is not None
        if index < len(state.paradigms) and usable(state.paradigms[index], config):
            state = use_paradigm(state, index, config)
    return state


def advance(state: AdaEvolveState, decision: AdaEvolveDecision, population: Population, config: AdaEvolveConfig,
            rng: UniformSource, iteration: int, attempts: int = 1) -> Step:
    """Returns the step of an iteration whose attempts gave no candidate: the paradigm uses, then end_iteration."""
    return end_iteration(attempted(state, decision, config, attempts), population, config, rng, iteration)


def record(state: AdaEvolveState, decision: AdaEvolveDecision, candidate: Candidate, metrics: Mapping[str, Any],
           population: Population, config: AdaEvolveConfig, attempts: int = 1) -> Step:
    """Returns the state and Population after an iteration's attempts: paradigm uses, then admission of the child."""
    state = attempted(state, decision, config, attempts)
    f = None if eval_failed(metrics) else oriented(candidate.fitness, config.direction)
    child = replace(candidate, id=max(candidate.id, population.next_id), island=decision.island,
                    operator=decision.mode, parents=tuple(p.id for p in decision.parents), raw=None)
    everyone = archive_of(population.candidates, None, config.direction)
    if f is not None and not everyone:
        return _seed(state, child, f, population, config)
    if f is None:
        # NaN and ±inf cannot be written (or compared); a failed evaluation is stored as `fitness null`.
        failed = _tagged(replace(child, fitness=None, status="error"), decision.island, decision.mode, "rejected")
        return _step(state, pop.add_candidate(population, failed), config)
    members = archive_of(population.candidates, decision.island, config.direction)
    weights = island_weights(decision.island, state.islands[decision.island].preset, config)
    verdict = admit(child.code or "", f, members, config.population_size, weights, config.k_neighbors,
                    config.objectives, pareto.vector_of(child, config.objectives))
    child = _tagged(child, decision.island, decision.mode, "admitted" if verdict.admitted else "rejected")
    population = pop.add_candidate(population, child)
    if not verdict.admitted:
        return _step(state, population, config)
    if verdict.evicted is not None:
        population = _replaced(population, with_archive_status(verdict.evicted, f"evicted@{candidate.gen}"))
    return _step(_admitted(state, decision.island, f, child.id, config), population, config)


def _admitted(state: AdaEvolveState, k: int, f: float, child_id: int, config: AdaEvolveConfig) -> AdaEvolveState:
    """Returns the state after island k admits its own child: local update, global best and window tick."""
    new_best = f > state.global_best
    state = local_update(state, k, f, config)
    if new_best:
        state = replace(state, global_best=f, best_program_id=child_id)
    state = tick(state, new_best, config)
    if state.paradigms:
        state = replace(state, best_during=max(state.best_during, state.global_best))
    return state


def _seed(state: AdaEvolveState, child: Candidate, f: float, population: Population, config: AdaEvolveConfig) -> Step:
    """Returns the step of the first scored program: island 0's local update, copies to the other islands."""
    child = _tagged(replace(child, island=0), 0, child.operator, "admitted")
    population = pop.add_candidate(population, child)
    state = _admitted(state, 0, f, child.id, config)
    for k in range(1, len(state.islands)):
        copy = _copy(child, k, population.next_id, "seed", child.gen, "Copied from")
        population = pop.add_candidate(population, copy)
        state = external_update(state, k, f, config)
    return _step(state, population, config)


def _tagged(candidate: Candidate, island: int, mode: str, status: str) -> Candidate:
    own = tuple((label, value) for label, value in candidate.extra if label != "Island")
    return replace(candidate, extra=(*archive_bullets(island, mode, status), *own))


def _copy(source: Candidate, island: int, new_id: int, mode: str, gen: int, label: str) -> Candidate:
    """Returns an admitted copy of source on another island, pointing back at it."""
    bullets = archive_bullets(island, mode, "admitted", (label, source.island or 0, source.id))
    # A copy keeps the source's objective values (its front is re-rendered with the Population's).
    objectives = tuple((k, v) for k, v in source.extra if k == pareto.BULLET)
    return replace(source, id=new_id, island=island, gen=gen, operator=mode, parents=(source.id,), notes="",
                   extra=(*bullets, *objectives), raw=None)


def _replaced(population: Population, candidate: Candidate) -> Population:
    candidates = tuple(candidate if c.id == candidate.id else c for c in population.candidates)
    return replace(population, candidates=candidates)


def _step(state: AdaEvolveState, population: Population, config: AdaEvolveConfig) -> Step:
    block = render_state_block(state, config, population.candidates)
    return Step(state, pop.with_strategy_state(population, block))


# ---------------------------------------------------------------- level 2: end of iteration


def productivity(state: AdaEvolveState) -> float:
    """Returns P = Σ improvements / Σ evaluations over the islands (1 before any evaluation)."""
    evaluations = sum(i.evaluations for i in state.islands)
    return 1.0 if evaluations == 0 else sum(i.improvements for i in state.islands) / evaluations


def spawn_due(state: AdaEvolveState, has_programs: bool, t: int, config: AdaEvolveConfig) -> bool:
    """Returns whether iteration t spawns an island (dynamic islands, room, cooldown, P below the threshold)."""
    return (config.use_dynamic_islands and has_programs and len(state.islands) < config.max_islands
            and t - state.last_spawn >= config.spawn_cooldown_iterations
            and productivity(state) < config.spawn_productivity_threshold)


def spawn_choices(state: AdaEvolveState, config: AdaEvolveConfig) -> tuple[str, ...]:
    """Returns the least-used presets, in the presets table's order (A8)."""
    counts = {p.name: sum(1 for i in state.islands if i.preset == p.name) for p in config.presets}
    fewest = min(counts.values())
    return tuple(name for name, count in counts.items() if count == fewest)


def next_island(state: AdaEvolveState, t: int, config: AdaEvolveConfig, rng: UniformSource) -> int:
    """Returns the island to evolve next: uniform among those under 3 visits, else the UCB argmax (A4)."""
    count = len(state.islands)
    if not config.use_ucb_selection:
        return (t + 1) % count
    low = [k for k, island in enumerate(state.islands) if island.visits < MIN_VISITS]
    if low:
        return low[0] if len(low) == 1 else low[min(int(rng.random() * len(low)), len(low) - 1)]
    scores = [ucb_score(island, t, config) or 0.0 for island in state.islands]
    return max(range(count), key=lambda k: (scores[k], -k))


def migration_due(t: int, islands: int, config: AdaEvolveConfig) -> bool:
    """Returns whether iteration t runs a ring migration."""
    return config.use_migration and islands > 1 and t > 0 and t % config.migration_interval == 0


def end_iteration(state: AdaEvolveState, population: Population, config: AdaEvolveConfig, rng: UniformSource,
                  iteration: int) -> Step:
    """Returns the state after iteration t's end: spawn check, next island by UCB, then migration (§2.2 step 4)."""
    draws = DrawRecorder(rng)
    state = replace(state, iteration=iteration)
    has_programs = bool(archive_of(population.candidates, None, config.direction))
    if spawn_due(state, has_programs, iteration, config):
        state, population = _spawn(state, population, config, draws.random(), iteration)
    state = replace(state, current_island=next_island(state, iteration, config, draws))
    if migration_due(iteration, len(state.islands), config):
        state, population = _migrate(state, population, config, iteration)
    return _step(replace(state, rng_draws=state.rng_draws + len(draws.draws)), population, config)


def _spawn(state: AdaEvolveState, population: Population, config: AdaEvolveConfig, u: float, t: int
           ) -> tuple[AdaEvolveState, Population]:
    """Returns the state with a fresh island of the drawn preset, filled with copies of the global top 5."""
    choices = spawn_choices(state, config)
    preset = choices[min(int(u * len(choices)), len(choices) - 1)]
    k = len(state.islands)
    state = replace(state, islands=(*state.islands, IslandState(preset=preset)), last_spawn=t)
    weights = island_weights(k, preset, config)
    seeds = spawn_seeds(population, k, config)
    for source, f in seeds:
        # Each copy goes through the new island's admission rule, as the reference's archive.add does: with a
        # population_size below 5 the crowding comparison decides which copies stay (none is adaptive).
        members = archive_of(population.candidates, k, config.direction)
        verdict = admit(source.code or "", f, members, config.population_size, weights, config.k_neighbors,
                        config.objectives, pareto.vector_of(source, config.objectives))
        if not verdict.admitted:
            continue
        if verdict.evicted is not None:
            population = _replaced(population, with_archive_status(verdict.evicted, f"evicted@{t}"))
        population = pop.add_candidate(population, _copy(source, k, population.next_id, "spawn", t, "Copied from"))
    logger.info("adaevolve: spawned island %d (%s) at iteration %d from %d programs", k, preset, t, len(seeds))
    return state, population


def spawn_seeds(population: Population, islands: int, config: AdaEvolveConfig) -> list[Scored]:
    """Returns the programs offered to a spawned island: the top min(5, N) by f over islands 0..islands−1.

    As the reference: the archives are listed island by island in stored order, ties keep that order, and
    equal code on two islands (the seed and its copies) is offered twice. Each offer then goes through the new
    island's admission rule (so a population_size below 5 keeps what crowding keeps, not the first ones).
    """
    members = [m for i in range(islands) for m in archive_of(population.candidates, i, config.direction)]
    return ranked(members)[:SPAWN_SEEDS]


def _migrate(state: AdaEvolveState, population: Population, config: AdaEvolveConfig, t: int
             ) -> tuple[AdaEvolveState, Population]:
    """Returns the state after a ring migration: src → src+1 in order, so a program may hop twice."""
    count = len(state.islands)
    for src in range(count):
        dst = (src + 1) % count
        senders = ranked(archive_of(population.candidates, src, config.direction))[: config.migration_count]
        for source, f in senders:
            state, population = _migrant(state, population, source, f, dst, config, t)
    return state, population


def _migrant(state: AdaEvolveState, population: Population, source: Candidate, f: float, dst: int,
             config: AdaEvolveConfig, t: int) -> tuple[AdaEvolveState, Population]:
    """Returns the state after offering one program to island dst (skipped when its code is already there)."""
    members = archive_of(population.candidates, dst, config.direction)
    if any((c.code or "") == (source.code or "") for c, _ in members):
        return state, population
    weights = island_weights(dst, state.islands[dst].preset, config)
    verdict = admit(source.code or "", f, members, config.population_size, weights, config.k_neighbors,
                    config.objectives, pareto.vector_of(source, config.objectives))
    if not verdict.admitted:
        return state, population
    if verdict.evicted is not None:
        population = _replaced(population, with_archive_status(verdict.evicted, f"evicted@{t}"))
    population = pop.add_candidate(population, _copy(source, dst, population.next_id, "migration", t, "Migrated from"))
    return external_update(state, dst, f, config), population
