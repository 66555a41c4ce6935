"""Tuning share: how much of each edit only changes numbers (EvoReplay's `classify_edits.py`, Table 10)."""

from __future__ import annotations

from dataclasses import dataclass

from autoloop_py.analysis.cycling import Edit, is_comment, skeleton


@dataclass(frozen=True)
class EditTuning:
    """How much of one edit only changes numbers.

    Attributes:
        child_id: the child program.
        iteration: its iteration.
        tuning: code lines in removed/added pairs with equal skeletons and different text (2 per pair).
        structural: every other changed code line.
        share: tuning / (tuning + structural).
        bucket: pure-tuning, mostly-tuning, mixed, mostly-structural or pure-structural.
    """

    child_id: str
    iteration: int
    tuning: int
    structural: int
    share: float
    bucket: str


def edit_tuning(edit: Edit) -> EditTuning | None:
    """Returns the tuning share of an edit's code lines (None when it changes no code line)."""
    removed = [line for line in edit.removed_counted() if not is_comment(line)]
    added = [line for line in edit.added_counted() if not is_comment(line)]
    if not removed and not added:
        return None
    free = [(skeleton(line), line) for line in added]
    pairs = 0
    # Greedy, in diff order: each removed line takes the first unpaired added line of its skeleton.
    for line in removed:
        key = skeleton(line)
        match = next((i for i, (k, text) in enumerate(free) if k == key and text != line), None)
        if match is not None:
            free.pop(match)
            pairs += 1
    tuning = 2 * pairs
    structural = len(removed) + len(added) - tuning
    share = tuning / (tuning + structural)
    return EditTuning(edit.child_id, edit.iteration, tuning, structural, share, tuning_bucket(share))


def tuning_bucket(share: float) -> str:
    """Returns the bucket of a tuning share: ≥.9, ≥.6, ≤.1, ≤.4, else mixed."""
    if share >= 0.9:
        return "pure-tuning"
    if share >= 0.6:
        return "mostly-tuning"
    if share <= 0.1:
        return "pure-structural"
    if share <= 0.4:
        return "mostly-structural"
    return "mixed"
