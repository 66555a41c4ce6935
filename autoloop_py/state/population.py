"""Population: the candidates a strategy has tried, their ranking, and eviction down to the cap.

The section's dataclasses live in population_model.py and its text form in population_markdown.py;
both are re-exported here, so `autoloop_py.state.population` stays the one import path for the whole API.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import replace
from typing import Callable, Iterable, Sequence

from autoloop_py.render import render
from autoloop_py.state import file as statefile
from autoloop_py.state.parts import one_line
from autoloop_py.state.population_fold import unfold_entries
from autoloop_py.state.population_markdown import (
    check_writable,
    format_fitness,
    parse_population,
    render_population,
    with_strategy_state,
)
from autoloop_py.state.population_model import (
    CANDIDATE_STATUSES,
    OPERATORS,
    Candidate,
    LayoutItem,
    Population,
    RawBlock,
    StateSlot,
    evolved_lines,
)

logger = logging.getLogger(__name__)

NO_CELL = ("—", "—")


# ---------------------------------------------------------------- numbers, cells, ranking


def oriented(fitness: float | None, direction: str) -> float | None:
    """Returns f = m for higher-is-better or -m for lower; None when m is None, NaN, infinite or a bool."""
    if direction not in ("higher", "lower"):
        raise ValueError(f"metric direction must be 'higher' or 'lower', not {direction!r}")
    if fitness is None or isinstance(fitness, bool) or not isinstance(fitness, (int, float)):
        return None
    value = float(fitness)
    if not math.isfinite(value):
        return None
    return value if direction == "higher" else -value


def complexity_bucket(lines: int, thresholds: tuple[int, int] = (40, 100)) -> str:
    """Returns `small` below thresholds[0] lines, `large` above thresholds[1], else `medium`."""
    if lines < thresholds[0]:
        return "small"
    return "large" if lines > thresholds[1] else "medium"


def cell_of(candidate: Candidate) -> tuple[str, str] | None:
    """Returns the candidate's feature cell for grouping (case and spacing ignored), None when it has none."""
    if candidate.cell is None:
        return None
    first, second = (" ".join(part.split()).casefold() for part in candidate.cell)
    return first, second


def elites(candidates: Iterable[Candidate], archive_size: int, direction: str) -> list[Candidate]:
    """Returns the top `archive_size` scored candidates by oriented fitness, best first; ties go to the newer."""
    scored = [c for c in candidates if oriented(c.fitness, direction) is not None]
    scored.sort(key=lambda c: (_score(c, direction), c.id), reverse=True)
    return scored[: max(archive_size, 0)]


def cell_bests(candidates: Iterable[Candidate], direction: str) -> dict[tuple[str, str], Candidate]:
    """Returns each cell's best scored member (cell-less members share NO_CELL); ties go to the newer."""
    bests: dict[tuple[str, str], Candidate] = {}
    for candidate in candidates:
        if oriented(candidate.fitness, direction) is None:
            continue
        key = cell_of(candidate) or NO_CELL
        held = bests.get(key)
        if held is None or (_score(candidate, direction), candidate.id) > (_score(held, direction), held.id):
            bests[key] = candidate
    return bests


def evict(
    population: Population, cap: int, archive_size: int, direction: str
) -> tuple[Population, tuple[Candidate, ...]]:
    """Returns the population cut to `cap` members and the evicted ones (strategies.md §1.2 step 7)."""
    members = list(population.candidates)
    evicted: list[Candidate] = []
    while len(members) > cap:
        victim = _victim(members, archive_size, direction)
        if victim is None:
            logger.warning(
                "population has %d members, over its cap of %d, but each is an elite or the best of its cell; "
                "keeping them all (raise the cap or lower the archive size)",
                len(members),
                cap,
            )
            break
        members.remove(victim)
        evicted.append(victim)
    return replace(population, candidates=tuple(members)), tuple(evicted)


