"""End to end: AdaEvolve on function_minimization through the real CLI and run_iteration, offline.

Checks the strategy state after every iteration (ids, the islands' counters, a migration and a spawn),
a paradigm installed from a recorded guide reply, and that a person's edit of an island's G in the
state file changes the intensity of the next decision.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.program.regions import place_code
from autoloop_py.proposers.base import Proposal, ProposalRequest
from autoloop_py.proposers.tune import TuneProposer
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import format_fitness, population_of
from autoloop_py.strategies.adaevolve import strategy as adaevolve
from autoloop_py.strategies.adaevolve.archive import archive_of, archive_status, ranked
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.state import AdaEvolveState, intensity
from autoloop_py.strategies.runner import guide_wanted, load_runner
from tests.programs import install_strategy_program

NAME = "function_minimization"
PROGRAM = f".autoloop/programs/{NAME}"
STATE = f"{NAME}.md"
PRIMARY = f"{PROGRAM}/code/search.py"
MIGRATION_INTERVAL = 6
ITERATIONS = 24  # four migration rounds and, after the spawn cooldown, a spawn
POINTER = """## Evolution Strategy

This program uses the **AdaEvolve** strategy. On every iteration, read `strategy/adaevolve.md` and follow it literally.

Support files:
- `strategy/prompts/solution.md`
- `strategy/prompts/paradigm.md`
"""
GUIDE_REPLY = """```json
{"ideas": [
  {"idea": "Nelder-Mead polish of the annealing result", "description": "Run a simplex polish from the best point.",
   "approach_type": "scipy.optimize.minimize", "what_to_optimize": "combined_score"},
  {"idea": "Grid seeding of restarts", "description": "Start restarts from a coarse grid's best cells.",
   "approach_type": "itertools.product"}
]}
```"""


def _install(repo: Path, run_git, config: str) -> Path:  # type: ignore[no-untyped-def]
    return install_strategy_program(repo, run_git, PROGRAM, "adaevolve", POINTER, config)


@pytest.fixture
def ada_repo(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    config = (
        f"migration_interval: {MIGRATION_INTERVAL}\nmigration_count: 2\nspawn_cooldown_iterations: 12\n"
        "spawn_productivity_threshold: 0.9\nmax_islands: 3\npopulation_size: 8\n"
    )
    return _install(git_repo, run_git, config)


def _config(repo: Path) -> AdaEvolveConfig:
    runner = load_runner(load_program(repo, Path(PROGRAM) / "program.md"), repo)
    assert runner is not None and runner.engine.name == "adaevolve"
    return runner.engine.config  # type: ignore[attr-defined, no-any-return]


def _read(memory: MemoryStore, config: AdaEvolveConfig, ours: bool = True) -> tuple[statefile.StateFile, AdaEvolveState]:
    state = statefile.parse_state(memory.read(STATE) or "", STATE)
    population = population_of(state, memory.read)
    block = population.strategy_state
    strategy = adaevolve.parse_state_block(block, STATE, 0, config)
    # A block autoloop wrote reads back and renders identically (a person's edit leaves derived cells stale).
    assert not ours or adaevolve.render_state_block(strategy, config, population.candidates) == block
    return state, strategy


def _code(memory: MemoryStore, candidate: pop.Candidate) -> str | None:
    """Returns a candidate's source, inline or folded to the memory branch (every entry has one)."""
    code = candidate.code if candidate.code is not None else memory.read(candidate.code_ref or "")
    assert code, f"candidate {candidate.id} has no source"
    return code


def _run(repo: Path) -> None:
    assert main(["run", "--repo", str(repo), "--program", NAME, "--iterations", "1"]) == 0


