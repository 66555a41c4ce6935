"""AlphaEvolve: seed 003's playbook made deterministic — operator, parents and island per iteration (spec §1)."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Iterable, Mapping, Protocol, Sequence, Union

from autoloop_py.population import (
    OPERATORS,
    Candidate,
    cell_of,
    complexity_bucket,
    evolved_lines,
    format_fitness,
    oriented,
)
from autoloop_py.program import Program
from autoloop_py.prompts import DataBlock, FileView, PromptContext, fence_for, prompt_view
from autoloop_py.render import render
from autoloop_py.strategies.alphaevolve_config import AlphaEvolveConfig, Island
from autoloop_py.strategies.base import Decision, StrategyContext

logger = logging.getLogger(__name__)

REVISIT_NOTE = (
    "The last 5 candidates were all rejected: revisit the domain knowledge in the framing below "
    "that no population member has applied yet."
)
TWO_PARENT_OPERATORS = ("crossover", "migration")
Weights = Union[Sequence[tuple[str, Fraction]], Mapping[str, Fraction]]
_Scored = tuple[float, Candidate]


class UniformSource(Protocol):
    """Anything that draws uniforms in [0, 1) like `random.Random.random` (tests pass a fake)."""

    def random(self) -> float:
        """Returns the next uniform in [0, 1)."""
        ...


class _Recorder:
    """Wraps a uniform source and keeps every draw, so a Decision can be replayed."""

    def __init__(self, source: UniformSource) -> None:
        self.source = source
        self.draws: list[float] = []

    def random(self) -> float:
        """Returns the source's next uniform and records it."""
        value = self.source.random()
        self.draws.append(value)
        return value


class AlphaEvolve:
    """The AlphaEvolve strategy: a pure function of the population, recent statuses and a seeded RNG."""

    name = "alphaevolve"

    def __init__(self, config: AlphaEvolveConfig) -> None:
        self.config = config

    def decide(self, context: StrategyContext, rng: random.Random) -> Decision:
        """Returns this iteration's operator, parents and child island (§1.2 steps 1–3)."""
        draws = _Recorder(rng)
        population = tuple(sorted(context.population, key=lambda c: c.id, reverse=True))
        chosen = override(population, context.recent_statuses, self.config.islands)
        if chosen is None:
            chosen = _sampled(self.config.operator_weights, draws.random())
        operator, reason, forced = chosen
        effective, why = effective_operator(operator, population)
        parents, island, new_island = parents_for(
            effective, population, self.config, context.direction, draws, forced
        )
        notes = (REVISIT_NOTE,) if len(population) > 1 and _last_rejected(context.recent_statuses, 5) else ()
        reason = f"{reason}; {why}" if why else reason
        logger.debug("alphaevolve decided %s (%s)", effective, reason)
        return Decision(effective, reason, parents, island, new_island, notes, tuple(draws.draws))


# --- operator --------------------------------------------------------------------------------------


def operator_intervals(weights: Weights) -> tuple[tuple[str, Fraction, Fraction], ...]:
    """Returns each operator's [low, high) share of [0, 1), from exact cumulative weights in table order."""
    pairs = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
    intervals = []
    low = Fraction(0)
    for operator, weight in pairs:
        high = low + _exact(weight)
        intervals.append((operator, low, high))
        low = high
    return tuple(intervals)


def pick_operator(weights: Weights, u: float | Fraction) -> str:
    """Returns the operator whose cumulative-weight interval holds u (T1: u = 0.95 → migration)."""
    exact = _exact(u)
    if not 0 <= exact < 1:
        raise ValueError(f"a uniform must lie in [0, 1), got {u!r}")
    for operator, _, high in operator_intervals(weights):
        if exact < high:
            return operator
    raise ValueError(f"operator weights sum to less than {u!r}; they must sum to 1")


