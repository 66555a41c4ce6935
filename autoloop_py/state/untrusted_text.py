"""Text a model, an agent or candidate code wrote, made safe for where it is shown.

Such text reaches the terminal (the run's log), the state file, commit messages and GitHub comments and PR bodies.
`plain` strips what a terminal or `git log` would act on: ANSI/OSC escape sequences (colours, a rewritten window
title, OSC 8 links, clipboard writes), other control characters and the bidirectional overrides that make code read
differently from what it is. `github_safe` also neutralises what GitHub would act on in a body it renders: an
`@user` or `@org/team` mention (a notification), a link or image (with its tracking URL) and raw HTML.
"""

from __future__ import annotations

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
_MENTION = re.compile(r"(?<![\w`])@([A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9][\w.-]*)?)")
_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(([^)\s]*)[^)\n]*\)")
_URL = re.compile(r"(?<![`<(])\b((?:https?|ftp)://[^\s<>`]+)")


def plain(text: str) -> str:
    """Returns text without escape sequences, control characters (but newline and tab) or bidirectional overrides."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n")))


def github_safe(text: str) -> str:
    """Returns `plain(text)` in which no mention notifies, no link or image is followed, and no HTML is rendered."""
    safe = plain(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    safe = _LINK.sub(lambda m: f"{m.group(2)} (`{m.group(3)}`)", safe)
    safe = _URL.sub(lambda m: f"`{m.group(1)}`", safe)
    return _MENTION.sub(lambda m: f"`@{m.group(1)}`", safe)
