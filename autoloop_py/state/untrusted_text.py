"""Text a model, an agent or candidate code wrote, made safe for where it is shown.

Such text reaches the terminal (the run's log), the state file, commit messages and GitHub comments and PR bodies.
`plain` strips what a terminal or `git log` would act on: ANSI/OSC escape sequences (colours, a rewritten window
title, OSC 8 links, clipboard writes), other control characters and the bidirectional overrides that make code read
differently from what it is. `github_safe` also neutralises what GitHub would act on in a body it renders: an
`@user` or `@org/team` mention (a notification), an issue reference (`#123`, `owner/repo#123`, `GH-123`: a
cross-reference on that issue, or a `Closes #123` that closes it on merge), a link or image (with its tracking URL)
and raw HTML. Those become code spans; so that the text cannot open or close a code span of its own around them,
its backticks and backslashes are escaped first.
"""

from __future__ import annotations

import logging
import re

# ESC [ … final byte (CSI), ESC ] … BEL or ESC \ (OSC), ESC P/X/^/_ … ESC \ (strings), any other ESC and one
# character, and the one-byte CSI (0x9b).
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\|$)"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\|$)"
    r"|\x1b.?"
    r"|\x9b[0-?]*[ -/]*[@-~]",
    re.DOTALL,
)
# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# What GitHub acts on, in one pass (a span made for one is never scanned again): a link or image, a bare URL, a
# mention, an issue reference. No part a code span is made of holds a backtick.
_ACTIVE = re.compile(
    r"!?\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s`]*)[^)\n]*\)"
    r"|(?P<url>(?:(?:https?|ftp)://|www\.)[^\s<>`]+)"
    r"|(?<![\w@])(?P<mention>@[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9][\w.-]*)?)"
    r"|(?<![\w&/#])(?P<ref>(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#\d+\b|\bGH-\d+\b)",
    re.IGNORECASE,
)


def plain(text: str) -> str:
    """Returns text without escape sequences, control characters (but newline and tab) or bidirectional overrides."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n")))


def github_safe(text: str) -> str:
    """Returns `plain(text)` in which no mention notifies, no issue is referenced, no link or image is followed, and
    no HTML is rendered."""
    clean, pieces, at = plain(text), [], 0
    for found in _ACTIVE.finditer(clean):
        pieces.append(_inert(clean[at : found.start()]))
        if found["target"] is not None:
            pieces.append(f"{github_safe(found['text'])} (`{found['target']}`)")  # its text may hold a mention
        else:
            pieces.append(f"`{found.group()}`")
        at = found.end()
    pieces.append(_inert(clean[at:]))
    return "".join(pieces)


def _inert(text: str) -> str:
    """Returns text outside a code span with its HTML, backslashes and backticks escaped."""
    text = text.replace("\\", "\\\\").replace("`", "\\`")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class PlainLogFilter(logging.Filter):
    """A logging filter that strips what `plain` strips from each record's final message: log lines quote paths an
    agent chose, git's stderr and what candidate code printed, and they reach the terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Cleans the record's message (its arguments merged in); always keeps the record."""
        message = record.getMessage()
        clean = plain(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_text:
            record.exc_text = plain(record.exc_text)
        return True
