"""Tests for novelty.py on the hand-built run of tests/trace_samples.py (lineage A → B → C → D, sibling A → E → F).

B deleted `# step size 0.5`, `rate = 0.10` and `value = helper(x)`; C deleted `rate = 0.25`; only the sibling
F deleted `cache = memo(x)`.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.loop.iteration import novelty
from autoloop_py.loop.iteration.novelty import Ancestor, EarlierResult, NoveltyConfig, NoveltyVerdict
from tests import trace_samples as s

SCORES = {i: score for i, _, _, _, score, _ in s.PROGRAMS}
C_LINEAGE = tuple(
    Ancestor(i, it, source, status, SCORES[i], f"candidate {i}")
    for i, it, _, source, _, status in sorted(s.PROGRAMS, key=lambda p: -p[1]) if i in "CBA"
)


def _from_c(*lines: str, replace: tuple[str, str] | None = None) -> str:
    """Returns C's source with lines added before its last line (and one line replaced)."""
    body = s.C.splitlines()
    if replace is not None:
        body = [replace[1] if line == replace[0] else line for line in body]
    return "\n".join([*body[:-1], *lines, body[-1]]) + "\n"


def _earlier(program_id: str, source: str, metric: float | None, iteration: int = 0) -> dict[str, EarlierResult]:
    metrics = {"value": metric} if metric is not None else {"error": "crashed"}
    result = EarlierResult(program_id, iteration, metric, metrics, "accepted", novelty.fingerprint(source))
    return {novelty.sha256_text(source): result}


def test_the_lineage_is_nearest_first() -> None:
    assert [a.id for a in C_LINEAGE] == ["C", "B", "A"]


def test_literal_re_adds_of_lineage_deletions_are_recycled() -> None:
    verdict = novelty.check(s.A, C_LINEAGE, {})
    assert verdict == NoveltyVerdict(novelty.RECYCLED, added=3, recycled=3, deleted_in=(1,))
    assert verdict.skipped and verdict.share == 1.0
    assert verdict.note() == "not evaluated: 100% of its added lines (3 of 3) re-add lines deleted in iteration 1"
    assert verdict.metadata() == {"verdict": "recycled", "evaluated": False, "added": 3, "recycled": 3,
                                  "deleted_in": [1]}


def test_a_number_only_re_add_is_tuning_and_does_not_count() -> None:
    candidate = _from_c("scale = compute(x)", "offset = shift(x)", replace=("rate = 0.5", "rate = 0.10 * 2"))
    assert novelty.check(candidate, C_LINEAGE, {}).recycled == 0
    tuned = _from_c("scale = compute(x)", "offset = shift(x)", replace=("rate = 0.5", "rate = 0.75"))
    verdict = novelty.check(tuned, C_LINEAGE, {}, NoveltyConfig(threshold=0.1))
    assert (verdict.kind, verdict.added, verdict.recycled) == (novelty.NOVEL, 3, 0)


def test_a_comment_re_add_with_other_numbers_is_trivial_and_does_not_count() -> None:
    candidate = _from_c("# step size 0.75", "rate = 0.10", replace=("value = fallback(x)", "value = helper(x)"))
    verdict = novelty.check(candidate, C_LINEAGE, {})
    assert (verdict.kind, verdict.added, verdict.recycled) == (novelty.NOVEL, 3, 2)
    assert novelty.check(candidate, C_LINEAGE, {}, NoveltyConfig(threshold=0.6)).kind == novelty.RECYCLED


def test_a_deletion_on_a_sibling_branch_does_not_count() -> None:
    candidate = _from_c("cache = memo(x)", "alpha = first(x)", "beta = second(x)")
    for threshold in (0.8, 0.3):
        verdict = novelty.check(candidate, C_LINEAGE, {}, NoveltyConfig(threshold=threshold))
        assert (verdict.kind, verdict.added, verdict.recycled) == (novelty.NOVEL, 3, 0)


def test_a_candidate_adding_fewer_than_min_added_lines_is_novel() -> None:
    candidate = _from_c(replace=("value = fallback(x)", "value = helper(x)"))
    verdict = novelty.check(candidate, C_LINEAGE, {})
    assert (verdict.kind, verdict.added) == (novelty.NOVEL, 1)
    assert novelty.check(candidate, C_LINEAGE, {}, NoveltyConfig(min_added=1)).kind == novelty.RECYCLED


def test_no_lineage_means_nothing_is_recycled() -> None:
    assert novelty.check(s.A, (), {}).kind == novelty.NOVEL