def _exact(value: float | Fraction | str | int) -> Fraction:
    """Returns a number as an exact fraction, reading a float as the decimal it prints as.

    Fraction(0.95) is 0.94999999999999995559…, below the threshold 19/20, so T1's u = 0.95 would
    fall to crossover; reading repr(0.95) gives exactly 19/20 as the spec's table means.
    """
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def _sampled(weights: Weights, u: float) -> tuple[str, str, None]:
    """Returns the sampled operator with a reason naming u and the interval it fell in."""
    operator = pick_operator(weights, u)
    _, low, high = next(i for i in operator_intervals(weights) if i[0] == operator)
    return operator, f"sampled: u = {u!r} fell in {operator}'s interval [{float(low):g}, {float(high):g})", None


def override(
    population: Sequence[Candidate], recent_statuses: Sequence[str], islands: Sequence[Island]
) -> tuple[str, str, int | None] | None:
    """Returns (operator, reason, forced island) when a deterministic override applies (§1.2 step 1 a–c)."""
    n = len(population)
    if n <= 1:
        return "exploration", f"the population has {n} member{'' if n == 1 else 's'}: seed diversity", None
    if _last_rejected(recent_statuses, 5):
        if len(_islands_of(_with_fitness(population))) >= 2:
            return "migration", "the last 5 candidates were all rejected: graft a technique across islands", None
        reason = "the last 5 candidates were all rejected and fewer than two islands hold scored members"
        island = _unused_island(population, islands, open_new=True)
        return "exploration", f"{reason}: try a radically new island", island
    if _last_rejected(recent_statuses, 3):
        island = _unused_island(population, islands, open_new=False)
        return "exploration", "the last 3 candidates were all rejected: explore an island not used yet", island
    return None


def _last_rejected(statuses: Sequence[str], count: int) -> bool:
    """Returns whether the last `count` statuses are all literally `rejected` (errors do not count)."""
    return len(statuses) >= count and all(s == "rejected" for s in statuses[-count:])


def effective_operator(operator: str, population: Sequence[Candidate]) -> tuple[str, str]:
    """Returns the operator the population supports, and why it changed ('' if unchanged) (§1.5)."""
    if operator not in OPERATORS:
        raise ValueError(f"unknown AlphaEvolve operator {operator!r}")
    scored = _with_fitness(population)
    if not scored and operator != "exploration":
        return "exploration", f"{operator} needs a scored parent and no member has a fitness yet"
    if operator in TWO_PARENT_OPERATORS and len(_islands_of(scored)) < 2:
        fallback = "exploitation" if operator == "crossover" else "exploration"
        return fallback, f"{operator} needs scored members on two islands; only one island has them"
    return operator, ""


# --- parents -----------------------------------------------------------------------------------------


def parents_for(
    operator: str,
    population: Sequence[Candidate],
    config: AlphaEvolveConfig,
    direction: str,
    rng: UniformSource,
    forced_island: int | None = None,
) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns (parents, child island, child opens a new island) for an operator (§1.2 steps 2–3, §1.5)."""
    operator, _ = effective_operator(operator, population)
    scored = [(f, c) for c in population if (f := oriented(c.fitness, direction)) is not None]
    if operator == "exploration":
        return _exploration(population, scored, config.islands, forced_island)
    return _PARENT_PICKERS[operator](scored, rng)


def _exploitation(scored: list[_Scored], rng: UniformSource) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns the best member (ties → higher id, the most recent) and its island."""
    best = _best(scored)
    return (best,), best.island, False


