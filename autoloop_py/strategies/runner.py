"""The strategy side of an iteration: decide, put the parent in place, prompt, and record the candidate."""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from autoloop_py.errors import ProgramError, StateError
from autoloop_py.program.model import Program
from autoloop_py.program.objectives import Objective
from autoloop_py.program.playbook import Playbook, runnable_playbook
from autoloop_py.program.regions import evolved_code, place_code, primary_target
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.state.population import population_of
from autoloop_py.state.population_fold import fold_entries, folded_path
from autoloop_py.strategies import pareto, registry
from autoloop_py.strategies.base import StrategyContext
from autoloop_py.strategies.engine import DecisionLike, Engine, PromptInputs
from autoloop_py.strategies.prompt import steering_of, with_feedback_section
from autoloop_py.strategies.slots import Slot

log = logging.getLogger(__name__)

CANDIDATES_DIR = "candidates"
# An engine's `evaluator_feedback` (strategies/engine.py): the runner adds the feedback as a data section.
SECTION = "section"


@dataclass(frozen=True)
class StrategyRunner:
    """A program's strategy, ready to run.

    Attributes:
      playbook: the customised playbook the program points to.
      engine: the strategy's bookkeeping (decide, prompt, record).
      primary: the repo-relative Target file whose evolved block the population records.
      framings: the playbook's prompt files (`prompts/*.md`) by name, read with the playbook: a candidate that
        rewrites them in the tree afterwards changes no prompt.
    """

    playbook: Playbook
    engine: Engine
    primary: str
    framings: Mapping[str, str] = dataclasses.field(default_factory=dict)


def load_runner(program: Program, root: Path) -> StrategyRunner | None:
    """Returns the program's strategy runner, or None for the default flow; refuses unresolved markers.

    root: the tree the playbook, its prompts and `code/config.yaml` are read from (an iteration's checkout of
    the commit it runs on, or the working tree for the commands that only show or check).
    """
    playbook = runnable_playbook(program, root)
    if playbook is None:
        return None
    engine = registry.build_engine(playbook.name, program, playbook, root)
    if engine is None:
        available = ", ".join(registry.names())
        raise ProgramError(
            f"strategy '{playbook.name}' cannot run yet; runnable strategies: {available}", playbook.path
        )
    prompts = root / playbook.path.parent / "prompts"
    framings = {p.name: p.read_text(encoding="utf-8") for p in sorted(prompts.glob("*.md")) if p.is_file()}
    return StrategyRunner(playbook, engine, primary_target(program, root), framings)


def decide(
    runner: StrategyRunner,
    state: statefile.StateFile,
    best: float | None,
    iteration: int,
    direction: str,
    rng: random.Random,
    load_code: Callable[[str], str | None],
    guide: Callable[[str], str] | None = None,
    rebase: Callable[[pop.Population], pop.Population] | None = None,
    slot: Slot | None = None,
) -> Any:
    """Returns this iteration's decision, with every parent's code loaded (folded code read back).

    An engine with a `refresh(population, guide)` method (AdaEvolve's paradigm call) may consult the
    guide LLM first; its reply goes to `decide` as `guide_reply`, so the decision itself stays pure.
    `rebase` brings the entries' code up to date with the default branch and leaves stale ones out
    (stale_parents.py), so no strategy builds a child on code a later commit changed. `slot`: the slot of a
    parallel tick, which strategies with islands turn into the slot's island.
    """
    population = population_of(state, load_code)
    if getattr(runner.engine, "needs_all_code", False):
        population = with_all_code(population, load_code)
    if rebase is not None:
        population = rebase(population)
    context = StrategyContext(
        population=population.candidates,
        recent_statuses=state.machine.recent_statuses,
        best_metric=best,
        iteration=iteration,
        direction=direction,
        next_id=population.next_id,
        slot=slot,
    )
    refresh = getattr(runner.engine, "refresh", None)
    with block_lines(state):
        population = _engine_code(population, runner, load_code)
        reply = refresh(population, guide) if refresh is not None else None
        if reply is None:
            decision = runner.engine.decide(population, context, rng)
        else:
            decision = runner.engine.decide(population, context, rng, guide_reply=reply)  # type: ignore[call-arg]
    parents = tuple(_with_code(p, load_code) for p in decision.parents)
    return runner.engine.with_parents(decision, parents)


def guide_wanted(
    runner: StrategyRunner, state: statefile.StateFile, load: Callable[[str], str | None] | None = None
) -> str | None:
    """Returns why the engine would consult its guide LLM this iteration (None: it would not, or has no guide)."""
    wanted = getattr(runner.engine, "guide_wanted", None)
    if wanted is None:
        return None
    with block_lines(state):
        reason: str | None = wanted(population_of(state, load))
    return reason


