"""EvoX as an Engine: sandboxed sampling, the guide's label texts, the meta step, rollbacks and the turn's record."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from autoloop_py.errors import ConfigurationError
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.playbook import Playbook
from autoloop_py.program.target import Target
from autoloop_py.state import file as statefile
from autoloop_py.state import population as pop
from autoloop_py.strategies.base import StrategyContext
from autoloop_py.strategies.engine import PromptInputs
from autoloop_py.strategies.evox import sandbox as evox_sandbox
from autoloop_py.strategies.evox import strategy as evox
from autoloop_py.strategies.evox.config import EvoXConfig, parse_evox_config
from autoloop_py.strategies.evox.engine import EvoXEngine
from autoloop_py.strategies.evox.markdown import render_state_block
from autoloop_py.strategies.evox.prompt import label_texts, parse_labels_reply
from autoloop_py.strategies.evox.strategy import EvoXState
from autoloop_py.strategies.prompt import Steering

INITIAL = evox_sandbox.initial_strategy()
CONFIG = EvoXConfig(switch_interval=2, initial_code=INITIAL)
BOLDER = INITIAL.replace("DIVERGE_RATE = 0.2", "DIVERGE_RATE = 0.5")
# Passes validation (which replays at most 13 genomes) but fails on a larger population.
LATE_CRASH = INITIAL.replace(
    "        ranked = self._ranked()\n",
    "        if len(self.genomes) > 13:\n"
    "            raise RuntimeError('too many genomes')\n"
    "        ranked = self._ranked()\n",
)
LABELS_REPLY = """### DIVERGE EXAMPLES
- basin hopping with `scipy.optimize.basinhopping`
- a coarse grid, then local search

### REFINE EXAMPLES
- a slower cooling schedule
- more restarts
"""


class Guide:
    """A recorded guide LLM: answers prompts in order and keeps them."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.replies.pop(0)


def _program(tmp_path: Path) -> Program:
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "evaluate.py").write_text("print('{\"score\": 1}')  # EVALUATOR\n", encoding="utf-8")
    return Program(
        name="fm", path=Path("program.md"), directory=Path("."), goal="Find the global minimum of f.",
        target=Target(("code/search.py",), ()), evaluation=Evaluation("python3 code/evaluate.py", "score", 30),
        strategy_text="", config=ProgramConfig(), unconfigured=False, text="",
    )


def _engine(tmp_path: Path, config: EvoXConfig = CONFIG) -> EvoXEngine:
    prompts = tmp_path / "prompts"
    prompts.mkdir(exist_ok=True)
    (prompts / "meta.md").write_text("META FRAMING: progress comes in jumps\n", encoding="utf-8")
    return EvoXEngine(config, _program(tmp_path), tmp_path, prompts, "fm.md")


def _candidate(cid: int, fitness: float | None) -> pop.Candidate:
    return pop.Candidate(cid, None, fitness, cid, "refine", parents=(1,) if cid > 1 else (), status="rejected",
                         approach=f"idea {cid}", code=f"x = {cid}\n",
                         extra=(("Label", "refine"), ("Context", "—"), ("Strategy", "S0")))


def _population(count: int, state: EvoXState | None = None) -> pop.Population:
    population = pop.empty_population("EvoX")
    for cid in range(1, count + 1):
        population = pop.add_candidate(population, _candidate(cid, cid / 10))
    if state is not None:
        population = pop.with_strategy_state(population, render_state_block(state, "higher"))
    return population


def _context(population: pop.Population, iteration: int = 7) -> StrategyContext:
    return StrategyContext(population=population.candidates, recent_statuses=(), best_metric=None,
                           iteration=iteration, direction="higher", next_id=population.next_id)


def _record(metric: float | None = 0.45) -> statefile.IterationRecord:
    return statefile.IterationRecord(status="rejected", timestamp=datetime(2025, 1, 1, tzinfo=timezone.utc),
                                     change="tune: step", metric=metric, notes="n")


def _stagnant() -> EvoXState:
    return replace(evox.initial_state(CONFIG), evolve_due=True, window_start_score=0.3, window_bests=(0.4, 0.6),
                   labels="generated")


def _inputs(engine: EvoXEngine, files: dict[str, str], best: float | None, population: pop.Population) -> PromptInputs:
    return PromptInputs(engine.program, files, "", best, Steering(), population)


def test_the_playbook_table_and_config_yaml_set_the_config(tmp_path: Path) -> None:
    text = ("| Setting | Value | What |\n|---|---|---|\n"
            "| `max_iterations` | 40 | x |\n| `switch_interval` | none | y |\n")
    playbook = Playbook("evox", Path("strategy/evox.md"), text, Path("."))
    config = parse_evox_config(playbook, {"num_context_programs": 2, "unrelated": 1}, "lower")
    assert (config.interval, config.num_context_programs, config.direction) == (4, 2, "lower")
    assert parse_evox_config(playbook, {"switch_interval": 3}).interval == 3


