"""Strategy section: program.md's `## Evolution Strategy` section, replaced by a pointer block or by prose.

Only that section changes; every other line of program.md comes back byte for byte.
"""

from __future__ import annotations

from autoloop_py import markdown as md

SECTION = "evolution strategy"


def section_line(text: str) -> int | None:
    """Returns the 1-based line of the `## Evolution Strategy` heading, or None when there is none."""
    section = md.section_named(md.split_sections(text), SECTION)
    return None if section is None else section.start + 1


def with_strategy_section(text: str, block: str) -> str:
    """Returns program.md with its Evolution Strategy section replaced by block (appended when absent).

    block starts with the `## Evolution Strategy` heading; a blank line keeps it apart from what follows.
    """
    block = block.rstrip("\n") + "\n"
    sections = md.split_sections(text)
    found = md.section_named(sections, SECTION)
    if found is None:
        head = text.rstrip("\n")
        return f"{head}\n\n{block}" if head else block
    lines = text.splitlines(keepends=True)
    before = "".join(lines[: found.start])
    after = "".join(lines[found.end :])
    return before + block + ("\n" + after if after else "")
