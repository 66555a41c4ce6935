"""Playbook notes: the Problem framing, a `Tuning notes:` line and a section's opening paragraph."""

from __future__ import annotations

from autoloop_py.program.playbook_notes import labelled_line, opening_paragraph, problem_framing

PLAYBOOK = """# X Strategy — demo

## Problem framing

Sort a million integers;
the fitness is minus the seconds.

## Settings

Tuning notes: evaluations take a second.

| Setting | Value |
|---|---|
| `a` | 1 |

## Island presets

Raise novelty: many sorts score alike.

| Preset | Pareto |
|---|---|
| balanced | 0.4 |

## Empty

| Only | Table |
|---|---|
"""


def test_the_notes_are_read() -> None:
    assert problem_framing(PLAYBOOK) == "Sort a million integers;\nthe fitness is minus the seconds."
    assert labelled_line(PLAYBOOK, "tuning notes") == "evaluations take a second."
    assert opening_paragraph(PLAYBOOK, "island presets") == "Raise novelty: many sorts score alike."


def test_absent_tables_and_markers_read_as_no_note() -> None:
    assert opening_paragraph(PLAYBOOK, "empty") == ""
    assert opening_paragraph(PLAYBOOK, "nowhere") == ""
    assert labelled_line(PLAYBOOK, "dead ends") == ""
    unanswered = PLAYBOOK.replace("Sort a million integers;\nthe fitness is minus the seconds.",
                                  "<CUSTOMIZE: problem framing — 2–4 sentences>")
    assert problem_framing(unanswered) == ""
    assert problem_framing("# no sections\n") == ""
    assert labelled_line("**Tuning notes**: <CUSTOMIZE: tuning notes>\n", "tuning notes") == ""
    assert labelled_line("**Tuning notes**: bold label\n", "tuning notes") == "bold label"