def test_iterations_migrate_and_spawn(ada_repo: Path) -> None:
    memory = MemoryStore(ada_repo)
    config = _config(ada_repo)
    islands_seen: list[int] = []
    rounds: list[bool] = []  # whether each migration round admitted a migrant
    for iteration in range(1, ITERATIONS + 1):
        _run(ada_repo)
        state, strategy = _read(memory, config)
        population = population_of(state, memory.read)
        ids = [c.id for c in population.candidates]
        assert len(ids) == len(set(ids))
        assert strategy.iteration == state.machine.iteration_count == iteration
        assert 0 <= strategy.current_island < len(strategy.islands)
        islands_seen.append(len(strategy.islands))
        migrants = [c for c in population.candidates if c.operator == "migration"]
        if iteration % MIGRATION_INTERVAL == 0:
            arrived = [c for c in migrants if c.gen == iteration]
            rounds.append(bool(arrived))
            if not arrived:  # every sender's code was already on its next island, or that archive was full
                for src in range(len(strategy.islands)):
                    dst = (src + 1) % len(strategy.islands)
                    there = archive_of(population.candidates, dst, config.direction)
                    codes = {_code(memory, c) for c, _ in there}
                    senders = ranked(archive_of(population.candidates, src, config.direction))[: config.migration_count]
                    for sender, _ in senders:
                        assert _code(memory, sender) in codes or len(there) == config.population_size
            for migrant in arrived:
                source = next(c for c in population.candidates if c.id == migrant.parents[0])
                assert migrant.island == ((source.island or 0) + 1) % len(strategy.islands)
                assert _code(memory, migrant) == _code(memory, source) and migrant.fitness == source.fitness
        else:
            assert not [c for c in migrants if c.gen == iteration]
        for candidate in population.candidates:
            _code(memory, candidate)
        # An island never holds more admitted programs than its capacity.
        for k in range(len(strategy.islands)):
            admitted = [c for c in population.candidates if c.island == k and archive_status(c) == "admitted"]
            assert len(admitted) <= config.population_size
    # Every island starts from the Target, so once the ring has spread the best programs a round may move none.
    assert rounds[0] and len(rounds) == ITERATIONS // MIGRATION_INTERVAL
    # Spawns happened (productivity stays below 0.9), one cooldown apart, with copies of the best programs.
    assert islands_seen[-1] == config.max_islands
    spawned_at = [i + 1 for i in range(1, len(islands_seen)) if islands_seen[i] > islands_seen[i - 1]]
    assert len(spawned_at) == config.max_islands - config.num_islands
    assert all(b - a >= config.spawn_cooldown_iterations for a, b in zip(spawned_at, spawned_at[1:]))
    assert strategy.last_spawn == spawned_at[-1]
    for k, t in enumerate(spawned_at, start=config.num_islands):
        copies = [c for c in population.candidates if c.operator == "spawn" and c.island == k]
        assert copies and all(c.gen == t for c in copies)
        assert strategy.islands[k].preset in {p.name for p in config.presets}
    assert sum(i.evaluations for i in strategy.islands) >= 1
    detailed = [e for e in state.history if e.is_detailed]
    assert all("**Island**" in e.text and "**Operator**" in e.text for e in detailed)
    prompt = memory.read(f"traces/{NAME}/prompts/{ITERATIONS}.md") or ""
    assert "function minimization of a two-dimensional multimodal function" in prompt


def _set_g(text: str, island: int, g: str) -> str:
    """Returns the state file with island's G cell replaced (as a person would edit it)."""
    pattern = re.compile(rf"^(\| {island} \| \w+ \| )([^|]+)( \|)", re.MULTILINE)
    assert pattern.search(text)
    return pattern.sub(lambda m: m.group(1) + g + m.group(3), text, count=1)


def _last_reason(memory: MemoryStore) -> str:
    state = statefile.parse_state(memory.read(STATE) or "", STATE)
    newest = max((e for e in state.history if e.is_detailed), key=lambda e: e.iteration)
    found = re.search(r"G (\S+) gives I = ([0-9.]+)", newest.text)
    assert found, newest.text
    return found.group(0)


def test_edited_g_changes_next_intensity(ada_repo: Path) -> None:
    memory = MemoryStore(ada_repo)
    config = _config(ada_repo)
    for _ in range(3):
        _run(ada_repo)
    _, strategy = _read(memory, config)
    k = strategy.current_island
    memory.update(STATE, lambda text: _set_g(text or "", k, "25"), "a person raises G")
    _, edited = _read(memory, config, ours=False)
    assert edited.islands[k].g == 25.0
    _run(ada_repo)
    assert _last_reason(memory) == f"G 25 gives I = {intensity(25.0, config):.4f}"
    assert intensity(25.0, config) < intensity(strategy.islands[k].g, config)