def test_a_decision_samples_in_the_sandbox_and_the_record_books_the_turn(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _population(5)
    assert engine.refresh(population, None) is None
    decision = engine.decide(population, _context(population), random.Random(3))
    ids = {c.id for c in population.candidates}
    assert decision.parent is not None and decision.parent.id in ids and decision.label in ("", "diverge", "refine")
    assert {c.id for c in decision.context} <= ids - {decision.parent.id}
    assert decision.state.labels == "default" and decision.state.rng_draws == 1
    again = engine.decide(population, _context(population), random.Random(3))
    assert (again.parent, again.label, again.context) == (decision.parent, decision.label, decision.context)
    child = engine.candidate(decision, _record(), "x = 9\n", None, 7, "python")
    after, recorded = engine.record(population, child, decision, {}, direction="higher", iteration=7,
                                    rng=random.Random(0))
    assert recorded.id == 6 and dict(recorded.extra)["Strategy"] == "S0"
    assert dict(recorded.extra)["Context"] == (", ".join(f"#{c.id}" for c in decision.context) or "—")
    state = engine.state_of(after)
    assert state.window_bests == (0.5,) and state.last_tracked_best == 0.5 and state.labels == "default"


def test_a_retry_keeps_the_choice_and_costs_window_steps(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _population(3)
    first = engine.decide(population, _context(population), random.Random(1))
    second = engine.retry(first, "evaluation failed: boom")
    assert second is not None and second.attempt == 2 and second.parent == first.parent
    third = engine.retry(second, "evaluation failed: boom again")
    assert third is not None and engine.retry(third, "x") is None
    prompt = engine.prompt(third, _inputs(engine, {"code/search.py": "x = 1\n"}, None, population))
    assert "boom again" in prompt and "The previous attempt failed" in prompt
    after = engine.state_of(engine.advance(population, third, iteration=7))
    assert after.window_bests == (0.3, 0.3, 0.3) and after.stagnant_count == 0


def test_an_empty_label_asks_for_a_targeted_improvement(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _population(3)
    decision = engine.decide(population, _context(population), random.Random(1))
    files = {"code/search.py": "x = 1\n"}
    free = engine.prompt(replace(decision, label=""), _inputs(engine, files, 0.3, population))
    assert "## IMPORTANT" not in free.replace("headed `## IMPORTANT`", "")
    assert "otherwise make a targeted improvement of the program" in free
    refine = engine.prompt(replace(decision, label="refine"), _inputs(engine, files, 0.3, population))
    assert decision.state.refine_label in refine and "## IMPORTANT: refine the parent" in refine


def test_the_guide_writes_the_label_texts_once(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _population(2)
    guide = Guide(LABELS_REPLY)
    reply = engine.refresh(population, guide)
    assert reply is not None and reply.labels is not None and reply.labels.source == "generated"
    assert "EVALUATOR" in guide.prompts[0] and "Find the global minimum of f." in guide.prompts[0]
    decision = engine.decide(population, _context(population), random.Random(1), guide_reply=reply)
    assert "basin hopping" in decision.state.diverge_label and "more restarts" in decision.state.refine_label
    after = pop.with_strategy_state(population, render_state_block(decision.state, "higher"))
    assert engine.refresh(after, Guide()) is None


def test_a_failed_label_call_falls_back_to_our_defaults(tmp_path: Path) -> None:
    engine = _engine(tmp_path)

    def broken(prompt: str) -> str:
        raise ConnectionError("no route to host")

    reply = engine.refresh(_population(2), broken)
    assert reply is not None and reply.labels == label_texts(source="failed")
    assert parse_labels_reply("just prose") is None


def test_a_guide_model_misconfigured_stops_the_label_and_meta_calls(tmp_path: Path) -> None:
    # A 404 model, a refused key or an unreachable api-base is a setting, not bad luck: it reaches the runner.
    def misconfigured(prompt: str) -> str:
        raise ConfigurationError("model 'openai/meta': the server says the model does not exist")

    engine = _engine(tmp_path)
    with pytest.raises(ConfigurationError, match="openai/meta"):
        engine.refresh(_population(2), misconfigured)
    with pytest.raises(ConfigurationError, match="openai/meta"):  # the labels are made: the meta step asks
        engine.refresh(_population(4, _stagnant()), misconfigured)


def test_a_meta_step_swaps_in_a_validated_rewrite(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _population(4, _stagnant())
    guide = Guide(f"SUMMARY: diverge more often\n\n```python\n{BOLDER}```\n")
    reply = engine.refresh(population, guide)
    assert reply is not None and reply.meta is not None and reply.meta.problems == ()
    prompt = guide.prompts[0]
    assert "META FRAMING" in prompt and "## The strategy to rewrite: S0" in prompt and "DIVERGE_RATE = 0.2" in prompt
    assert "Iterations since the best last rose: 0" in prompt
    decision = engine.decide(population, _context(population), random.Random(1), guide_reply=reply)
    state = decision.state
    assert decision.strategy_id == 1 and state.active == 1 and state.fallback == 0 and state.pending == 1
    assert state.strategy(1).code == BOLDER and state.strategy(1).note == "diverge more often"
    assert state.strategy(0).status == "scored" and state.strategy(0).j == pytest.approx(
        evox.strategy_score(0.3, [0.4, 0.6], 2))


def test_a_broken_rewrite_is_retried_then_recorded_failed(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    population = _population(4, _stagnant())
    broken = f"```python\nimport os\n{INITIAL}```\n"
    guide = Guide(broken, "no code at all", broken)
    reply = engine.refresh(population, guide)
    assert reply is not None and reply.meta is not None and reply.meta.attempts == 3
    assert "import of 'os' is not allowed" in guide.prompts[1]
    assert "no ```python block" in guide.prompts[2]
    state = engine.decide(population, _context(population), random.Random(1), guide_reply=reply).state
    assert state.strategy(1).status == "failed-validation" and state.active == 0 and state.meta_failures == 1


def test_a_runtime_fault_rolls_back_and_the_iteration_continues(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    assert evox_sandbox.validate(LATE_CRASH, 42) == []
    state = evox.evolve(_stagnant(), evox.MetaOutcome(0, (), LATE_CRASH, (), 1), 1.5, 5)
    population = _population(15, state)
    decision = engine.decide(population, _context(population), random.Random(1))
    assert decision.strategy_id == 0 and decision.parent is not None
    assert decision.state.strategy(1).status == "rolled-back" and "too many genomes" in decision.state.strategy(1).note
    after = engine.advance(population, decision, iteration=7)
    assert engine.state_of(after).strategy(1).status == "rolled-back"


def test_an_invalid_hand_edit_is_validated_and_the_previous_strategy_runs(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    state = evox.evolve(_stagnant(), evox.MetaOutcome(0, (), BOLDER, (), 1), 0.6, 5)
    text = render_state_block(state, "higher").replace("DIVERGE_RATE = 0.5", "DIVERGE_RATE = open('x')", 1)
    population = pop.with_strategy_state(_population(4), text)
    reply = engine.refresh(population, None)
    assert reply is not None and reply.edit is not None and reply.edit.problems
    decision = engine.decide(population, _context(population), random.Random(1), guide_reply=reply)
    assert decision.state.strategy(1).status == "failed-validation" and decision.strategy_id == 0
    assert "open('x')" in decision.state.strategy(1).code


def test_guide_wanted_names_the_pending_llm_steps(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    assert "meta LLM" in (engine.guide_wanted(_population(2, _stagnant())) or "")
    assert "DIVERGE/REFINE" in (engine.guide_wanted(_population(2)) or "")
    done = replace(evox.initial_state(CONFIG), labels="generated")
    assert engine.guide_wanted(_population(2, done)) is None


def _folded(engine: EvoXEngine, state: EvoXState) -> tuple[pop.Population, dict[str, str]]:
    """Returns a population whose block holds the state folded, and the sources the memory branch would keep."""
    return engine.fold_strategy_code(_population(15, state))


def _scored(*codes: str) -> tuple[evox.StrategyRecord, ...]:
    return tuple(evox.StrategyRecord(k, code, "scored", 0.5 / (k + 1), checksum=evox.checksum(code))
                 for k, code in enumerate(codes))


def test_a_rollback_runs_a_folded_strategy_read_back_from_the_memory_branch(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    crash = evox.StrategyRecord(2, LATE_CRASH, "active", window_start=5, checksum=evox.checksum(LATE_CRASH))
    state = replace(evox.initial_state(CONFIG), active=2, pending=None, strategies=(*_scored(INITIAL, BOLDER), crash))
    population, sources = _folded(engine, state)
    assert sources == {"strategies/fm/S1.py": BOLDER} and "DIVERGE_RATE = 0.5" not in population.strategy_state
    loaded = engine.load_strategy_code(population, sources.get)
    decision = engine.decide(loaded, _context(loaded), random.Random(1))
    # No fallback is set, so the latest scored strategy, S1, runs: with its code read back.
    assert decision.strategy_id == 1 and decision.parent is not None
    assert decision.state.strategy(1).code == BOLDER and decision.state.strategy(2).status == "rolled-back"
    after, new_sources = engine.fold_strategy_code(engine.advance(loaded, decision, iteration=7))
    assert new_sources == {"strategies/fm/S2.py": LATE_CRASH}
    stored = engine.state_of(after)
    assert stored.strategy(1).code == BOLDER and stored.strategy(1).code_ref is None
    assert stored.strategy(2).code == "" and stored.strategy(2).code_ref == "strategies/fm/S2.py"


def test_the_meta_step_shows_a_folded_reference_in_full(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    s0, s1 = _scored(INITIAL, BOLDER)
    state = replace(evox.initial_state(CONFIG), pending=None, evolve_due=True, window_start_score=0.3,
                    window_bests=(0.4,), labels="generated", strategies=(replace(s0, status="active"), s1))
    population, sources = _folded(engine, state)
    assert list(sources) == ["strategies/fm/S1.py"]
    guide = Guide(f"SUMMARY: diverge more\n\n```python\n{BOLDER.replace('0.5', '0.7')}```\n")
    reply = engine.refresh(engine.load_strategy_code(population, sources.get), guide)
    assert reply is not None and reply.meta is not None and reply.meta.references == (1,)
    reference = guide.prompts[0][guide.prompts[0].index("## Reference strategy S1"):]
    assert "DIVERGE_RATE = 0.5" in reference


def _late(body: str) -> str:
    """Returns the initial strategy misbehaving only past 13 genomes, so that it passes validation first."""
    lines = "".join(f"            {line}\n" for line in body.splitlines())
    return INITIAL.replace(
        "        ranked = self._ranked()\n",
        f"        if len(self.genomes) > 13:\n{lines}        ranked = self._ranked()\n",
    )


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("loops forever", "while True:\n    pass"),
        ("allocates 4 GB", "hoard = bytearray(4 << 30)"),
        ("mutates scores", "first = min(self.genomes)\n"
                           "self.genomes[first] = dataclasses.replace(self.genomes[first], metrics={'score': 99.0})"),
    ],
)
def test_a_hostile_strategy_is_stopped_and_rolled_back_while_the_iteration_decides(
    tmp_path: Path, kind: str, body: str
) -> None:
    code = _late(body).replace("import math\n", "import dataclasses\nimport math\n", 1)
    fast = replace(CONFIG, sandbox_seconds=3.0, sandbox_cpu_seconds=1)
    assert evox_sandbox.validate(code, 42) == [], kind
    engine = _engine(tmp_path, fast)
    state = evox.evolve(_stagnant(), evox.MetaOutcome(0, (), code, (), 1), 1.5, 5)
    population = _population(15, state)
    decision = engine.decide(population, _context(population), random.Random(1))
    assert decision.strategy_id == 0 and decision.parent is not None, kind
    assert decision.state.strategy(1).status == "rolled-back", kind
    recorded = engine.advance(population, decision, iteration=7)
    assert engine.state_of(recorded).strategy(1).status == "rolled-back"
    assert [c.fitness for c in recorded.candidates] == [c.fitness for c in population.candidates]


def test_a_hand_edit_that_imports_os_is_refused_and_the_previous_strategy_runs(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    state = evox.evolve(_stagnant(), evox.MetaOutcome(0, (), BOLDER, (), 1), 0.6, 5)
    text = render_state_block(state, "higher").replace("import math\n", "import math\nimport os\n", 1)
    population = pop.with_strategy_state(_population(4), text)
    reply = engine.refresh(population, None)
    assert reply is not None and reply.edit is not None and any("os" in p for p in reply.edit.problems)
    decision = engine.decide(population, _context(population), random.Random(1), guide_reply=reply)
    assert decision.state.strategy(1).status == "failed-validation" and decision.strategy_id == 0


def test_the_label_meta_and_solution_prompts_carry_the_problem_framing(tmp_path: Path) -> None:
    plain = _engine(tmp_path)
    engine = EvoXEngine(CONFIG, plain.program, tmp_path, plain.prompts_dir, "fm.md", "FRAMING: minimise f.",
                        ("NOTE: runs are short",))
    guide = Guide()
    engine.refresh(_population(2), guide)
    engine.refresh(_population(2, _stagnant()), guide)
    assert len(guide.prompts) >= 2
    assert all("FRAMING: minimise f." in prompt for prompt in guide.prompts)
    assert "- NOTE: runs are short\n" in guide.prompts[-1]
    population = _population(2)
    decision = engine.decide(population, _context(population), random.Random(1))
    assert "## Problem framing\n\nFRAMING: minimise f.\n" in engine.prompt(decision, _inputs(engine, {}, 0.3, population))
