"""End to end: EvoX on function_minimization through the real CLI and run_iteration.

Offline (the tune proposer, no LLM): the initial strategy samples every iteration and no meta step
runs. With a recorded guide: the stagnating run asks for a rewrite, which is validated and swapped
in and scored at the next stagnation; a second, broken rewrite is recorded failed-validation and the
run goes on. A person's edit of the active strategy is validated and run. Over many meta steps only
the strategies that may run keep their code in the state file; the others' code is folded to the
memory branch, read back for the meta prompt, and the state file stays within its budget.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.loop.iteration import attempt as attempt_module
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from autoloop_py.strategies.evox import sandbox as evox_sandbox
from autoloop_py.strategies.evox import strategy as evox
from autoloop_py.strategies.evox.engine import EvoXEngine
from autoloop_py.strategies.evox.markdown import render_state_block
from autoloop_py.strategies.evox.strategy import EvoXState
from autoloop_py.strategies.runner import load_runner
from tests.programs import install_strategy_program

REPO = Path(__file__).parents[2]
NAME = "function_minimization"
PROGRAM = f".autoloop/programs/{NAME}"
PLAYBOOK = ".autoloop/strategies/evox"
STATE = f"{NAME}.md"
OFFLINE = 12  # iterations of the offline run: enough for stagnation (interval 3) to fire
POINTER = """## Evolution Strategy

This program uses the **EvoX** strategy. On every iteration, read `strategy/evox.md` and follow it literally.

Support files:
- `strategy/prompts/solution.md`
- `strategy/prompts/meta.md`
- `strategy/prompts/operators.md`
"""
INITIAL = evox_sandbox.initial_strategy()
LABELS_REPLY = """### DIVERGE EXAMPLES
- basin hopping from the best point
- a coarse grid scan followed by Nelder-Mead

### REFINE EXAMPLES
- a slower cooling schedule
- more random restarts
"""
REWRITE = INITIAL.replace("DIVERGE_RATE = 0.2", "DIVERGE_RATE = 0.6")
GOOD_REPLY = f"SUMMARY: diverge more often while the best is flat\n\n```python\n{REWRITE}```\n"
BROKEN_REPLY = f"SUMMARY: read the state from disk\n\n```python\nimport os\n{INITIAL}```\n"


class RecordedGuide:
    """The guide LLM of a recorded run: its replies in order, and the prompts it was given."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.replies.pop(0)


def _install(repo: Path, run_git, config: str) -> Path:  # type: ignore[no-untyped-def]
    return install_strategy_program(repo, run_git, PROGRAM, "evox", POINTER, config)


def _engine(repo: Path) -> EvoXEngine:
    runner = load_runner(load_program(repo, Path(PROGRAM) / "program.md"), repo)
    assert runner is not None and isinstance(runner.engine, EvoXEngine)
    return runner.engine


def _read(memory: MemoryStore, engine: EvoXEngine) -> tuple[pop.Population, EvoXState, str]:
    text = memory.read(STATE) or ""
    population = population_of(statefile.parse_state(text, STATE), memory.read)
    strategy = engine.state_of(population)
    # A block autoloop wrote reads back and renders identically.
    assert render_state_block(strategy, engine.config.direction).rstrip("\n") == population.strategy_state.rstrip("\n")
    return population, strategy, text


def _bullets(candidate: pop.Candidate) -> dict[str, str]:
    return dict(candidate.extra)


def test_offline_run_uses_the_initial_strategy_throughout(  # type: ignore[no-untyped-def]
    git_repo: Path, run_git, capsys
) -> None:
    repo = _install(git_repo, run_git, "max_iterations: 30\n")
    assert main(["check", "--repo", str(repo)]) == 0
    capsys.readouterr()
    memory = MemoryStore(repo)
    engine = _engine(repo)
    assert engine.config.interval == 3
    fired = 0
    for iteration in range(1, OFFLINE + 1):
        assert main(["run", "--repo", str(repo), "--program", NAME, "--iterations", "1"]) == 0
        population, strategy, _ = _read(memory, engine)
        assert strategy.rng_draws == iteration - 1  # the first iteration had nothing to sample
        assert [s.id for s in strategy.strategies] == [0] and strategy.active == 0
        # Stagnation may fire, but without a meta LLM the next iteration only clears it.
        fired += strategy.evolve_due
        assert strategy.stagnant_count < 3 and strategy.labels == "default"
        newest = population.candidates[0]
        assert newest.gen == iteration and _bullets(newest)["Strategy"] == "S0"
        assert _bullets(newest)["Label"] in ("diverge", "refine", "none")
        if iteration > 1:
            assert newest.parents and newest.parents[0] in {c.id for c in population.candidates}
    ids = [c.id for c in population.candidates]
    assert len(ids) == len(set(ids)) == OFFLINE
    # Iteration 1 evaluated the Target as it is (no LLM, no strategy): the first window starts at its score
    # and takes a step only for each of the later strategy turns, as in the reference.
    seed = population.candidates[-1]
    assert seed.operator == "seed" and not seed.parents and strategy.window_start_score == seed.fitness
    assert len(strategy.window_bests) == OFFLINE - 1 and fired >= 1
    assert {_bullets(c)["Label"] for c in population.candidates} >= {"refine"}
    prompt = memory.read(f"traces/{NAME}/prompts/{OFFLINE}.md") or ""
    assert "# Current Solution" in prompt and "Strategy S0 has already chosen" in prompt


