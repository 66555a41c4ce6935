"""Strategy template: where each shipped template's files go in a program, its pointer and when to pick it."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.commands.new import strategy_templates
from autoloop_py.program.strategy_template import (
    StrategyTemplate,
    copy_plan,
    playbook_path,
    pointer_block,
    program_files,
)
from autoloop_py.strategies import registry

SHIPPED = ("adaevolve", "alphaevolve", "evox", "funsearch")


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_template_lands_in_strategy_with_its_playbook_renamed(name: str) -> None:
    template = strategy_templates(Path("/nonexistent"))[name]
    files = program_files(template)
    assert playbook_path(name) in files
    assert all(rel.startswith("strategy/") for rel in files)
    assert "CUSTOMIZE.md" not in {src for src, _ in copy_plan(template)}
    assert files[playbook_path(name)] == template.files["strategy.md"]
    block = pointer_block(template, list(files))
    assert block.startswith("## Evolution Strategy")
    assert f"`{playbook_path(name)}`" in block
    assert template.when_to_pick and all("**" not in c for c in template.when_to_pick)
    assert name in registry.names()


def test_a_template_without_a_guide_follows_the_naming_convention() -> None:
    template = StrategyTemplate("mine", "here", {"strategy.md": "# Mine\n", "prompts/a.md": "a\n"})
    assert copy_plan(template) == [("strategy.md", "strategy/mine.md"), ("prompts/a.md", "strategy/prompts/a.md")]
    assert template.when_to_pick == ()
    block = pointer_block(template, ["strategy/mine.md", "strategy/prompts/a.md"])
    assert "read `strategy/mine.md`" in block
    assert "- `strategy/prompts/a.md`" in block
