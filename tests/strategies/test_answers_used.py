"""Every customised answer is used: each reaches a rendered prompt or changes a decision.

The four strategies are added to function_minimization with the distinctive answers of
tests/e2e/test_strategy_command.py (`autoloop strategy add --answers`); their engines are built as a run
builds them, and the prompts each strategy sends are rendered. NOT_IN_A_PROMPT would list an answer no prompt
shows, with why: none is left.
"""

from __future__ import annotations

import re
import shutil
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from autoloop_py.cli import main
from autoloop_py.program.model import load_program
from autoloop_py.state import population as pop
from autoloop_py.strategies.adaevolve import prompt as adaevolve_prompt
from autoloop_py.strategies.base import Decision, StrategyContext
from autoloop_py.strategies.engine import PromptInputs
from autoloop_py.strategies.prompt import Steering
from autoloop_py.strategies.runner import load_runner
from tests.e2e.test_strategy_command import ANSWERS, NAME, PROGRAM, REPO
from tests.strategies.evox.test_evox_engine import _population, _stagnant

_TAG_RE = re.compile(r"\b[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*-(?:AE|ADA|EVOX|FS)\b")
NOT_IN_A_PROMPT = {
    "alphaevolve": set(),
    "adaevolve": set(),
    "evox": set(),
    "funsearch": set(),
}


@pytest.fixture
def adopted(git_repo: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    def adopt(strategy: str) -> tuple[Path, object]:
        root = git_repo
        shutil.copytree(REPO / PROGRAM, root / PROGRAM, ignore=shutil.ignore_patterns("__pycache__"))
        answers = tmp_path / f"{strategy}.yaml"
        answers.write_text(yaml.safe_dump(ANSWERS[strategy], allow_unicode=True), encoding="utf-8")
        assert main(["strategy", "add", strategy, "--program", NAME, "--answers", str(answers),
                     "--repo", str(root)]) == 0
        program = load_program(root, Path(PROGRAM) / "program.md")
        return root, (program, load_runner(program, root))

    return adopt


def _tags(strategy: str) -> set[str]:
    """Returns the distinctive tags the prose answers carry (e.g. FRAMING-AE, VALID2-AE)."""
    texts = [t for v in ANSWERS[strategy].values() for t in (v if isinstance(v, list) else [v])]
    return {tag for text in texts for tag in _TAG_RE.findall(text)}


def _files(root: Path) -> dict[str, str]:
    path = f"{PROGRAM}/code/search.py"
    return {path: (root / path).read_text()}


def _parent(cid: int, island: int) -> pop.Candidate:
    return pop.Candidate(cid, island, 0.5 + cid / 100, cid, "exploration", cell=(f"i{island}", "small"),
                         status="accepted", code="x = 1\n")


def _used(tags: set[str], texts: list[str]) -> set[str]:
    return {tag for tag in tags if any(tag in text for text in texts)}


def test_alphaevolve_answers_reach_the_prompts_and_the_decisions(adopted) -> None:  # type: ignore[no-untyped-def]
    root, (program, runner) = adopted("alphaevolve")
    engine = runner.engine
    prompts = []
    for operator, framing in (("exploration", "mutation.md"), ("crossover", "crossover.md")):
        parents = (_parent(1, 0),) if operator == "exploration" else (_parent(1, 0), _parent(2, 1))
        text = (root / PROGRAM / "strategy/prompts" / framing).read_text()
        inputs = PromptInputs(program, _files(root), text, 0.5, Steering(), pop.empty_population())
        prompts.append(engine.prompt(Decision(operator, "test", parents, 0), inputs))
    assert _used(_tags("alphaevolve"), prompts) == _tags("alphaevolve") - NOT_IN_A_PROMPT["alphaevolve"]
    assert all("## Problem framing\n\nFRAMING-AE: code/search.py" in p for p in prompts)
    assert all("(WEIGHTS-AE: exploitation pays on this smooth landscape)" in p for p in prompts)
    config = engine.config
    assert [i.name for i in config.islands] == ["annealing", "grid", "gradient", "swarm"]
    assert (config.population_size, config.archive_size, config.diff_style) == (12, 4, "minimal_diff")
    assert [(d.name, d.kind, d.bins) for d in config.dimensions] == [
        ("approach_family", "islands", 3), ("reliability", "metric", 4)]
    assert dict(config.operator_weights)["exploitation"] == Fraction(1, 2)


def test_adaevolve_answers_reach_the_solution_and_guide_prompts(adopted) -> None:  # type: ignore[no-untyped-def]
    root, (program, runner) = adopted("adaevolve")
    engine = runner.engine
    context = StrategyContext((), (), None, 1, "higher", 1)
    decision = engine.decide(pop.empty_population("AdaEvolve"), context, __import__("random").Random(1))
    solution = (root / PROGRAM / "strategy/prompts/solution.md").read_text()
    inputs = PromptInputs(program, _files(root), solution, None, Steering(), pop.empty_population())
    prompts = [engine.prompt(decision, inputs), adaevolve_prompt.render_guide_prompt(
        engine.config, program=program, best=None, tried=(), framing=engine._framing("paradigm.md"),
        problem=engine.problem, notes=engine.notes)]
    assert _used(_tags("adaevolve"), prompts) == _tags("adaevolve") - NOT_IN_A_PROMPT["adaevolve"]
    assert all("FRAMING-ADA" in p for p in prompts)


def test_evox_answers_reach_the_solution_label_and_meta_prompts(adopted) -> None:  # type: ignore[no-untyped-def]
    root, (program, runner) = adopted("evox")
    engine = runner.engine
    asked: list[str] = []

    def guide(prompt: str) -> str:
        asked.append(prompt)
        return "no usable reply"

    engine.refresh(pop.empty_population("EvoX"), guide)  # the DIVERGE/REFINE label texts
    engine.refresh(_population(2, _stagnant()), guide)  # the meta rewrite of the search strategy
    solution = (root / PROGRAM / "strategy/prompts/solution.md").read_text()
    population = _population(2)
    decision = engine.decide(population, StrategyContext(population.candidates, (), 0.2, 3, "higher", 3),
                             __import__("random").Random(1))
    inputs = PromptInputs(program, _files(root), solution, 0.2, Steering(), population)
    prompts = [*asked, engine.prompt(decision, inputs)]
    assert _used(_tags("evox"), prompts) == _tags("evox") - NOT_IN_A_PROMPT["evox"]
    assert all("FRAMING-EVOX" in p for p in prompts)


def test_funsearch_answers_reach_the_prompt_and_the_function(adopted) -> None:  # type: ignore[no-untyped-def]
    root, (program, runner) = adopted("funsearch")
    engine = runner.engine
    assert engine.config.function_to_evolve == "search_algorithm"
    decision = engine.decide(pop.empty_population("FunSearch"), StrategyContext((), (), None, 1, "higher", 1),
                             __import__("random").Random(1))
    skeleton = (root / PROGRAM / "strategy/prompts/skeleton.md").read_text()
    inputs = PromptInputs(program, _files(root), skeleton, None, Steering(), pop.empty_population())
    prompt = engine.prompt(decision, inputs)
    assert _used(_tags("funsearch"), [prompt]) == _tags("funsearch") - NOT_IN_A_PROMPT["funsearch"]
    assert "## Problem framing\n\nFRAMING-FS: the search rewrites search_algorithm" in prompt
