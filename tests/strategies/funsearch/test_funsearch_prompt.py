"""Tests for strategies/funsearch_prompt.py: the specification, the versions and the reply format (spec §4.2, F8)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autoloop_py.errors import ProgramError
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.target import Target
from autoloop_py.state.population import Candidate
from autoloop_py.strategies.funsearch import strategy as fs
from autoloop_py.strategies.funsearch.config import FunSearchConfig
from autoloop_py.strategies.funsearch.prompt import render_prompt
from autoloop_py.strategies.funsearch.state import Cluster, FunSearchState, Island, Member

CONFIG = FunSearchConfig("priority")
SPEC = "## Test inputs\n\n- n8: cap sets in dimension 8\n"
PATH = "code/capset.py"
CURRENT = 'def priority(el, n):\n    """Returns the priority of `el`."""\n    return 0.0\n'


class FakeRng:
    """Returns the given uniforms in order."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        """Returns the next given uniform."""
        return self.values.pop(0)


def program() -> Program:
    """Returns a configured program whose metric is `score`."""
    return Program(
        name="cap-set", path=Path(".autoloop/programs/cap-set/program.md"),
        directory=Path(".autoloop/programs/cap-set"),
        goal="Find large cap sets.", target=Target(("code/capset.py",)),
        evaluation=Evaluation("python code/evaluate.py", "score", 30), strategy_text="",
        config=ProgramConfig(), unconfigured=False, text="",
    )


def function(marker: str) -> str:
    """Returns a priority function whose body names a marker."""
    return f'def priority(el, n):\n    """Returns the priority of `el`."""\n    return len(el)  # {marker}\n'


def f8_decision() -> fs.FunSearchDecision:
    """Returns the F8 decision: clusters scoring .5 (#5) and .4 (#4), both drawn."""
    state = FunSearchState(islands=(Island(0, 0, 2, 0.5, 5, (
        Cluster((0.5,), 0.5, (Member(5, 60),)),
        Cluster((0.4,), 0.4, (Member(4, 60),)),
    )),))
    population = [
        Candidate(5, 0, 0.5, 5, "sample", code=function("score .5")),
        Candidate(4, 0, 0.4, 4, "sample", code=function("score .4")),
    ]
    return fs.decide(state, population, CONFIG, FakeRng(0.0, 0.0, 0.0, 0.0, 0.0))


def test_f8_v0_is_the_weaker_function_and_the_header_improves_on_v1() -> None:
    prompt = render_prompt(f8_decision(), CONFIG, program=program(), specification=SPEC, current=CURRENT, path=PATH)
    versions = prompt[prompt.index("```python\n") :]
    assert versions.index("def priority_v0") < versions.index("# score .4") < versions.index("def priority_v1")
    assert versions.index("def priority_v1") < versions.index("# score .5") < versions.index("def priority_v2")
    assert 'def priority_v1(el, n):\n    """Improved version of `priority_v0`."""\n' in prompt
    assert prompt.rstrip().endswith("Keep everything else in it as it is.")
    assert '\ndef priority_v2(el, n):\n    """Improved version of `priority_v1`."""\n```\n' in prompt


def test_the_prompt_opens_with_the_goal_and_the_specification() -> None:
    prompt = render_prompt(f8_decision(), CONFIG, program=program(), specification=SPEC, current=CURRENT, path=PATH)
    assert prompt.startswith(
        "You are writing the next version of the function `priority` for the program `cap-set`. Earlier versions "
        "follow, worst first; each one improves on the one before it. Write `priority_v2`.\n\n## Goal\n\n"
        "Find large cap sets.\n\nThe metric is `score`; higher is better.\n\n## Specification\n\n"
        "```markdown\n## Test inputs\n\n- n8: cap sets in dimension 8\n```\n"
    )
    assert "SUMMARY: <what your version does, one line of 10 to 20 words>" in prompt
    assert "Write `priority_v2`: the header above and a new body." in prompt
    assert "Then put your version into `code/capset.py`, named `priority` again" in prompt
    assert "score 0.5" not in prompt and "(0.4)" not in prompt


def test_an_empty_specification_is_left_out() -> None:
    prompt = render_prompt(f8_decision(), CONFIG, program=program(), specification="  \n", current=CURRENT, path=PATH)
    assert "## Specification" not in prompt and "## Versions" in prompt


def test_versions_without_the_function_fall_back_to_the_target() -> None:
    decision = f8_decision()
    broken = tuple(replace(p, candidate=replace(p.candidate, code="x = 1\n")) for p in decision.picks)
    prompt = render_prompt(replace(decision, picks=broken[:1] + decision.picks[1:]), CONFIG,
                           program=program(), specification=SPEC, current=CURRENT, path=PATH)
    assert "def priority_v0" in prompt and "# score .5" in prompt and "def priority_v2" not in prompt
    prompt = render_prompt(
        replace(decision, picks=broken), CONFIG, program=program(), specification=SPEC, current=CURRENT, path=PATH
    )
    assert "so `priority_v0` is the function as it is in the Target now." in prompt
    assert "    return 0.0\n" in prompt and "Write `priority_v1`." in prompt
    assert "Write `priority_v1`: the header above" in prompt  # the reply names the header shown
    with pytest.raises(ProgramError, match="the Target has no function `priority`; define it"):
        render_prompt(replace(decision, picks=broken), CONFIG, program=program(), specification=SPEC, current="x = 1\n", path=PATH)


def test_a_seed_decision_has_no_prompt() -> None:
    seed = fs.decide(FunSearchState(), [], CONFIG, FakeRng())
    with pytest.raises(ValueError, match="a seed decision has no prompt"):
        render_prompt(seed, CONFIG, program=program(), specification=SPEC, current=CURRENT, path=PATH)
