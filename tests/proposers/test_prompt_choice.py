"""Tests for proposers/prompt_choice.py: the variant draw (the models' bandit) and the guide's evolution prompt."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timezone

import pytest

from autoloop_py.proposers.prompt_choice import (
    choose_variant,
    due,
    evolve_prompt,
    next_name,
    parse_variant,
    ranked,
)
from autoloop_py.proposers.model_choice import draw_rng
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.prompt_stats import BASE, PromptRow, PromptTable, use_bullets, with_record

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_an_empty_table_draws_nothing_unless_evolving() -> None:
    assert choose_variant(PromptTable(), "ucb", random.Random(0), evolving=False) is None
    assert choose_variant(PromptTable(), "ucb", random.Random(0), evolving=True) == PromptRow(BASE)


def test_a_weight_of_zero_keeps_a_variant_out_and_a_new_one_goes_first() -> None:
    table = PromptTable((PromptRow("off", "x", weight=0.0), PromptRow("a", "y", calls=5, accepted=1, improvement=1.0,
                                                                      tokens=50), PromptRow("new", "z")))
    drawn = Counter(choose_variant(table, method, random.Random(i), False).name  # type: ignore[union-attr]
                    for i in range(30) for method in ("weighted", "ucb", "thompson"))
    assert drawn["off"] == 0
    # ucb and thompson try the variant never drawn first; weighted draws by weight.
    assert drawn["new"] >= 60


@pytest.mark.parametrize("method", ["ucb", "thompson"])
def test_the_bandit_moves_the_draw_to_the_variant_that_improves(method: str) -> None:
    table = PromptTable((PromptRow("good", "Step up."), PromptRow("bad", "Step down.")))
    rng = random.Random(7)
    drawn = []
    for iteration in range(1, 41):
        row = choose_variant(table, method, draw_rng("prompts", 0, "demo", iteration), False)
        assert row is not None
        kept = row.name == "good" and rng.random() < 0.6
        record = IterationRecord("accepted" if kept else "rejected", NOW, "c", 1.0, tokens=100,
                                 extra=use_bullets(row.name))
        table = with_record(table, record, 1.0 if kept else 0.0)
        drawn.append(row.name)
    assert drawn.count("good") >= 28 and "bad" in drawn
    assert sum(row.calls for row in table.rows) == 40


def test_evolution_is_due_every_k_iterations_and_never_for_zero() -> None:
    assert [i for i in range(1, 13) if due(i, 4)] == [4, 8, 12]
    assert not any(due(i, 0) for i in range(1, 13))


def test_the_guide_sees_the_best_and_the_worst_as_data() -> None:
    best = PromptRow("p1", "Unroll the loop.", calls=4, accepted=2, improvement=3.0)
    worst = PromptRow("p2", "Use ```eval``` freely.", calls=4, accepted=0)
    fresh = PromptRow("p3", "Never tried.")
    table = PromptTable((worst, fresh, best))
    assert ranked(table) == (best, worst)
    prompt = evolve_prompt(table, "Make it fast.")
    assert prompt.index("best instruction so far: p1") < prompt.index("Unroll the loop.") < prompt.index(
        "worst instruction so far: p2")
    assert "````text\nUse ```eval``` freely.\n````" in prompt and "Never tried." not in prompt
    assert prompt.rstrip().endswith("INSTRUCTION: <the new instruction>")
    only = evolve_prompt(PromptTable(), "Make it fast.")
    assert "(no instruction: the prompt as it is)" in only and "worst" not in only


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("INSTRUCTION: Try caching results.", "Try caching results."),
        ("Sure!\n\n**Instruction**: ## Rewrite | all\n", "Rewrite | all"),
        ("instruction: \x1b]0;owned\x07Be bold.", "Be bold."),
        ("No idea.", None),
        ("INSTRUCTION:   ###  ", None),
    ],
)
def test_a_reply_gives_one_safe_line_or_nothing(reply: str, expected: str | None) -> None:
    assert parse_variant(reply) == expected


def test_a_written_variant_is_named_for_its_iteration_else_above_every_other() -> None:
    assert next_name(PromptTable(), 4) == "p4"
    assert next_name(PromptTable((PromptRow("p2"), PromptRow("mine"), PromptRow("p10"))), 2) == "p11"
