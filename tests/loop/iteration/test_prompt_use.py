"""Tests for loop/iteration/prompt_use.py: the guide writing a variant when due, the draw, and the record's bullets."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from autoloop_py.errors import ConfigurationError
from autoloop_py.loop.iteration import prompt_use
from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.target import Target
from autoloop_py.proposers.llm_call import ModelCallError
from autoloop_py.proposers.prompt_choice import PromptChoice
from autoloop_py.state import file as statefile
from autoloop_py.state import trace
from autoloop_py.state.prompt_stats import BASE, PromptRow, use_of

NOW = datetime(2026, 11, 26, tzinfo=timezone.utc)
TABLE = """## 🧪 Prompts

| Variant | Weight | Calls | Accepted | Improvement | Tokens | Instruction |
|---|---|---|---|---|---|---|
| `mine` | — | 3 | 1 | 0.5 | 30 | Keep each change small. |

---

"""


def _program(**config: object) -> Program:
    settings = ProgramConfig(**config)  # type: ignore[arg-type]
    return Program("demo", Path("program.md"), None, "Grow x.", Target(("code/*.py",)),
                   Evaluation("python e.py", "score", 1), "", settings, False, "")


def _state(table: str = "") -> statefile.StateFile:
    text = statefile.render_state(statefile.new_state("demo", "g", "score", "higher", None))
    return statefile.parse_state(text.replace("## 📊 Iteration History", table + "## 📊 Iteration History", 1))


class _Guide:
    """A guide model that answers with a fixed reply (or raises) and keeps the prompts it was sent."""

    def __init__(self, reply: str | Exception) -> None:
        self.reply, self.prompts = reply, []  # type: ignore[var-annotated]

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_without_a_table_or_evolution_nothing_is_drawn_and_nothing_recorded() -> None:
    choice = prompt_use.choose(_program(), _state(), 3, _Guide("INSTRUCTION: x"))
    assert choice == PromptChoice() and choice.instruction == ""
    record = statefile.IterationRecord("rejected", NOW, "c", 1.0)
    assert prompt_use.with_choice(record, None, choice) == (record, None)


def test_a_hand_written_variant_is_drawn_and_named_in_the_record_and_trace() -> None:
    choice = prompt_use.choose(_program(prompt_selection="ucb"), _state(TABLE), 1, None)
    assert choice.variant == PromptRow("mine", "Keep each change small.", None, 3, 1, 0.5, 30)
    record = statefile.IterationRecord("accepted", NOW, "c", 2.0)
    evaluated = trace.Evaluated("x = 2\n", {"score": 2.0}, metadata={"island": 0})
    record, evaluated = prompt_use.with_choice(record, evaluated, choice)
    assert use_of(record) == ("mine", None)
    assert evaluated is not None and evaluated.metadata == {"island": 0, "prompt": "mine"}
    # A prompt that did not hold it (FunSearch's unchanged seed) credits nothing.
    assert prompt_use.with_choice(record, None, choice, used=False)[0].extra == record.extra


def test_a_due_guide_writes_a_variant_that_is_tried_first() -> None:
    guide = _Guide("Here you go.\nINSTRUCTION: Try a lookup table.\n")
    program = _program(prompt_selection="thompson", prompt_evolve_every=4)
    assert prompt_use.choose(program, _state(TABLE), 3, guide).written is None and guide.prompts == []
    choice = prompt_use.choose(program, _state(TABLE), 4, guide)
    assert choice.written == PromptRow("p4", "Try a lookup table.") and choice.variant == choice.written
    assert "Keep each change small." in guide.prompts[0] and "Grow x." in guide.prompts[0]
    record, _ = prompt_use.with_choice(statefile.IterationRecord("rejected", NOW, "c", 1.0), None, choice)
    assert use_of(record) == ("p4", PromptRow("p4", "Try a lookup table."))


def test_evolution_starts_from_the_base_variant_when_no_one_wrote_any() -> None:
    choice = prompt_use.choose(_program(prompt_evolve_every=1), _state(), 1, _Guide("INSTRUCTION: Be brave."))
    assert choice.written == PromptRow("p1", "Be brave.") and choice.variant is not None
    assert prompt_use.choose(_program(prompt_evolve_every=2), _state(), 1, None).variant == PromptRow(BASE)


@pytest.mark.parametrize("reply", ["I would rather not.", ModelCallError("the model timed out")])
def test_an_unusable_or_failed_guide_reply_adds_no_variant(reply: str | Exception) -> None:
    choice = prompt_use.choose(_program(prompt_evolve_every=1), _state(TABLE), 1, _Guide(reply))
    assert choice.written is None and choice.variant is not None and choice.variant.name == "mine"


def test_a_guide_setting_that_cannot_work_stops_the_run() -> None:
    with pytest.raises(ConfigurationError):
        prompt_use.choose(_program(prompt_evolve_every=1), _state(TABLE), 1, _Guide(ConfigurationError("404 model")))
