"""Tests for analysis/replay_prompts.py: each variant on real rendered prompts (default flow, AdaEvolve), the retry prompt."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autoloop_py.analysis.replay_prompts import ContextProgram, closest, retry_prompt, vary
from autoloop_py.program.edits import EditFailure
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.target import Target
from autoloop_py.render import render
from autoloop_py.state.population import Candidate
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.prompt import render_prompt
from autoloop_py.strategies.adaevolve.strategy import AdaEvolveDecision
from autoloop_py.strategies.prompt import PromptContext, Steering, render_iteration_prompt

FILE = "code/search.py"
FILES = {FILE: "def search():\n    return 1\n"}
HISTORY = ("### Iteration 3 — rejected\n\n- **Summary**: tried a cache\n- **Metric**: 1.3\n",)
CONTEXT_SKIP = ("the prompt has no section of other programs' context (headings 'Other programs for inspiration', "
                "'Context programs', 'Other Context Solutions')")


def _program() -> Program:
    return Program(
        name="demo", path=Path(".autoloop/programs/demo/program.md"), directory=Path(".autoloop/programs/demo"),
        goal="Make the search faster.", target=Target((FILE,), ("code/eval.py",)),
        evaluation=Evaluation("python code/eval.py", "seconds", 20), strategy_text="",
        config=ProgramConfig(metric_direction="lower"), unconfigured=False, text="",
    )


def _default(**changes: object) -> str:
    fields: dict[str, object] = {"program": _program(), "files": FILES, "best_metric": 1.25, "iteration": 7,
                                 "lessons": ("memoise pure helpers",), "recent_history": HISTORY}
    fields.update(changes)
    return render_iteration_prompt(PromptContext(**fields))  # type: ignore[arg-type]


def _cand(id: int, fitness: float, parents: tuple[int, ...] = ()) -> Candidate:
    return Candidate(id=id, island=id % 2, fitness=fitness, gen=id, operator="exploitation", parents=parents,
                     approach=f"approach {id}", status="accepted", code=f"def solve_{id}():\n    return {id}\n")


DECISION = AdaEvolveDecision(
    island=1, mode="exploitation", reason="island 1 improves", parent=_cand(5, 0.95),
    local_context=(_cand(3, 0.7),), global_context=(_cand(4, 0.8), _cand(2, 0.9)),
    siblings=(_cand(11, 0.97, (5,)), _cand(10, 0.2, (5,))),
)


def _adaevolve(decision: AdaEvolveDecision = DECISION) -> str:
    return render_prompt(decision, AdaEvolveConfig(), program=_program(), files=FILES, framing="Be bold.\n",
                         best_metric=0.95, steering=Steering(lessons=("hex beats grid",)))


def test_exact_re_sends_the_prompt_unchanged() -> None:
    prompt = _default()
    assert vary("exact", "sys", prompt) == vary("exact", "sys", prompt, 1.0, ())
    assert (vary("exact", "sys", prompt).user, vary("exact", "sys", prompt).change) == (prompt, "")


def test_strict_diff_appends_the_instruction_from_its_template() -> None:
    prompt = _default()
    varied = vary("strict_diff", "sys", prompt)
    assert varied.user == prompt + render("replay_strict_diff.md.j2")
    assert "Output SEARCH/REPLACE edit blocks only: no whole-file rewrite" in varied.user
    assert (varied.system, varied.change, varied.skipped) == ("sys", "asked for SEARCH/REPLACE blocks only", None)


def test_no_history_cuts_the_default_flows_recent_history_and_nothing_else() -> None:
    varied = vary("no_history", "", _default())
    assert varied.user == _default(recent_history=())
    assert "## Lessons from earlier iterations" in varied.user and "## How to reply" in varied.user
    assert varied.change == "cut 'Recent history'"


def test_the_default_flow_has_no_context_programs() -> None:
    prompt = _default()
    assert vary("no_other_context", "", prompt).skipped == CONTEXT_SKIP
    assert vary("no_other_context", "", prompt).user == prompt
    assert vary("no_history", "", _default(recent_history=())).skipped == (
        "the prompt has no section of earlier attempts (headings 'Recent history', 'Previous attempts', "
        "'Earlier children of this parent', 'Program Generation History')")
    skipped = vary("alternate_context", "", prompt, 1.0, (ContextProgram("it1", 0, 1.0, "x = 1\n"),)).skipped
    assert skipped is not None and skipped.startswith("the prompt shows no context programs")


def test_no_other_context_cuts_adaevolves_inspiration_section() -> None:
    varied = vary("no_other_context", "", _adaevolve())
    assert varied.user == _adaevolve(replace(DECISION, local_context=(), global_context=()))
    assert varied.change == "cut 'Other programs for inspiration'"
    assert "### Candidate 5 · island 1 · fitness 0.95" in varied.user  # the parent stays


def test_no_history_cuts_adaevolves_earlier_children() -> None:
    varied = vary("no_history", "", _adaevolve())
    assert varied.user == _adaevolve(replace(DECISION, siblings=()))
    assert varied.change == "cut 'Earlier children of this parent'"


def test_alternate_context_shows_the_programs_closest_to_the_parent() -> None:
    pool = [ContextProgram("it1", 1, 0.5, "x = 1\n", "seed"), ContextProgram("it2", 2, 0.92, "x = 2\n", "grid"),
            ContextProgram("it3", 3, 0.99, "x = 3", ""), ContextProgram("it4", 4, 0.97, "x = 4\n", "hex"),
            ContextProgram("2", 2, 0.95, "x = 9\n", "shown already")]
    varied = vary("alternate_context", "", _adaevolve(), 0.95, pool)
    assert varied.change == "showed it4, it2, it3 instead of 3, 4, 2"
    expected = _adaevolve().replace(
        "#### Candidate 3 · island 1 · fitness 0.7\n\nApproach: approach 3\n\n```python\ndef solve_3():\n    return 3\n",
        "#### Candidate it4 · fitness 0.97\n\nApproach: hex\n\n```python\nx = 4\n",
    ).replace(
        "#### Candidate 4 · island 0 · fitness 0.8\n\nApproach: approach 4\n\n```python\ndef solve_4():\n    return 4\n",
        "#### Candidate it2 · fitness 0.92\n\nApproach: grid\n\n```python\nx = 2\n",
    ).replace(
        "#### Candidate 2 · island 0 · fitness 0.9\n\nApproach: approach 2\n\n```python\ndef solve_2():\n    return 2\n",
        "#### Candidate it3 · fitness 0.99\n\nApproach: (not recorded)\n\n```python\nx = 3\n",
    )
    assert varied.user == expected and varied.user != _adaevolve()


def test_alternate_context_with_too_few_earlier_programs_cuts_the_rest() -> None:
    varied = vary("alternate_context", "", _adaevolve(), 0.95, [ContextProgram("it1", 1, 0.5, "x = 1\n")])
    assert varied.change == "showed it1 instead of 3, 4, 2 (only 1 earlier programs; the rest were cut)"
    assert "#### Candidate it1 · fitness 0.5" in varied.user
    assert "Candidate 4 ·" not in varied.user and "Candidate 2 ·" not in varied.user
    assert "### The best of all islands\n\n## Earlier children" in varied.user
    assert vary("alternate_context", "", _adaevolve(), 0.95, ()).skipped == (
        "no earlier program of the run can stand in for the context")


def test_closest_orders_by_distance_then_latest() -> None:
    pool = [ContextProgram("a", 1, 1.0, ""), ContextProgram("b", 2, 3.0, ""), ContextProgram("c", 3, 1.0, "")]
    assert [p.id for p in closest(pool, 2.0, 3)] == ["c", "b", "a"]
    assert [p.id for p in closest(pool, 2.9, 2, exclude={"b"})] == ["c", "a"]
    assert [p.id for p in closest(pool, None, 2)] == ["c", "b"]


def test_evotrace_markers_are_cut_with_their_subsections() -> None:
    prompt = ("# Task\n\nDo it.\n\n# Program Generation History\n\n## Previous Attempts\n\n- one\n\n"
              "## Other Context Solutions\n\n```python\n# not a heading\nx = 1\n```\n\n# Current Solution\n\nx = 0\n")
    assert vary("no_history", "", prompt).user == "# Task\n\nDo it.\n\n# Current Solution\n\nx = 0\n"
    assert vary("no_history", "", prompt).change == "cut 'Program Generation History'"
    cut = vary("no_other_context", "", prompt).user
    assert "Other Context Solutions" not in cut and "## Previous Attempts\n\n- one\n\n# Current Solution" in cut


def test_an_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown replay variant 'loud'"):
        vary("loud", "", "x")


def test_retry_prompt_feeds_back_each_kind_of_failure() -> None:
    unreadable = retry_prompt("PROMPT\n", "SUMMARY: x\n<<<<<<< SEARCH\n", parse_error="unterminated block\n^^^ here")
    assert unreadable.startswith("PROMPT\n\n## Your previous reply\n\nThe block below is your previous reply")
    assert "```text\nSUMMARY: x\n<<<<<<< SEARCH\n```" in unreadable
    assert "It could not be read, so nothing was applied:\n\n```text\nunterminated block\n^^^ here\n```" in unreadable
    failure = EditFailure("code/a.py", "block 1 matches no lines of code/a.py", nearest_lines="y = 2")
    missed = retry_prompt("PROMPT", "reply", failures=(failure,))
    assert ("Its edits could not be applied, so nothing was applied:\n\n1. block 1 matches no lines of code/a.py\n"
            "   The most similar lines in code/a.py are:\n\n```\ny = 2\n```\n") in missed
    failed = retry_prompt("PROMPT", "reply", eval_error="exited with status 1")
    assert "It applied, but the candidate failed its evaluation:\n\n```text\nexited with status 1\n```" in failed
    assert failed.endswith("complete edit blocks against the files as shown above (SEARCH lines must match them "
                           "exactly).\n")
    assert "````text\nshows ``` fences\n````" in retry_prompt("P", "shows ``` fences", eval_error="e")