def test_an_evaluated_source_is_a_duplicate_whose_result_is_reused() -> None:
    verdict = novelty.check(s.A, C_LINEAGE, _earlier("A", s.A, 1.0))
    assert verdict == NoveltyVerdict(novelty.DUPLICATE, of="A", identical=True, metric=1.0, metrics={"value": 1.0})
    assert verdict.note() == "not evaluated: identical to candidate A (metric 1 reused)"
    assert verdict.metadata() == {"verdict": "duplicate", "evaluated": False, "of": "A", "identical": True}


def test_a_reformatted_python_source_is_a_normalised_duplicate() -> None:
    reformatted = s.A.replace("rate = 0.10", "rate   =   0.10   # same value").replace("import math\n", "import math\n\n")
    verdict = novelty.check(reformatted, C_LINEAGE, _earlier("A", s.A, 1.0))
    assert (verdict.kind, verdict.of, verdict.identical) == (novelty.DUPLICATE, "A", False)
    assert verdict.note() == "not evaluated: identical up to formatting and comments to candidate A (metric 1 reused)"


def test_a_changed_number_is_not_a_duplicate() -> None:
    assert novelty.duplicate(s.A.replace("0.10", "0.11"), _earlier("A", s.A, 1.0)) is None


def test_outside_python_only_trailing_blanks_are_ignored() -> None:
    text = "a:\n  b: 1\n"
    assert novelty.fingerprint("a:  \n  b: 1\n\n", "yaml") == novelty.fingerprint(text, "yaml")
    assert novelty.fingerprint("a:\nb: 1\n", "yaml") != novelty.fingerprint(text, "yaml")
    assert novelty.fingerprint("x = (", "python") == novelty.fingerprint("x = (  \n", "python")


def test_a_failed_result_is_never_reused() -> None:
    assert novelty.duplicate(s.A, _earlier("F", s.A, None)) is None
    assert novelty.check(s.A, C_LINEAGE, _earlier("F", s.A, None)).kind == novelty.RECYCLED


def test_the_earliest_normalised_duplicate_wins() -> None:
    evaluated = {**_earlier("late", s.A + "\n", 2.0, iteration=5), **_earlier("early", s.A + "\n\n", 1.0, iteration=1)}
    assert novelty.duplicate(s.A, evaluated) == NoveltyVerdict(
        novelty.DUPLICATE, of="early", identical=False, metric=1.0, metrics={"value": 1.0}
    )


def test_recently_deleted_lists_code_lines_the_parent_lacks_newest_first() -> None:
    deleted = novelty.recently_deleted(C_LINEAGE)
    assert [(d.text, d.iteration, d.by) for d in deleted] == [
        ("rate = 0.25", 2, "C"), ("rate = 0.10", 1, "B"), ("value = helper(x)", 1, "B"),
    ]
    assert deleted[0].describe() == "rate = 0.25    ← deleted in iteration 2 by C (accepted, metric 3; change: candidate C)"
    assert [d.text for d in novelty.recently_deleted(C_LINEAGE, limit=2)] == ["rate = 0.25", "rate = 0.10"]


def test_recently_deleted_skips_lines_put_back_and_needs_two_programs() -> None:
    d_lineage = (Ancestor("D", 3, s.D, "accepted", 4.0, "candidate D"), *C_LINEAGE)
    assert "value = helper(x)" not in [d.text for d in novelty.recently_deleted(d_lineage)]
    assert novelty.recently_deleted(C_LINEAGE[-1:]) == []
    assert novelty.recently_deleted(()) == []


def test_a_long_deleted_line_is_cut_in_the_prompt() -> None:
    line = novelty.DeletedLine("x = " + "y" * 300, 4, "it4", "rejected", None, "")
    assert line.describe().startswith("x = yyy") and "…    ← deleted in iteration 4 by it4 (rejected)" in line.describe()


def test_a_repeated_id_ends_the_lineage() -> None:
    assert novelty.check(s.A, C_LINEAGE + C_LINEAGE, {}) == novelty.check(s.A, C_LINEAGE, {})
    verdict = novelty.check(s.A, (C_LINEAGE[0], C_LINEAGE[0]), {})
    assert (verdict.kind, verdict.added, verdict.recycled) == (novelty.NOVEL, 3, 0)


@given(st.text())
def test_any_text_repeats_itself_and_never_raises(text: str) -> None:
    for language in ("python", "text"):
        evaluated = {novelty.sha256_text(text): EarlierResult("x", 1, 0.5, {}, "rejected", novelty.fingerprint(text, language))}
        verdict = novelty.check(text, C_LINEAGE, evaluated, language=language)
        assert (verdict.kind, verdict.of, verdict.identical) == (novelty.DUPLICATE, "x", True)
        assert novelty.check(text, C_LINEAGE, {}, language=language).kind in (novelty.NOVEL, novelty.RECYCLED)