def retry(runner: StrategyRunner | None, decision: Any, error: str) -> Any:
    """Returns the decision of another attempt after a failed one (None: no runner, no `retry`, or none left)."""
    again = getattr(runner.engine, "retry", None) if runner is not None and decision is not None else None
    return None if again is None else again(decision, error)


def island_of(runner: StrategyRunner | None, decision: Any) -> int | None:
    """Returns the island the decision works (None: no runner, or a strategy without islands that say so)."""
    island = getattr(runner.engine, "island", None) if runner is not None and decision is not None else None
    return island(decision) if island is not None else None


def attempts_of(decision: Any) -> int:
    """Returns the attempts the decision's iteration used (1 unless the engine retried)."""
    attempt = getattr(decision, "attempt", 1)
    return attempt if isinstance(attempt, int) and attempt > 1 else 1


@contextmanager
def block_lines(state: statefile.StateFile) -> Iterator[None]:
    """Re-raises an engine's StateError at the state file's line (engines number their block's lines from 1)."""
    try:
        yield
    except StateError as error:
        if error.line is None:
            raise
        raise StateError(error.message, error.path, error.line + strategy_state_line(state)) from None


def strategy_state_line(state: statefile.StateFile) -> int:
    """Returns the 0-based line of the state file where the `### ⚙️ Strategy State` block starts (0 when absent)."""
    text = state.section_text(statefile.POPULATION)
    block = population_of(state).strategy_state if text is not None else ""
    at = text.find(block) if text is not None and block else -1
    if text is None or at < 0:
        return 0
    return statefile.section_line(state, statefile.POPULATION) + text.count("\n", 0, at)


def with_all_code(population: pop.Population, load_code: Callable[[str], str | None]) -> pop.Population:
    """Returns the Population with every folded source read back from the memory branch."""
    return dataclasses.replace(population, candidates=tuple(_with_code(c, load_code) for c in population.candidates))


def _with_code(candidate: pop.Candidate, load_code: Callable[[str], str | None]) -> pop.Candidate:
    if candidate.code is not None or candidate.code_ref is None:
        return candidate
    code = load_code(candidate.code_ref)
    if code is None:
        log.warning("candidate %d: its source %s is missing from the memory branch", candidate.id, candidate.code_ref)
    return dataclasses.replace(candidate, code=code)


def with_parent(runner: StrategyRunner, decision: DecisionLike, files: Mapping[str, str]) -> dict[str, str]:
    """Returns the Target files with the first parent's code in the evolved block (unchanged without a parent)."""
    current = dict(files)
    if not decision.parents or decision.parents[0].code is None or runner.primary not in current:
        return current
    current[runner.primary] = place_code(current[runner.primary], decision.parents[0].code)
    return current


