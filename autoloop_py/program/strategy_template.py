"""Strategy template: a reusable strategy's files, where each goes in a program, and its pointer block.

A template is a playbook (`strategy.md`), its prompts and a creator guide (`CUSTOMIZE.md`, never
copied). Seed 003: the playbook becomes `strategy/<name>.md` of the program, the prompts keep their
paths under `strategy/`, and `## Evolution Strategy` becomes a pointer block naming them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from autoloop_py import markdown as md
from autoloop_py.program.playbook import label_bare_markers
from autoloop_py.render import render

GUIDE = "CUSTOMIZE.md"
PLAYBOOK_TEMPLATE = "strategy.md"
STRATEGY_FOLDER = "strategy"
_COPY_RE = re.compile(r"`([^`]+)`\s*→\s*`([^`]+)`")


@dataclass(frozen=True)
class StrategyTemplate:
    """A reusable strategy: a playbook template, its creator guide and prompt files.

    Attributes:
      name: the folder name (e.g. alphaevolve); programs name their playbook after it.
      origin: where it was read from, for messages.
      files: template-relative POSIX path -> content, CUSTOMIZE.md included.
    """

    name: str
    origin: str
    files: Mapping[str, str]

    @property
    def guide(self) -> str:
        """Returns CUSTOMIZE.md ('' when the template has none)."""
        return self.files.get(GUIDE, "")

    @property
    def when_to_pick(self) -> tuple[str, ...]:
        """Returns the guide's "When to pick" conditions as plain text, one per bullet (() without any)."""
        section = md.section_named(md.split_sections(self.guide), "when to pick")
        return tuple(text for text, _ in md.list_items(section.body)) if section is not None else ()


def copy_plan(template: StrategyTemplate) -> list[tuple[str, str]]:
    """Returns (template file, program file) pairs: CUSTOMIZE.md's `a` → `b` list, else the naming convention."""
    plan: list[tuple[str, str]] = []
    lines = template.guide.splitlines()
    for _, line in md.list_items(template.guide):
        match = _COPY_RE.search(lines[line]) if line < len(lines) else None
        if match and match.group(1) in template.files and match.group(1) != GUIDE:
            plan.append((match.group(1), match.group(2)))
    if plan:
        return plan
    playbook = playbook_path(template.name)
    sources = [src for src in template.files if src != GUIDE]
    return [(src, playbook if src == PLAYBOOK_TEMPLATE else f"{STRATEGY_FOLDER}/{src}") for src in sources]


def playbook_path(name: str) -> str:
    """Returns the program-relative path of a strategy's playbook (`strategy/<name>.md`)."""
    return f"{STRATEGY_FOLDER}/{name}.md"


def program_files(template: StrategyTemplate) -> dict[str, str]:
    """Returns the template's files as the program holds them: program-folder relative path -> text, each bare
    `<CUSTOMIZE>` labelled with what to write (the template ships as it is)."""
    return {dest: label_bare_markers(template.files[src]) for src, dest in copy_plan(template)}


def pointer_block(template: StrategyTemplate, copied: list[str]) -> str:
    """Returns the `## Evolution Strategy` pointer block: CUSTOMIZE.md's example, else the package's template."""
    for _, code, _ in md.fenced_code(template.guide):
        if code.lstrip().startswith("## Evolution Strategy"):
            return code
    playbook = playbook_path(template.name)
    support = [playbook, *sorted(p for p in copied if p != playbook)]
    return render("scaffold/pointer.md.j2", title=template.name, playbook=playbook, support=support)
