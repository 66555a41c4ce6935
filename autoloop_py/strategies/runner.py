"""The strategy side of an iteration: decide, put the parent in place, prompt, and record the candidate."""

from __future__ import annotations

import dataclasses
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from autoloop_py import edits
from autoloop_py import population as pop
from autoloop_py import state as statefile
from autoloop_py.errors import ProgramError
from autoloop_py.playbook import Playbook, load_config_yaml, runnable_playbook
from autoloop_py.program import Program, target_files
from autoloop_py.strategies import alphaevolve, alphaevolve_prompt
from autoloop_py.strategies.alphaevolve_config import AlphaEvolveConfig, parse_alphaevolve_config
from autoloop_py.strategies.base import Decision, StrategyContext

log = logging.getLogger(__name__)

SUPPORTED = ("alphaevolve",)
CANDIDATES_DIR = "candidates"


@dataclass(frozen=True)
class StrategyRunner:
    """A program's strategy, ready to run.

    Attributes:
      playbook: the customised playbook the program points to.
      config: its tunables (playbook tables overridden by code/config.yaml).
      engine: the pure decision engine.
      primary: the repo-relative Target file whose evolved block the population records.
    """

    playbook: Playbook
    config: AlphaEvolveConfig
    engine: alphaevolve.AlphaEvolve
    primary: str


def load_runner(program: Program, root: Path) -> StrategyRunner | None:
    """Returns the program's strategy runner, or None for the default flow; refuses unresolved markers."""
    playbook = runnable_playbook(program, root)
    if playbook is None:
        return None
    if playbook.name not in SUPPORTED:
        raise ProgramError(f"strategy '{playbook.name}' is not supported; available: {', '.join(SUPPORTED)}", playbook.path)
    config = parse_alphaevolve_config(playbook, load_config_yaml(program, root))
    return StrategyRunner(playbook, config, alphaevolve.AlphaEvolve(config), primary_target(program, root))


def primary_target(program: Program, root: Path) -> str:
    """Returns the Target file a strategy evolves: the first with EVOLVE-BLOCK markers, else the first."""
    paths = target_files(program.target, root)
    if not paths:
        raise ProgramError("a strategy needs at least one existing Target file", program.path)
    for path in paths:
        if edits.evolve_regions((root / path).read_text(encoding="utf-8")):
            return path
    return paths[0]


def population_of(state: statefile.StateFile) -> pop.Population:
    """Returns the state file's Population (an empty one when the section is missing)."""
    text = state.section_text(statefile.POPULATION)
    if text is None:
        return pop.empty_population()
    return pop.parse_population(text, state.path, _first_line(state, statefile.POPULATION))


def _first_line(state: statefile.StateFile, key: str) -> int:
    line = 0
    for section in state.sections:
        if section.key == key:
            return line
        line += len(section.text.splitlines())
    return line


def decide(
    runner: StrategyRunner,
    state: statefile.StateFile,
    best: float | None,
    iteration: int,
    direction: str,
    rng: random.Random,
    load_code: Callable[[str], str | None],
) -> Decision:
    """Returns this iteration's decision, with every parent's code loaded (folded code read back)."""
    population = population_of(state)
    context = StrategyContext(
        population=population.candidates,
        recent_statuses=state.machine.recent_statuses,
        best_metric=best,
        iteration=iteration,
        direction=direction,
        next_id=population.next_id,
    )
    decision = runner.engine.decide(context, rng)
    parents = tuple(_with_code(p, load_code) for p in decision.parents)
    return dataclasses.replace(decision, parents=parents)


def _with_code(candidate: pop.Candidate, load_code: Callable[[str], str | None]) -> pop.Candidate:
    if candidate.code is not None or candidate.code_ref is None:
        return candidate
    code = load_code(candidate.code_ref)
    if code is None:
        log.warning("candidate %d: its source %s is missing from the memory branch", candidate.id, candidate.code_ref)
    return dataclasses.replace(candidate, code=code)


def with_parent(runner: StrategyRunner, decision: Decision, files: Mapping[str, str]) -> dict[str, str]:
    """Returns the Target files with the first parent's code in the evolved block (unchanged without a parent)."""
    current = dict(files)
    if not decision.parents or decision.parents[0].code is None or runner.primary not in current:
        return current
    current[runner.primary] = place_code(current[runner.primary], decision.parents[0].code)
    return current


def place_code(text: str, code: str) -> str:
    """Returns text with its EVOLVE-BLOCK content replaced by code (the whole text when it has no block)."""
    regions = edits.evolve_regions(text)
    if not regions:
        return code
    start, end = regions[0]
    lines = text.splitlines(keepends=True)
    body = code if code.endswith("\n") or not code else code + "\n"
    return "".join(lines[:start]) + body + "".join(lines[end:])


def evolved_code(text: str) -> str:
    """Returns the content of the first EVOLVE-BLOCK (the whole text when there is none)."""
    regions = edits.evolve_regions(text)
    if not regions:
        return text
    start, end = regions[0]
    return "".join(text.splitlines(keepends=True)[start:end])


