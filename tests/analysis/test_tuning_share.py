"""Tests of analysis/tuning_share.py: the tuning share per edit and its buckets."""

from __future__ import annotations

import pytest
import trace_samples as sample

from autoloop_py.analysis.cycling import Edit, edits_of
from autoloop_py.analysis.tuning_share import edit_tuning, tuning_bucket


def test_tuning_share_per_edit_of_the_sample_run() -> None:
    by_child = {t.child_id: t for t in (edit_tuning(e) for e in edits_of(sample.nodes())) if t is not None}
    assert {(k, t.tuning, t.structural, t.bucket) for k, t in by_child.items()} == {
        ("B", 2, 2, "mixed"), ("C", 2, 0, "pure-tuning"), ("D", 0, 3, "pure-structural"),
        ("E", 0, 1, "pure-structural"), ("F", 0, 1, "pure-structural"),
    }


def test_tuning_pairs_are_greedy_and_need_different_text() -> None:
    edit = Edit("c", "p", 1, ("a = 1", "a = 2", "keep = 1"), ("a = 3", "keep = 1", "new = call()"))
    tuning = edit_tuning(edit)
    assert tuning is not None
    # `a = 1` takes `a = 3`; `a = 2` finds none; `keep = 1` only matches identical text (a move).
    assert (tuning.tuning, tuning.structural) == (2, 4)
    assert edit_tuning(Edit("c", "p", 1, ("# note 1",), ("# note 2",))) is None


@pytest.mark.parametrize(
    ("share", "bucket"),
    [(1.0, "pure-tuning"), (0.9, "pure-tuning"), (0.6, "mostly-tuning"), (0.5, "mixed"), (0.4, "mostly-structural"),
     (0.1, "pure-structural"), (0.0, "pure-structural")],
)
def test_tuning_buckets(share: float, bucket: str) -> None:
    assert tuning_bucket(share) == bucket
