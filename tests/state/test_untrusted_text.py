"""Text a model or candidate code wrote, made safe for terminals, git and GitHub."""

from __future__ import annotations

import logging

import pytest

from autoloop_py.state.untrusted_text import PlainLogFilter, github_safe, plain


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\x1b[31mred\x1b[0m", "ared"),
        ("\x1b]0;pwned title\x07x", "x"),  # OSC: window title
        ("\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\", "click"),  # OSC 8 hyperlink
        ("\x1b]52;c;cm0gLXJmIH4=\x07y", "y"),  # OSC 52: clipboard write
        ("\x1bPq#0;2;0;0;0\x1b\\z", "z"),  # DCS string
        ("safe\x1b", "safe"),
        ("line\roverwritten\x00\x08\x7f\x9b2J", "lineoverwritten"),
        ("admin\u202e\u2066txt.exe", "admintxt.exe"),  # bidirectional overrides
        ("keeps\ttabs\nand newlines", "keeps\ttabs\nand newlines"),
        ("unicode: é ✓ 🤖", "unicode: é ✓ 🤖"),
    ],
)
def test_plain_strips_what_a_terminal_would_act_on(text: str, expected: str) -> None:
    assert plain(text) == expected


def test_github_safe_neutralises_mentions_links_images_and_html() -> None:
    text = "cc @octocat @org/security-team; [docs](http://evil.example/x) ![px](http://t.example/p.png) " \
           "<img src=x onerror=alert(1)> <details> http://bare.example/y mail a@b.example `@in_code`\x1b[2J"
    safe = github_safe(text)
    assert "`@octocat`" in safe and "`@org/security-team`" in safe
    assert "docs (`http://evil.example/x`)" in safe and "![" not in safe and "px (`http://t.example/p.png`)" in safe
    assert "<" not in safe and "&lt;img src=x onerror=alert(1)&gt;" in safe and "&lt;details&gt;" in safe
    assert "`http://bare.example/y`" in safe and "a@b.example" in safe and "\x1b" not in safe


def test_github_safe_neutralises_issue_references_so_a_merge_closes_nothing() -> None:
    safe = github_safe("Closes #12, fixes octo/other#3 and GH-4; issue#5 and a&#60;b stay text")
    assert "Closes `#12`" in safe and "`octo/other#3`" in safe and "`GH-4`" in safe
    assert "issue#5" in safe and "&amp;#60;b" in safe


def test_backticks_of_the_text_cannot_unbalance_a_code_span() -> None:
    # Unescaped, the first backtick would pair with the one the mention's span opens, leaving `@octocat` live.
    safe = github_safe("a` @octocat `b \\` c [@team](x) www.evil.example")
    assert safe == "a\\` `@octocat` \\`b \\\\\\` c `@team` (`x`) `www.evil.example`"


def test_log_lines_lose_their_escapes(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("autoloop_py.test_plain_filter")
    handler_filter = PlainLogFilter()
    logger.addFilter(handler_filter)
    try:
        with caplog.at_level(logging.INFO, logger="autoloop_py.test_plain_filter"):
            logger.info("agent: left out %s", "cache\x1b]0;pwned\x07.pyc\x1b[2J")
    finally:
        logger.removeFilter(handler_filter)
    assert [r.getMessage() for r in caplog.records] == ["agent: left out cache.pyc"]