def render_prompt(
    runner: StrategyRunner,
    decision: Decision,
    program: Program,
    files: Mapping[str, str],
    state: statefile.StateFile,
    best: float | None,
    root: Path,
    directives: tuple[str, ...] = (),
) -> str:
    """Returns the strategy's prompt, with the framing file the operator needs (and only that one)."""
    framing_path = root / runner.playbook.framing_path(decision.operator)
    framing = framing_path.read_text(encoding="utf-8") if framing_path.is_file() else ""
    return alphaevolve_prompt.render_prompt(
        decision,
        runner.config,
        program=program,
        files=files,
        framing=framing,
        foreclosed=state.foreclosed,
        lessons=state.lessons,
        best_metric=best,
        direction=program.direction,
        directives=directives,
    )


def candidate_for(
    runner: StrategyRunner,
    decision: Decision,
    record: statefile.IterationRecord,
    source: str,
    approach: str | None,
    iteration: int,
) -> pop.Candidate:
    """Returns the population entry of an evaluated candidate (its id is assigned when recorded)."""
    code = evolved_code(source)
    island = alphaevolve.find_island(runner.config, decision.island)
    return pop.Candidate(
        id=0,
        island=decision.island,
        fitness=record.metric if record.status != "error" else None,
        gen=iteration,
        operator=decision.operator,
        parents=tuple(p.id for p in decision.parents),
        cell=alphaevolve.cell_for(island, code, runner.config),
        approach=approach or record.change,
        status=record.status,
        notes=record.lesson or record.notes,
        code=code,
        language=language_of(runner.primary),
    )


def history_bullets(decision: Decision, metric: float | None) -> tuple[tuple[str, str], ...]:
    """Returns the extra Iteration History bullets a strategy iteration carries."""
    parents = ", ".join(str(p.id) for p in decision.parents) or "—"
    island = "—" if decision.island is None else str(decision.island)
    return (
        ("Operator", f"{decision.operator} — {decision.reason}"),
        ("Parent(s)", parents),
        ("Island", island),
        ("Fitness", pop.format_fitness(metric)),
    )


def record_candidate(
    state: statefile.StateFile,
    runner: StrategyRunner,
    candidate: pop.Candidate,
    program: Program,
    budget: int,
) -> tuple[statefile.StateFile, pop.Candidate]:
    """Returns the state with the candidate added to the Population (capped, code folded to fit) and its id."""
    population = population_of(state)
    candidate = dataclasses.replace(candidate, id=population.next_id)
    population = pop.add_candidate(population, candidate)
    population, evicted = pop.evict(population, runner.config.population_size, runner.config.archive_size, program.direction)
    if evicted:
        log.info("%s: evicted candidate(s) %s", program.name, ", ".join(str(c.id) for c in evicted))
    state = statefile.with_section(state, statefile.POPULATION, pop.render_population(population))
    state = _fit(state, population, runner, program, budget)
    return statefile.compact(state, budget), candidate


def _fit(
    state: statefile.StateFile, population: pop.Population, runner: StrategyRunner, program: Program, budget: int
) -> statefile.StateFile:
    """Returns the state with code folded into memory-branch references until it fits.

    Non-elite code folds first, oldest first, down to 80 % of the budget (above that, compaction keeps
    only 5 detailed history entries); past the budget the elites' code folds too, worst first, but the
    best candidate's code always stays. Every source stays on the memory branch, so nothing is lost.
    """
    direction = program.direction
    elites = sorted(
        pop.elites(population.candidates, runner.config.archive_size, direction),
        key=lambda c: (pop.oriented(c.fitness, direction) or float("-inf"), c.id),
    )
    elite_ids = {c.id for c in elites}
    others = sorted(c.id for c in population.candidates if c.id not in elite_ids and c.code is not None)
    stages = ((others, budget * statefile.TIGHT_FRACTION), ([c.id for c in elites[:-1] if c.code is not None], budget))
    folded: set[int] = set()
    for order, limit in stages:
        for candidate_id in order:
            if _size(state) <= limit:
                break
            folded.add(candidate_id)
            smaller = pop.fold_code(population, lambda c: c.id not in folded, lambda c: code_path(program, c))
            state = statefile.with_section(state, statefile.POPULATION, pop.render_population(smaller))
    return state


def code_path(program: Program, candidate: pop.Candidate) -> str:
    """Returns where a candidate's full source is kept on the memory branch."""
    return f"{CANDIDATES_DIR}/{program.name}/{candidate.id}{_suffix(candidate.language)}"


def _size(state: statefile.StateFile) -> int:
    return len(statefile.render_state(state).encode("utf-8"))


def language_of(path: str) -> str:
    suffix = Path(path).suffix.lstrip(".")
    return {"py": "python", "js": "javascript", "ts": "typescript", "rs": "rust"}.get(suffix, suffix or "text")


def _suffix(language: str) -> str:
    return {"python": ".py", "javascript": ".js", "typescript": ".ts", "rust": ".rs"}.get(language, ".txt")
