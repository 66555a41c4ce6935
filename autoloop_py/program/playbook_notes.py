"""Playbook notes: the prose a customised playbook holds for the model beside its tables.

The Problem framing opens every solution prompt; a `Tuning notes:` line and the paragraph opening a
settings section say why the table's values suit the program, for the guide models that steer the search.
A note that is still a `<CUSTOMIZE…>` marker reads as absent.
"""

from __future__ import annotations

import re
from pathlib import Path

from autoloop_py import markdown as md
from autoloop_py.program.playbook import customize_markers


def problem_framing(text: str) -> str:
    """Returns the playbook's `## Problem framing` paragraph ('' when absent or still a marker)."""
    section = md.section_named(md.split_sections(text), "problem framing")
    return _answered(section.body if section is not None else "")


def labelled_line(text: str, label: str) -> str:
    """Returns the text after `label:` on the first line that starts with it ('' when absent or a marker)."""
    pattern = re.compile(rf"^\s*(?:\*\*)?{re.escape(label)}(?:\*\*)?\s*:\s*(.*)$", re.IGNORECASE)
    for line in text.splitlines():
        found = pattern.match(line)
        if found:
            return _answered(found.group(1))
    return ""


def opening_paragraph(text: str, section_name: str, level: int = 2) -> str:
    """Returns the first paragraph of the named section ('' when absent, a table, or still a marker)."""
    section = md.section_named(md.split_sections(text, level), section_name)
    if section is None:
        return ""
    first = section.body.strip().split("\n\n", 1)[0]
    return "" if first.lstrip().startswith("|") else _answered(first)


def _answered(text: str) -> str:
    text = text.strip()
    return "" if not text or customize_markers(text, Path("-")) else text