def _crossover(scored: list[_Scored], rng: UniformSource) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns A uniform from the top quartile and B the best on another island and cell (else any cell)."""
    ranked = sorted(scored, key=_rank, reverse=True)
    top = ranked[: max(1, len(ranked) // 4)]
    a = top[min(int(rng.random() * len(top)), len(top) - 1)][1]
    elsewhere = [s for s in scored if s[1].island != a.island]
    # effective_operator guarantees two scored islands, so `elsewhere` is never empty.
    other_cell = [s for s in elsewhere if cell_of(s[1]) != cell_of(a)]
    b = _best(other_cell or elsewhere)
    return (a, b), a.island, False


def _migration(scored: list[_Scored], rng: UniformSource) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns [recipient best, donor best]: donor has the highest island best, recipient the lowest other."""
    bests = [(_best(members), island) for island, members in _by_island(scored).items()]
    scores = {c.id: f for f, c in scored}
    donor, donor_island = max(bests, key=lambda b: (scores[b[0].id], -_index(b[1])))
    others = [b for b in bests if b[1] != donor_island]
    recipient, recipient_island = min(others, key=lambda b: (scores[b[0].id], _index(b[1])))
    return (recipient, donor), recipient_island, False


_Picker = Callable[[list[_Scored], UniformSource], tuple[tuple[Candidate, ...], int | None, bool]]
# Exploration is not here: it also needs the islands and the forced target (see parents_for).
_PARENT_PICKERS: dict[str, _Picker] = {"exploitation": _exploitation, "crossover": _crossover, "migration": _migration}


def _exploration(
    population: Sequence[Candidate], scored: list[_Scored], islands: Sequence[Island], forced: int | None
) -> tuple[tuple[Candidate, ...], int | None, bool]:
    """Returns the target island's best (or no parent: from scratch) and the target island."""
    target = forced if forced is not None else _emptiest_island(population, islands)
    members = [s for s in scored if s[1].island == target]
    parents = (_best(members),) if members else ()
    return parents, target, not any(c.island == target for c in population)


def _emptiest_island(population: Sequence[Candidate], islands: Sequence[Island]) -> int:
    """Returns the known island with the fewest members (ties → lower index); 0 when none is known."""
    known = _known_islands(population, islands)
    if not known:
        return 0
    counts = {i: 0 for i in known}
    for candidate in population:
        if candidate.island is not None:
            counts[candidate.island] += 1
    return min(known, key=lambda i: (counts[i], i))


def _unused_island(population: Sequence[Candidate], islands: Sequence[Island], *, open_new: bool) -> int:
    """Returns the lowest configured island nobody used; else a brand-new index or the emptiest island."""
    used = {c.island for c in population}
    unused = sorted(i.index for i in islands if i.index not in used)
    if unused:
        return unused[0]
    if open_new:
        return max(_known_islands(population, islands), default=-1) + 1
    return _emptiest_island(population, islands)


def _known_islands(population: Sequence[Candidate], islands: Sequence[Island]) -> list[int]:
    """Returns the configured island indices plus any index a member carries, sorted."""
    found = {i.index for i in islands} | {c.island for c in population if c.island is not None}
    return sorted(found)


def _with_fitness(population: Iterable[Candidate]) -> list[_Scored]:
    """Returns the members with a usable fitness (direction does not matter for which ones)."""
    return [(f, c) for c in population if (f := oriented(c.fitness, "higher")) is not None]


def _islands_of(scored: Iterable[_Scored]) -> set[int | None]:
    """Returns the distinct islands of scored members."""
    return {c.island for _, c in scored}


def _by_island(scored: Iterable[_Scored]) -> dict[int | None, list[_Scored]]:
    """Returns scored members grouped by island."""
    groups: dict[int | None, list[_Scored]] = {}
    for item in scored:
        groups.setdefault(item[1].island, []).append(item)
    return groups


def _rank(item: _Scored) -> tuple[float, int]:
    """Returns the sort key of a scored member: oriented fitness, then id (newer wins ties)."""
    return item[0], item[1].id


def _best(scored: Sequence[_Scored]) -> Candidate:
    """Returns the member with the highest oriented fitness, ties → higher id."""
    return max(scored, key=_rank)[1]


def _index(island: int | None) -> int:
    """Returns an island index for ordering (no island sorts first)."""
    return -1 if island is None else island


