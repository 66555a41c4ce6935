"""Strategy template: where each shipped template's files go in a program, its pointer and when to pick it."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.commands.new import fill_markers, strategy_templates
from autoloop_py.program.playbook import customize_markers, label_bare_markers
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
    assert files[playbook_path(name)] == label_bare_markers(template.files["strategy.md"])
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


@pytest.mark.parametrize("name", SHIPPED)
def test_every_marker_a_strategy_leaves_says_what_to_write(name: str) -> None:
    """After `strategy add` (program-name filled), each marker left has a label, and no two share one."""
    template = strategy_templates(Path("/nonexistent"))[name]
    files = fill_markers(program_files(template), {"program-name": "demo"}, Path("(program name)"))
    markers = [marker for rel, text in files.items() for marker in customize_markers(text, Path(rel))]
    assert markers and all(len(marker.label.split()) >= 2 or marker.content.count(" ") >= 2 for marker in markers), [
        m.preview for m in markers if not m.label]
    labels = [marker.label for marker in markers]
    assert len(set(labels)) == len(labels), labels


def test_the_alphaevolve_template_ships_verbatim_and_its_copy_names_each_island() -> None:
    """The seed's four AlphaEvolve files ship as they are (bare markers included); the program's copy says which
    island each of its bare markers is for."""
    template = strategy_templates(Path("/nonexistent"))["alphaevolve"]
    assert "- **Island 1 — <CUSTOMIZE>**: <CUSTOMIZE>" in template.files["strategy.md"]
    copy = program_files(template)["strategy/alphaevolve.md"]
    assert "- **Island 1 — <CUSTOMIZE: Island 1 family name>**: <CUSTOMIZE: Island 1 one-line description>" in copy
    assert "- **Island 0 — <CUSTOMIZE: family name>**: <CUSTOMIZE: one-line description>" in copy
    assert "<CUSTOMIZE>" not in copy