def test_paradigm_installed_from_recorded_guide_reply(
    git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    config_text = "paradigm_window_size: 2\nparadigm_improvement_threshold: 0.6\nuse_dynamic_islands: false\n"
    repo = _install(git_repo, run_git, config_text)
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", GUIDE_REPLY)
    program = load_program(repo, Path(PROGRAM) / "program.md")
    # The llm proposer's name (so a guide is built, answered by litellm's mock_response), tune's proposals.
    options = RunOptions(proposer="llm", model="gpt-4o-mini", proposer_factory=lambda name, **_: TuneProposer())
    memory = MemoryStore(repo)
    config = _config(repo)
    installed_at = None
    for iteration in range(1, 16):
        run_iteration(repo, program, options)
        _, strategy = _read(memory, config)
        if strategy.paradigms and installed_at is None:
            installed_at = iteration
            assert [p.idea for p in strategy.paradigms] == [
                "Nelder-Mead polish of the annealing result", "Grid seeding of restarts"]
            assert strategy.paradigms[0].approach_type == "scipy.optimize.minimize"
            assert strategy.paradigms[0].uses == 1 and strategy.current_paradigm == 1
            prompt = memory.read(f"traces/{NAME}/prompts/{iteration}.md") or ""
            assert "Nelder-Mead polish of the annealing result" in prompt
            assert "paradigm 1 is active" in (statefile.parse_state(memory.read(STATE) or "", STATE).history[0].text)
            break  # what the test is for is seen: the later iterations would check nothing more
    assert installed_at is not None, "the stagnant window never asked the guide"


class _Scripted:
    """Proposes from a script: `crash` (code that fails to evaluate), `fail` (no usable edit) or `tune`."""

    name = "scripted"

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.requests: list[ProposalRequest] = []

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        self.requests.append(request)
        step = self.script.pop(0)
        if step == "fail":
            return Proposal({}, "no edit", failure="the reply had no usable edit block")
        if step == "crash":
            placed = request.files[PRIMARY]
            return Proposal({PRIMARY: place_code(placed, 'raise RuntimeError("boom in attempt 1")\n')}, "crash")
        return TuneProposer().propose(request, rng)


def test_failed_attempts_are_retried_with_the_same_decision_then_the_iteration_ends(ada_repo: Path) -> None:
    memory = MemoryStore(ada_repo)
    config = _config(ada_repo)
    program = load_program(ada_repo, Path(PROGRAM) / "program.md")
    for _ in range(2):
        _run(ada_repo)
    # A candidate that fails to evaluate is retried with the same island, mode and parent, its error shown.
    scripted = _Scripted(["crash", "tune"])
    run_iteration(ada_repo, program, RunOptions(proposer_factory=lambda name, **_: scripted))
    first, second = scripted.requests
    assert first.files == second.files and "The previous attempt failed" not in first.prompt
    assert "The previous attempt failed" in second.prompt and "boom in attempt 1" in second.prompt
    state, strategy = _read(memory, config)
    assert "- **Attempts**: 2" in state.history[0].text and strategy.iteration == 3
    assert max(c.gen for c in population_of(state).candidates) == 3
    # When no attempt gives a candidate, the iteration still ends: no entry, but the strategy's iteration moves.
    before = [c.id for c in population_of(state).candidates if c.gen < 4]
    scripted = _Scripted(["fail"] * config.attempts)
    outcome = run_iteration(ada_repo, program, RunOptions(proposer_factory=lambda name, **_: scripted))
    assert outcome.status == "error" and len(scripted.requests) == config.attempts
    assert "the reply had no usable edit block" in scripted.requests[-1].prompt
    state, strategy = _read(memory, config)
    assert strategy.iteration == state.machine.iteration_count == 4
    assert f"- **Attempts**: {config.attempts}" in state.history[0].text
    assert [c.id for c in population_of(state).candidates if c.gen < 4] == before


def test_the_hand_off_prompt_says_when_a_paradigm_is_wanted(
    git_repo: Path, run_git, capsys: pytest.CaptureFixture[str]  # type: ignore[no-untyped-def]
) -> None:
    config_text = "paradigm_window_size: 2\nparadigm_improvement_threshold: 0.6\nuse_dynamic_islands: false\n"
    repo = _install(git_repo, run_git, config_text)
    program = load_program(repo, Path(PROGRAM) / "program.md")
    runner = load_runner(program, repo)
    assert runner is not None
    memory = MemoryStore(repo)
    wanted = None
    for _ in range(8):
        assert main(["prompt", NAME, "--repo", str(repo)]) == 0
        prompt = capsys.readouterr().out
        wanted = guide_wanted(runner, statefile.parse_state(memory.read(STATE) or "", STATE)) if memory.read(STATE) else None
        if wanted:
            break
        assert "guide was not consulted" not in prompt
        _run(repo)
    assert wanted is not None, "the window never stagnated"
    assert main(["prompt", NAME, "--repo", str(repo)]) == 0
    prompt = capsys.readouterr().out
    assert "## Note: the AdaEvolve guide was not consulted" in prompt and wanted in prompt
    assert f"autoloop run --program {NAME} --proposer llm" in prompt and "1. [uses 0/2] <idea>" in prompt
    assert "\n\n## Note: the AdaEvolve guide" in prompt
    # Following the note's advice, a person writes an idea into the state file: the next prompt applies it.
    idea = "1. [uses 0/2] Polish the best point with Nelder-Mead — scipy.optimize.minimize\n"
    memory.update(STATE, lambda text: (text or "").replace("Active ideas: none.\n", idea), "a person adds an idea")
    assert main(["prompt", NAME, "--repo", str(repo)]) == 0
    prompt = capsys.readouterr().out
    assert "guide was not consulted" not in prompt and "Polish the best point with Nelder-Mead" in prompt


def test_the_population_intro_names_adaevolve_and_an_old_intro_is_renamed_on_the_next_write(
    ada_repo: Path, tmp_path: Path
) -> None:
    memory = MemoryStore(ada_repo)
    _run(ada_repo)
    intro = population_of(statefile.parse_state(memory.read(STATE) or "", STATE)).intro
    assert "> 🤖 *Managed by the AdaEvolve strategy." in intro and "AlphaEvolve" not in intro
    # A state file from before (every strategy's intro said AlphaEvolve), with a person's own sentence in it.
    text = (memory.read(STATE) or "").replace(
        "*Managed by the AdaEvolve strategy.", "*Managed by the AlphaEvolve strategy.", 1)
    text = text.replace("Newest first.*\n", "Newest first.*\n\nOur notes: x0 near 1 looked best.\n", 1)
    edited = tmp_path / "edited.md"
    edited.write_text(text)
    assert main(["edit", NAME, "--repo", str(ada_repo), "--file", str(edited)]) == 0
    _run(ada_repo)
    state = statefile.parse_state(memory.read(STATE) or "", STATE)
    population = population_of(state)
    assert "> 🤖 *Managed by the AdaEvolve strategy." in population.intro and "AlphaEvolve" not in population.intro
    assert "Our notes: x0 near 1 looked best.\n" in population.intro  # the person's text stays
    assert [entry.iteration for entry in state.history][:2] == [2, 1]


def test_the_islands_start_from_the_evaluated_target_and_the_first_prompt_says_so(ada_repo: Path) -> None:
    memory = MemoryStore(ada_repo)
    config = _config(ada_repo)
    target = (ada_repo / PRIMARY).read_text(encoding="utf-8")
    _run(ada_repo)  # iteration 1: the baseline, recorded as every island's seed with no model call
    state, strategy = _read(memory, config)
    population = population_of(state, memory.read)
    seeds = [c for c in population.candidates if c.operator == "seed"]
    assert {c.island for c in seeds} == set(range(config.num_islands))
    assert all(c.fitness == state.machine.best_metric for c in seeds)
    assert all(_code(memory, c) and _code(memory, c) in target for c in seeds)
    assert strategy.best_program_id == min(c.id for c in seeds)
    assert memory.read(f"traces/{NAME}/prompts/1.md") is None
    _run(ada_repo)
    prompt = memory.read(f"traces/{NAME}/prompts/2.md") or ""
    assert "No program has been scored yet" not in prompt and "seeds every island" not in prompt
    assert "This is the Target as it was on the branch, scored by its evaluation: every island started from it." in prompt
    baseline = format_fitness(seeds[0].fitness)
    assert any(f"### Candidate {c.id} · island {c.island} · fitness {baseline}" in prompt for c in seeds)