# --- feature cell ------------------------------------------------------------------------------------


def find_island(config: AlphaEvolveConfig, index: int | None) -> Island | None:
    """Returns the configured island with that index, or None (no island, or one the LLM opened)."""
    return next((i for i in config.islands if i.index == index), None)


def cell_for(island: Island | None, code: str, config: AlphaEvolveConfig) -> tuple[str, str]:
    """Returns the MAP-Elites cell (island name, complexity bucket of the evolved code's lines) (§1.2 step 4)."""
    name = island.name if island is not None else "unassigned"
    return name, complexity_bucket(evolved_lines(code), config.complexity_thresholds)


# --- prompt ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParentView:
    """A parent as the prompt shows it.

    Attributes:
      label: "Parent A", "Parent B", or "Parent" for a single-parent operator (migration names roles).
      candidate: the parent.
      island: "<index> — <name>" (or "none").
      fitness: the raw fitness as text ("null" when missing).
      fence: a fence its code cannot close.
      code: its full source, or '' when only a reference is stored.
    """

    label: str
    candidate: Candidate
    island: str
    fitness: str
    fence: str
    code: str


@dataclass(frozen=True)
class IslandView:
    """An island line of the prompt.

    Attributes:
      index: the island index.
      name: the family name ("new island: name it" when the LLM opens it).
      description: one line on the family.
      child: the child will belong to this island.
    """

    index: int
    name: str
    description: str
    child: bool


