"""Every strategy's prompt carries the maintainers' steering: Current Priorities, Foreclosed Avenues, Lessons, comments."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.commands.new import copy_plan, pointer_block, strategy_templates
from autoloop_py.program.model import load_program
from autoloop_py.program.target import target_files
from autoloop_py.state import file as statefile
from autoloop_py.strategies import runner as strategy
from autoloop_py.strategies.prompt import prompt_context, render_iteration_prompt
from tests.e2e.test_funsearch_run import funsearch_repo  # noqa: F401 - the FunSearch program fixture
from tests.programs import REPO, install_strategy_program

PROGRAM = ".autoloop/programs/function_minimization"
POC = ".autoloop/programs/groupby_evolve"
PRIORITY = "PRIORITY-MARK: try simulated annealing first"
FORECLOSED = "FORECLOSED-MARK: grid search is too slow"
LESSON = "LESSON-MARK: smaller steps help near the minimum"
COMMENT = "COMMENT-MARK: please keep the restarts"


def _state(name: str = "function_minimization") -> statefile.StateFile:
    state = statefile.new_state(name, "Find the minimum.", "combined_score", "higher", None)
    text = statefile.render_state(state)
    text = text.replace("## 🎯 Current Priorities\n", f"## 🎯 Current Priorities\n\n- {PRIORITY}\n", 1)
    text = text.replace("## 🚧 Foreclosed Avenues\n", f"## 🚧 Foreclosed Avenues\n\n- {FORECLOSED}\n", 1)
    state = statefile.add_lesson(statefile.parse_state(text), LESSON)
    assert state.priorities and state.foreclosed and state.lessons  # the edits landed in the sections
    return state


def _install(name: str, repo: Path, run_git: Callable[..., str]) -> str:
    """Commits a program running the strategy: the AlphaEvolve proof of concept, else function_minimization.

    FunSearch needs a customised playbook and evaluator: its e2e test's `funsearch_repo` installs them.
    """
    if name == "alphaevolve":
        shutil.copytree(REPO / POC, repo / POC, ignore=shutil.ignore_patterns("__pycache__"))
        run_git(repo, "add", "-A")
        run_git(repo, "commit", "-qm", "proof of concept")
        return POC
    template = strategy_templates(REPO)[name]
    install_strategy_program(repo, run_git, PROGRAM, name, pointer_block(template, [d for _, d in copy_plan(template)]), "")
    return PROGRAM


def _assert_steered(prompt: str) -> None:
    for mark in (PRIORITY, FORECLOSED, LESSON, COMMENT):
        assert mark in prompt
    assert "## Priorities" in prompt and "## Foreclosed avenues (already shown not to work)" in prompt
    assert "## Steering from people" in prompt
    # People's text is quoted as data, before the reply format.
    assert prompt.index(PRIORITY) < prompt.index("## How to reply")


@pytest.mark.parametrize("name", ["alphaevolve", "adaevolve", "funsearch", "evox"])
def test_every_strategy_prompt_carries_the_steering(name: str, request: pytest.FixtureRequest) -> None:
    if name == "funsearch":
        git_repo, folder = request.getfixturevalue("funsearch_repo"), PROGRAM
    else:
        git_repo = request.getfixturevalue("git_repo")
        folder = _install(name, git_repo, request.getfixturevalue("run_git"))
    program = load_program(git_repo, Path(folder) / "program.md")
    runner = strategy.load_runner(program, git_repo)
    assert runner is not None and runner.playbook.name == name
    state = _state(program.name)
    decision = strategy.decide(runner, state, None, 1, program.direction, random.Random(1), lambda _: None)
    files = {path: (git_repo / path).read_text() for path in target_files(program.target, git_repo)}
    placed = strategy.with_parent(runner, decision, files)
    prompt = strategy.render_prompt(runner, decision, program, placed, state, None, (COMMENT,))
    _assert_steered(prompt)


def test_the_default_flow_carries_the_steering(git_repo: Path) -> None:
    program = load_program(REPO, Path(PROGRAM) / "program.md")
    context = prompt_context(program, {"code/search.py": "x = 1\n"}, _state(), 0.5, 2, (COMMENT,))
    _assert_steered(render_iteration_prompt(context))
