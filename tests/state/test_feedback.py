"""Tests for autoloop_py.state.feedback: what is kept of an evaluation beside its metric, and how a prompt shows it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.state.feedback import CUT_NOTE, STORED_CHARS, artifacts_of, cap_text, render_feedback, view_of


def test_artifacts_keep_the_non_empty_fields_bounded() -> None:
    kept = artifacts_of("x" * (STORED_CHARS + 10), "", "out\n", "  \n")
    assert set(kept) == {"feedback", "stdout_tail"} and len(kept["feedback"]) == STORED_CHARS


def test_a_candidate_that_said_nothing_beside_its_metric_shows_nothing() -> None:
    assert view_of("the parent", "accepted", {"score": 1}, {"stdout_tail": "x\n"}, "score") is None


def test_the_view_names_the_metric_error_feedback_values_and_stderr() -> None:
    view = view_of("it4", "rejected", {"score": 0, "error": "e", "n": [1, 2]}, artifacts_of("fb", "e", "", "t\n"), "score")
    assert view is not None
    text = render_feedback(view, 4096)
    assert text.splitlines()[0] == "it4: rejected (score 0)"
    assert "Error: e" in text and "Feedback:\nfb" in text and "End of stderr:\nt" in text
    assert "\nOther values: n=[1, 2]\n" in text


@given(st.text(max_size=400), st.integers(min_value=0, max_value=300))
def test_cap_text_never_exceeds_the_cap_but_for_its_note(text: str, cap: int) -> None:
    capped = cap_text(text, cap)
    if len(text.encode("utf-8")) <= cap:
        assert capped == text
    else:
        assert capped.endswith(CUT_NOTE)
        assert len(capped.encode("utf-8")) <= max(cap, len(CUT_NOTE.encode("utf-8")))


def test_the_view_strips_terminal_escapes_and_control_characters() -> None:
    hostile = "ok\x1b]0;pwned title\x07 \x1b]52;c;Y2xpcA==\x07\x1b[2J\x1b[31mred\x1b[0m\x00\u202eevil\r\nnext"
    artifacts = artifacts_of(hostile, hostile, "", hostile)
    view = view_of("it4", "failed", {"score": 0, "k\x1b[1m": "v\x9b2J"}, artifacts, "score")
    assert view is not None
    text = render_feedback(view, 4096)
    assert "Feedback:\nok redevil\nnext\n" in text and "End of stderr:\nok redevil\nnext" in text
    assert not any(ch in text for ch in "\x1b\x07\x00\x9b\u202e\r")
    assert "Other values: k=\"v\"\n" in text
