"""Tests for autoloop_py.program.reply: literal model replies parsed into blocks, rewrites, summary and lesson."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.errors import EditError
from autoloop_py.program.reply import Reply, parse_reply


def test_bold_markdown_summary_and_none_lesson() -> None:
    reply = parse_reply("**SUMMARY:** tweak\n**LESSON:** none\n")
    assert (reply.summary, reply.lesson) == ("tweak", None)


def test_second_fenced_block_without_filename_keeps_previous_file() -> None:
    reply = parse_reply(
        "b.py\n```\n<<<<<<< SEARCH\ny = 1\n=======\ny = 3\n>>>>>>> REPLACE\n```\n\n"
        "```\n<<<<<<< SEARCH\nz = 1\n=======\nz = 4\n>>>>>>> REPLACE\n```\n"
    )
    assert [b.path for b in reply.blocks] == ["b.py", "b.py"]
    assert reply.rewrites == ()


def test_fenced_example_after_prose_is_not_a_rewrite() -> None:
    reply = parse_reply("Here is how it looks now:\n```python\nx = 1\n```\n")
    assert reply.rewrites == () and reply.blocks == ()


def test_malformed_block_points_at_the_line() -> None:
    text = "SUMMARY: x\nf.py\n<<<<<<< SEARCH\nx = 1\n>>>>>>> REPLACE\n"
    with pytest.raises(EditError) as caught:
        parse_reply(text)
    assert caught.value.line == 5
    assert str(caught.value).endswith("<<<<<<< SEARCH\nx = 1\n>>>>>>> REPLACE\n^^^ Expected `=======`")


def test_unterminated_block_expects_replace_marker() -> None:
    with pytest.raises(EditError, match=r"\^\^\^ Expected `>>>>>>> REPLACE`"):
        parse_reply("f.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n")


def test_setext_heading_underline_is_not_a_divider() -> None:
    reply = parse_reply("Title\n=======\n\nSUMMARY: fine\n")
    assert reply.summary == "fine" and reply.blocks == ()


_line = st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"), max_size=20)


@given(st.lists(_line, max_size=12))
def test_parse_reply_raises_only_edit_error(lines: list[str]) -> None:
    markers = ["<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE", "```", "f.py"]
    text = "\n".join(line if i % 3 else markers[len(line) % len(markers)] for i, line in enumerate(lines))
    try:
        reply = parse_reply(text)
    except EditError:
        return
    assert isinstance(reply, Reply)