@dataclass(frozen=True)
class AlphaEvolvePromptView:
    """The one object `alphaevolve_prompt.md.j2` renders.

    Attributes:
      program: the program's name.
      goal: the Goal text.
      metric: the metric's name (None when unconfigured).
      direction: 'higher' or 'lower'.
      best: the current best metric as text, or None.
      decision: the decision being carried out.
      child_island: the child's island as "<index> — <name>" ("none" without islands).
      mutation: the operator is exploitation or exploration (else crossover or migration).
      parents: the parents, the one to edit first.
      islands: every island, configured and opened, with the child's marked.
      framing_name: the framing file's name under strategy/prompts/.
      framing: its text; framing_fence: a fence it cannot close.
      validity_checks: the playbook's cheap invariants.
      full_rewrite: the playbook's diff style is a full rewrite of the evolve block.
      name_new_island: the child opens an island the playbook does not list, so the reply must name it.
      data: Foreclosed Avenues and Lessons, fenced as data.
      files: the Target files as they are in the worktree.
      include: the Target patterns; exclude: the Do-not-modify patterns.
      example_path: the path used in the reply example.
    """

    program: str
    goal: str
    metric: str | None
    direction: str
    best: str | None
    decision: Decision
    child_island: str
    mutation: bool
    parents: tuple[ParentView, ...]
    islands: tuple[IslandView, ...]
    framing_name: str
    framing: str
    framing_fence: str
    validity_checks: tuple[str, ...]
    full_rewrite: bool
    name_new_island: bool
    data: tuple[DataBlock, ...]
    files: tuple[FileView, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    example_path: str

    @property
    def evolve(self) -> bool:
        """Returns whether any Target file has EVOLVE-BLOCK markers."""
        return any(f.evolve for f in self.files)


def framing_file(operator: str) -> str:
    """Returns the framing file an operator needs: mutation.md or crossover.md (under strategy/prompts/)."""
    return "crossover.md" if operator in TWO_PARENT_OPERATORS else "mutation.md"


def render_prompt(
    decision: Decision,
    config: AlphaEvolveConfig,
    *,
    program: Program,
    files: Mapping[str, str],
    framing: str,
    foreclosed: tuple[str, ...],
    lessons: tuple[str, ...],
    best_metric: float | None,
    direction: str,
) -> str:
    """Returns the AlphaEvolve iteration prompt: the decision, parents' code, framing, islands and reply format."""
    # The iteration number is not shown: the decision already says what this iteration does.
    base = prompt_view(PromptContext(program=program, files=files, best_metric=best_metric, iteration=0))
    view = AlphaEvolvePromptView(
        program=program.name,
        goal=base.goal,
        metric=base.metric,
        direction=direction,
        best=base.best,
        decision=decision,
        child_island=_island_text(decision.island, config),
        mutation=decision.operator not in TWO_PARENT_OPERATORS,
        parents=_parent_views(decision, config),
        islands=_island_views(decision, config),
        framing_name=framing_file(decision.operator),
        framing=_with_newline(framing.strip()),
        framing_fence=fence_for(framing),
        validity_checks=config.validity_checks,
        full_rewrite=config.diff_style != "minimal_diff",
        name_new_island=_opens_unlisted_island(decision, config),
        data=_data_blocks(foreclosed, lessons),
        files=base.files,
        include=base.include,
        exclude=base.exclude,
        example_path=base.example_path,
    )
    return render("alphaevolve_prompt.md.j2", view=view)


def _opens_unlisted_island(decision: Decision, config: AlphaEvolveConfig) -> bool:
    """Returns whether the child opens an island the playbook does not list (the reply must name it)."""
    return decision.new_island and decision.island is not None and find_island(config, decision.island) is None


def _parent_views(decision: Decision, config: AlphaEvolveConfig) -> tuple[ParentView, ...]:
    """Returns the parents as shown, labelled by role."""
    labels = ("Parent",) if len(decision.parents) == 1 else ("Parent A", "Parent B")
    if decision.operator == "migration" and len(decision.parents) == 2:
        labels = ("Parent A (recipient: edit this one)", "Parent B (donor of the technique)")
    return tuple(_parent_view(label, c, config) for label, c in zip(labels, decision.parents))


def _parent_view(label: str, candidate: Candidate, config: AlphaEvolveConfig) -> ParentView:
    """Returns one parent's display form."""
    code = _with_newline(candidate.code or "")
    where = _island_text(candidate.island, config)
    return ParentView(label, candidate, where, format_fitness(candidate.fitness), fence_for(code), code)


def _island_text(index: int | None, config: AlphaEvolveConfig) -> str:
    """Returns an island as "<index> — <name>", the bare index when not configured, or "none"."""
    if index is None:
        return "none"
    island = find_island(config, index)
    return f"{index} — {island.name}" if island else str(index)


def _island_views(decision: Decision, config: AlphaEvolveConfig) -> tuple[IslandView, ...]:
    """Returns the configured islands plus any island the parents or the child use that is not configured."""
    shown = {i.index: IslandView(i.index, i.name, i.description, i.index == decision.island) for i in config.islands}
    # An island the LLM opened earlier is named by its members' first feature-cell bucket.
    names = {p.island: p.cell[0] for p in decision.parents if p.cell}
    used = {p.island for p in decision.parents} | {decision.island}
    for index in sorted(i for i in used if i is not None and i not in shown):
        fallback = "new island: name its family in your reply" if index == decision.island else "opened earlier"
        shown[index] = IslandView(index, names.get(index, fallback), "", index == decision.island)
    return tuple(shown[i] for i in sorted(shown))


def _data_blocks(foreclosed: tuple[str, ...], lessons: tuple[str, ...]) -> tuple[DataBlock, ...]:
    """Returns the non-empty Foreclosed Avenues and Lessons sections, bulleted and fenced as data."""
    blocks = []
    for title, items in (("Foreclosed avenues (already shown not to work)", foreclosed), ("Lessons", lessons)):
        texts = [item.strip() for item in items if item.strip()]
        if texts:
            body = "\n".join(f"- {t}" for t in texts) + "\n"
            blocks.append(DataBlock(title, body, fence_for(body)))
    return tuple(blocks)


def _with_newline(text: str) -> str:
    """Returns text ending with a newline (empty text stays empty)."""
    return text if not text or text.endswith("\n") else text + "\n"