def render_prompt(
    runner: StrategyRunner,
    decision: DecisionLike,
    program: Program,
    files: Mapping[str, str],
    state: statefile.StateFile,
    best: float | None,
    directives: tuple[str, ...] = (),
    load: Callable[[str], str | None] | None = None,
    feedback: Sequence[str] = (),
    parent_feedback: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """Returns the strategy's prompt, with the framing file the decision needs (and only that one).

    load: reads the memory branch, so that the Population the prompt shows includes its folded entries.
    feedback: the evaluator feedback items (loop/lineage_store.feedback_items), placed where the engine says.
    parent_feedback: the feedback items of each other parent of the decision, by id (engines that show feedback
      beside each parent).
    """
    name = runner.engine.framing_file(decision)
    framing = runner.framings.get(name, "") if name else ""
    inputs = PromptInputs(
        program, files, framing, best, steering_of(state, directives), population_of(state, load), tuple(feedback),
        {key: tuple(items) for key, items in (parent_feedback or {}).items()},
    )
    prompt = runner.engine.prompt(decision, inputs)
    if getattr(runner.engine, "evaluator_feedback", SECTION) == SECTION:
        prompt = with_feedback_section(prompt, feedback)
    return prompt


def candidate_for(
    runner: StrategyRunner,
    decision: DecisionLike,
    record: statefile.IterationRecord,
    source: str,
    approach: str | None,
    iteration: int,
) -> pop.Candidate:
    """Returns the population entry of an evaluated candidate (its id is assigned when recorded)."""
    code = evolved_code(source)
    return runner.engine.candidate(decision, record, code, approach, iteration, language_of(runner.primary))


def history_bullets(decision: DecisionLike, metric: float | None) -> tuple[tuple[str, str], ...]:
    """Returns the extra Iteration History bullets a strategy iteration carries (Attempts after a retry)."""
    parents = ", ".join(str(p.id) for p in decision.parents) or "—"
    island = "—" if decision.island is None else str(decision.island)
    bullets: tuple[tuple[str, str], ...] = (
        ("Operator", f"{decision.operator} — {decision.reason}"),
        ("Parent(s)", parents),
        ("Island", island),
        ("Fitness", pop.format_fitness(metric)),
    )
    attempts = attempts_of(decision)
    if attempts > 1:
        bullets += (("Attempts", f"{attempts} (the earlier ones failed; each retry showed the previous error)"),)
    return bullets


def record_candidate(
    state: statefile.StateFile,
    runner: StrategyRunner,
    candidate: pop.Candidate,
    program: Program,
    budget: int,
    decision: Any = None,
    metrics: Mapping[str, Any] | None = None,
    iteration: int = 0,
    load_code: Callable[[str], str | None] | None = None,
    sources: dict[str, str] | None = None,
) -> tuple[statefile.StateFile, pop.Candidate]:
    """Returns the state with the candidate added to the Population (capped, code folded to fit) and its id.

    An engine with `needs_all_code` set gets every folded source loaded back first (load_code); the code of
    every other entry the engine adds (AdaEvolve's seed, spawn and migration copies) goes into sources.
    """
    rng = random.Random(f"{program.config.seed}:{program.name}:{iteration}:record")
    objectives = objectives_of(runner, program)
    candidate = pareto.with_objectives(candidate, metrics or {}, objectives)
    with block_lines(state):
        before = _loaded(population_of(state, load_code), runner, load_code)
        population, candidate = runner.engine.record(
            before, candidate, decision, metrics or {}, direction=program.direction, iteration=iteration, rng=rng
        )
        population = pareto.with_fronts(pareto.ensure_objectives(population, candidate.id, metrics or {}, objectives),
                                        objectives)
        candidate = next((c for c in population.candidates if c.id == candidate.id), candidate)
        return _stored(state, before, population, runner, program, budget, sources, candidate.id), candidate


def objectives_of(runner: StrategyRunner, program: Program) -> tuple[Objective, ...]:
    """Returns the objectives the Population records: the engine's (AdaEvolve's playbook may name them), else the
    program's frontmatter `objectives:`."""
    return tuple(getattr(runner.engine, "objectives", ()) or program.config.objectives)


def advance_state(
    state: statefile.StateFile,
    runner: StrategyRunner,
    decision: Any,
    program: Program,
    iteration: int,
    budget: int = statefile.DEFAULT_BUDGET,
    load_code: Callable[[str], str | None] | None = None,
    sources: dict[str, str] | None = None,
) -> statefile.StateFile:
    """Returns the state after an iteration whose decision produced no Population entry (engine's `advance`).

    Unchanged when the engine has no `advance`. Entries the engine adds (spawn or migration copies) have
    their code put into sources, as with record_candidate.
    """
    advance = getattr(runner.engine, "advance", None)
    if advance is None:
        return state
    with block_lines(state):
        before = _loaded(population_of(state, load_code), runner, load_code)
        population = advance(before, decision, iteration=iteration)
        return _stored(state, before, population, runner, program, budget, sources)


def _loaded(
    population: pop.Population, runner: StrategyRunner, load_code: Callable[[str], str | None] | None
) -> pop.Population:
    """Returns the Population with every folded source loaded back when the engine needs all code."""
    if load_code is not None and getattr(runner.engine, "needs_all_code", False):
        population = with_all_code(population, load_code)
    return _engine_code(population, runner, load_code)


def _engine_code(
    population: pop.Population, runner: StrategyRunner, load_code: Callable[[str], str | None] | None
) -> pop.Population:
    """Returns the Population with the code an engine folded out of its own block read back (`load_strategy_code`)."""
    load = getattr(runner.engine, "load_strategy_code", None)
    if load is None or load_code is None:
        return population
    loaded: pop.Population = load(population, load_code)
    return loaded


def _engine_folded(
    population: pop.Population, runner: StrategyRunner, sources: dict[str, str] | None
) -> pop.Population:
    """Returns the Population with the engine's own block folded (`fold_strategy_code`); the sources go to sources.

    Without sources to keep them in, nothing folds, so no code is ever lost.
    """
    fold = getattr(runner.engine, "fold_strategy_code", None)
    if fold is None or sources is None:
        return population
    population, files = fold(population)
    sources.update(files)
    return population


def _stored(
    state: statefile.StateFile,
    before: pop.Population,
    population: pop.Population,
    runner: StrategyRunner,
    program: Program,
    budget: int,
    sources: dict[str, str] | None,
    recorded: int | None = None,
) -> statefile.StateFile:
    """Returns the state holding the engine's new Population, code folded to fit; new entries' code goes to sources."""
    if sources is not None:
        known = {c.id for c in before.candidates} | {recorded}
        for added in population.candidates:
            if added.id not in known and added.code is not None:
                sources[code_path(program, added)] = added.code
    population = pop.with_strategy_name(_engine_folded(population, runner, sources),
                                        registry.display_name(runner.engine.name))
    state = statefile.with_section(state, statefile.POPULATION, pop.render_population(population))
    state = _fit(state, population, runner, program, budget, sources)
    return statefile.compact(state, budget)


def _fit(
    state: statefile.StateFile,
    population: pop.Population,
    runner: StrategyRunner,
    program: Program,
    budget: int,
    sources: dict[str, str] | None = None,
) -> statefile.StateFile:
    """Returns the state with code, then whole entries, folded to the memory branch until it fits.

    Non-elite code folds first, oldest first, down to 80 % of the budget (above that, compaction keeps
    only 5 detailed history entries); past the budget the elites' code folds too, worst first, but the
    best candidate's code always stays. When the file is still over 80 % of its budget, whole entries
    move to one memory-branch file (population_fold.py): non-elites oldest first, then elites worst
    first, never the best; that file goes into sources. Every source and entry stays on the memory
    branch, so nothing is lost; without sources to keep the entries in, none are folded.
    """
    inline = runner.engine.keep_inline(population, program.direction)
    with_code = {c.id for c in population.candidates if c.code is not None}
    others = sorted(i for i in with_code if i not in set(inline))
    stages = ((others, budget * statefile.TIGHT_FRACTION), ([i for i in inline[:-1] if i in with_code], budget))
    folded: set[int] = set()
    smaller = population
    for order, limit in stages:
        done = 0
        while done < len(order) and (size := _size(state)) > limit:
            # Fold about as many as the excess takes (by the mean code size), not one per re-render.
            codes = [len((c.code or "").encode()) for c in smaller.candidates if c.id in set(order[done:])]
            mean = max(1.0, sum(codes) / max(1, len(codes)))
            done = min(len(order), done + max(1, math.ceil((size - limit) / mean)))
            folded.update(order[:done])
            smaller = pop.fold_code(population, lambda c: c.id not in folded, lambda c: code_path(program, c))
            state = statefile.with_section(state, statefile.POPULATION, pop.render_population(smaller))
    if sources is None:
        return state
    order = [c.id for c in sorted(smaller.candidates, key=lambda c: c.id) if c.id not in set(inline)] + inline[:-1]
    return _fold_entries(state, smaller, order, folded_path(program.name), budget * statefile.TIGHT_FRACTION, sources)


def _fold_entries(
    state: statefile.StateFile,
    population: pop.Population,
    order: list[int],
    path: str,
    limit: float,
    sources: dict[str, str],
) -> statefile.StateFile:
    """Returns the state with the entries of order (in turn) folded into the file at path until it is within limit."""
    size = _size(state)
    count = 0
    while size > limit and count < len(order):
        entry_bytes = len(pop.render_population(population).encode()) / max(1, len(population.candidates))
        # Estimate how many entries make up the excess, so that a Population of 200 is not re-rendered 200 times.
        count = min(len(order), count + max(1, math.ceil((size - limit) / max(entry_bytes, 1.0))))
        smaller, text = fold_entries(population, order[:count], path)
        state = statefile.with_section(state, statefile.POPULATION, pop.render_population(smaller))
        sources[path] = text
        size = _size(state)
    return state


def code_path(program: Program, candidate: pop.Candidate) -> str:
    """Returns where a candidate's full source is kept on the memory branch."""
    return f"{CANDIDATES_DIR}/{program.name}/{candidate.id}{_SUFFIXES.get(candidate.language, '.txt')}"


def _size(state: statefile.StateFile) -> int:
    return len(statefile.render_state(state).encode("utf-8"))


def language_of(path: str) -> str:
    suffix = Path(path).suffix.lstrip(".")
    return {"py": "python", "js": "javascript", "ts": "typescript", "rs": "rust"}.get(suffix, suffix or "text")


_SUFFIXES = {"python": ".py", "javascript": ".js", "typescript": ".ts", "rust": ".rs"}