def _victim(members: Sequence[Candidate], archive_size: int, direction: str) -> Candidate | None:
    protected = {c.id for c in elites(members, archive_size, direction)}
    protected |= {c.id for c in cell_bests(members, direction).values()}
    cells: dict[tuple[str, str], list[Candidate]] = {}
    for candidate in members:
        cells.setdefault(cell_of(candidate) or NO_CELL, []).append(candidate)
    order = sorted(cells.items(), key=lambda kv: (-len(kv[1]), min(_score(c, direction) for c in kv[1]), kv[0]))
    for _, group in order:
        open_ = [c for c in group if c.id not in protected]
        if open_:
            return min(open_, key=lambda c: (_score(c, direction), c.id))
    return None


def _score(candidate: Candidate, direction: str) -> float:
    value = oriented(candidate.fitness, direction)
    return -math.inf if value is None else value


# ---------------------------------------------------------------- building and changing

# The intro's generated line (templates/population_intro.md.j2): `> 🤖 *Managed by the <Strategy> strategy.`
_MANAGED_RE = re.compile(r"(?m)^(>[ \t]*🤖[ \t]*\*Managed by the )[^*\n]+?( strategy\.)")


def empty_population(strategy_name: str = "AlphaEvolve") -> Population:
    """Returns a section with its heading and intro and no candidates."""
    text = render("population_intro.md.j2", strategy=strategy_name)
    heading, _, intro = text.partition("\n")
    return Population(candidates=(), intro=intro, heading=heading + "\n")


def with_strategy_name(population: Population, name: str) -> Population:
    """Returns the population whose intro line names the strategy managing it, the rest of the intro as written.

    State files written before the intro named the program's strategy say "Managed by the AlphaEvolve
    strategy" whatever runs; they read as before, and the next write names the strategy that runs.
    """
    intro = _MANAGED_RE.sub(lambda found: f"{found.group(1)}{name}{found.group(2)}", population.intro, count=1)
    return population if intro == population.intro else replace(population, intro=intro)


def add_candidate(population: Population, candidate: Candidate) -> Population:
    """Returns the population with the candidate first; raises ValueError on a used, lower or unwritable id."""
    ids = {c.id for c in population.candidates}
    if candidate.id in ids:
        raise ValueError(f"candidate id {candidate.id} is already in the population; use {population.next_id}")
    if candidate.id < population.next_id:
        raise ValueError(f"candidate id {candidate.id} is below next_id {population.next_id}; ids only grow")
    entry = normalized(candidate)
    check_writable(entry)
    return replace(
        population, candidates=(entry, *population.candidates), next_id=max(population.next_id, entry.id + 1)
    )


def fold_code(
    population: Population, keep: Callable[[Candidate], bool], ref_for: Callable[[Candidate], str]
) -> Population:
    """Returns the population with the code of candidates not kept replaced by a reference to the full source."""
    out = []
    for candidate in population.candidates:
        if candidate.code is not None and not keep(candidate):
            candidate = replace(candidate, code=None, code_ref=ref_for(candidate), raw=None)
            check_writable(candidate)
        out.append(candidate)
    return replace(population, candidates=tuple(out))


def normalized(candidate: Candidate) -> Candidate:
    """Returns the candidate as it reads back from the file: one-line texts, newline-ended code, no raw."""
    code = candidate.code
    if code is not None:
        code = code.replace("\r\n", "\n").replace("\r", "\n")
        code = code if not code or code.endswith("\n") else code + "\n"
    return replace(
        candidate,
        operator=one_line(candidate.operator),
        parents=tuple(int(p) for p in candidate.parents),
        cell=None if candidate.cell is None else (one_line(candidate.cell[0]), one_line(candidate.cell[1])),
        approach=one_line(candidate.approach),
        notes=one_line(candidate.notes),
        code=code,
        code_ref=None if code is not None or candidate.code_ref is None else candidate.code_ref.strip(),
        language=candidate.language.strip(),
        extra=tuple((one_line(label), one_line(value)) for label, value in candidate.extra),
        raw=None,
    )


def population_of(state: statefile.StateFile, load: Callable[[str], str | None] | None = None) -> Population:
    """Returns the state file's Population (an empty one when the section is missing).

    load: reads a memory-branch file; given, the entries folded out of the state file are read back.
    """
    text = state.section_text(statefile.POPULATION)
    if text is None:
        return empty_population()
    population = parse_population(text, state.path, statefile.section_line(state, statefile.POPULATION))
    return population if load is None else unfold_entries(population, load, state.path)