def test_recorded_meta_steps_swap_score_and_reject(git_repo: Path, run_git,  # type: ignore[no-untyped-def]
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _install(git_repo, run_git, "switch_interval: 2\nimprovement_threshold: 0.5\nmeta_attempts: 1\n")
    guide = RecordedGuide(LABELS_REPLY, GOOD_REPLY, BROKEN_REPLY)
    monkeypatch.setattr(attempt_module, "guide_for", lambda program, options, *_: guide)
    program = load_program(repo, Path(PROGRAM) / "program.md")
    memory, engine = MemoryStore(repo), _engine(repo)
    for _ in range(4):  # 1 evaluates the Target as it is; 2-4 are strategy turns that stagnate
        run_iteration(repo, program, RunOptions())
    _, strategy, _ = _read(memory, engine)
    assert strategy.labels == "generated" and "basin hopping" in strategy.diverge_label
    assert strategy.evolve_due and len(guide.prompts) == 1
    run_iteration(repo, program, RunOptions())  # iteration 5: the meta step
    population, strategy, text = _read(memory, engine)
    s0, s1 = strategy.strategies
    assert (strategy.active, strategy.pending, strategy.fallback) == (1, 1, 0)
    assert s1.code == REWRITE and s1.validation == "passed" and s1.window_start == 5 and s1.parent == 0
    assert s0.status == "scored" and s0.j is not None and s0.window_end == 5
    assert _bullets(population.candidates[0])["Strategy"] == "S1"
    assert "## The strategy to rewrite: S0" in guide.prompts[1] and "DIVERGE_RATE = 0.2" in guide.prompts[1]
    assert "##### Strategy S1 · J pending · window 5–7 · status active" in text
    assert "meta step: S1 (active) rewritten from S0" in statefile.parse_state(text, STATE).history[0].text
    for _ in range(2):
        run_iteration(repo, program, RunOptions())  # 6, 7: stagnation fires again; 7 scores S1, rejects S2
    population, strategy, text = _read(memory, engine)
    s1, s2 = strategy.strategy(1), strategy.strategy(2)
    assert s1.j is not None and s1.window_end == 7 and strategy.pending is None
    assert f"##### Strategy S1 · J {pop.format_fitness(s1.j)} · window 5–7 · status active" in text
    assert s2.status == "failed-validation" and "import of 'os' is not allowed" in s2.validation
    # S2 can never run, so its code moved to the memory branch; the state file names the file.
    assert s2.code == "" and memory.read(s2.code_ref or "") == f"import os\n{INITIAL}"
    assert f"- **Code**: strategies/{NAME}/S2.py on memory/autoloop\n" in text
    assert strategy.active == 1 and strategy.meta_failures == 1 and strategy.evolutions == 2
    assert text.index("##### Strategy S2") < text.index("##### Strategy S1") < text.index("##### Strategy S0")
    assert "meta step: S2 (failed-validation)" in statefile.parse_state(text, STATE).history[0].text
    run_iteration(repo, program, RunOptions())  # the run goes on with S1
    population, strategy, _ = _read(memory, engine)
    assert population.candidates[0].gen == 8 and _bullets(population.candidates[0])["Strategy"] == "S1"
    assert guide.replies == []


def _big_rewrite(k: int) -> str:
    """Returns a valid rewrite a third longer than the initial strategy, marked with its strategy id."""
    notes = "".join(f"# design note {k}.{n}: {'~' * 60}\n" for n in range(15))
    return INITIAL.replace("DIVERGE_RATE = 0.2", f"DIVERGE_RATE = 0.{k}  # MARK S{k}") + notes


def test_many_meta_steps_fold_old_strategies_to_the_memory_branch(  # type: ignore[no-untyped-def]
    git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _install(git_repo, run_git, "switch_interval: 1\nimprovement_threshold: 1000\nmeta_attempts: 1\n")
    rewrites = {k: _big_rewrite(k) for k in range(1, 8)}
    guide = RecordedGuide(LABELS_REPLY, *(f"SUMMARY: variant {k}\n\n```python\n{rewrites[k]}```\n" for k in rewrites))
    monkeypatch.setattr(attempt_module, "guide_for", lambda program, options, *_: guide)
    program = load_program(repo, Path(PROGRAM) / "program.md")
    memory, engine = MemoryStore(repo), _engine(repo)
    folded_refs, before = 0, None
    for _ in range(10):  # the seed as it is, then a meta step at every iteration from the fourth on: S1 … S7
        asked = len(guide.prompts)
        run_iteration(repo, program, RunOptions())
        if before is not None and len(guide.prompts) > asked:
            for ref in map(int, re.findall(r"^## Reference strategy S(\d+)", guide.prompts[-1], re.MULTILINE)):
                # A reference's code is shown in full, even when the state file only named its file.
                assert (f"MARK S{ref}\n" if ref else "DIVERGE_RATE = 0.2\n") in guide.prompts[-1]
                folded_refs += before.strategy(ref).code_ref is not None
        _, strategy, text = _read(memory, engine)
        before = strategy
        assert len(text.encode("utf-8")) <= statefile.DEFAULT_BUDGET
    assert guide.replies == [] and folded_refs >= 1
    inline = {strategy.active, strategy.fallback, evox.strategy_parent(strategy)}
    assert (strategy.active, strategy.fallback) == (7, 6) and [s.id for s in strategy.strategies] == list(range(8))
    everything = INITIAL + "".join(rewrites.values())
    assert len(everything.encode("utf-8")) > statefile.DEFAULT_BUDGET  # inline, the sources alone would not fit
    for record in strategy.strategies:
        source = rewrites.get(record.id, INITIAL)
        if record.id in inline:
            assert record.code == source and record.code_ref is None
            continue
        path = f"strategies/{NAME}/S{record.id}.py"
        assert record.code == "" and record.code_ref == path and memory.read(path) == source
        assert f"- **Code**: {path} on memory/autoloop\n" in text
    assert len(inline) < len(strategy.strategies)


def test_a_hand_edit_of_the_active_strategy_is_validated_and_run(  # type: ignore[no-untyped-def]
    git_repo: Path, run_git
) -> None:
    repo = _install(git_repo, run_git, "max_iterations: 30\n")
    memory, engine = MemoryStore(repo), _engine(repo)
    program = load_program(repo, Path(PROGRAM) / "program.md")
    for _ in range(2):
        run_iteration(repo, program, RunOptions())
    memory.update(STATE, lambda text: (text or "").replace("DIVERGE_RATE = 0.2", "DIVERGE_RATE = 0.9"),
                  "a person edits the strategy")
    run_iteration(repo, program, RunOptions())
    population, strategy, _ = _read(memory, engine)
    s0 = strategy.strategy(0)
    assert "DIVERGE_RATE = 0.9" in s0.code and s0.status == "active"
    assert "edited by hand; the edit passed validation at iteration 3" in s0.note
    assert _bullets(population.candidates[0])["Strategy"] == "S0"


def test_new_scaffolds_an_evox_program_from_the_shipped_template(git_repo: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    shipped = REPO / "autoloop_py/templates/strategies/evox"
    names = sorted(p.relative_to(REPO / PLAYBOOK).as_posix() for p in (REPO / PLAYBOOK).rglob("*.md"))
    assert names == ["CUSTOMIZE.md", "prompts/meta.md", "prompts/operators.md", "prompts/solution.md", "strategy.md"]
    for name in names:
        assert (shipped / name).read_bytes() == (REPO / PLAYBOOK / name).read_bytes(), name
    assert main(["new", "evo", "--strategy", "evox", "--repo", str(git_repo)]) == 0
    folder = git_repo / ".autoloop/programs/evo"
    assert (folder / "strategy/evox.md").read_text(encoding="utf-8").startswith("# EvoX Strategy — evo\n")
    assert sorted(p.name for p in (folder / "strategy/prompts").iterdir()) == ["meta.md", "operators.md", "solution.md"]
    assert "read `strategy/evox.md` and follow it literally" in (folder / "program.md").read_text(encoding="utf-8")
    assert "strategy/evox.md:7: <CUSTOMIZE: problem framing" in capsys.readouterr().out
