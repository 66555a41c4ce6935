"""Tests for strategies/state_reading.py: the whole state file read as a run reads it, bad tables refused."""

from __future__ import annotations

import pytest

from autoloop_py.errors import StateError
from autoloop_py.state import file as statefile
from autoloop_py.strategies.state_reading import parse_everything

MODELS = ("## 🎰 Models\n\n| Model | Weight | Calls | Accepted | Improvement | Tokens | Spend |\n"
          "|-------|--------|-------|----------|-------------|--------|-------|\n"
          "| openai/gpt-4o-mini | {weight} | 3 | 1 | 0.1 | 100 | 0 |\n\n---\n\n")


def _with_models(weight: str) -> str:
    text = statefile.render_state(statefile.new_state("demo", "Grow x.", "score", "higher", None))
    at = text.index("## 📊 Iteration History")
    return text[:at] + MODELS.format(weight=weight) + text[at:]


def test_a_readable_file_is_returned_parsed() -> None:
    state = parse_everything(_with_models("0.5"), "demo.md", None)
    assert [row.weight for row in statefile.models_of(state).rows] == [0.5]


def test_a_bad_models_row_is_refused_at_its_line() -> None:
    text = _with_models("heavy")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "| heavy |" in row)
    with pytest.raises(StateError) as caught:
        parse_everything(text, "demo.md", None)
    assert caught.value.line == line and "Weight is 'heavy'" in caught.value.message


def test_a_bad_machine_state_value_is_refused_at_its_line() -> None:
    text = _with_models("0.5").replace("| Iteration Count | 0 |", "| Iteration Count | lots |")
    with pytest.raises(StateError, match="'Iteration Count' is 'lots'"):
        parse_everything(text, "demo.md", None)
