"""Prose sections of the state file (priorities, lessons, avenues, directions): items read, bullets appended."""

from __future__ import annotations

import functools
import re

from autoloop_py import markdown as md
from autoloop_py.state.parts import content_end, end_line

_ITEM_BLOCK_RE = re.compile(r"(?:[-+*](?:\s|[-*_]|$)|#{1,6}(?:\s|$)|>|```|~~~|_{3}|<[A-Za-z!/?])")
_BLOCK_START_RE = re.compile(r"^(?:[-*_](?:[ \t]*[-*_]){2,}\s*$|#|<|>|```|~~~|\|)")
_PLACEHOLDER_ITEM_RE = re.compile(r"^\s*[-*+]\s+[*_]*\(\s*none yet\.?\s*\)[*_]*\s*$", re.IGNORECASE)
_PLACEHOLDER_RE = re.compile(r"^\((?:none yet|no specific priorities.*|no iterations yet)\.?\)$", re.IGNORECASE)


# Each prompt and each record reads the same sections again (their text rarely changes in a run).
@functools.lru_cache(maxsize=32)
def items(text: str | None, paragraphs: bool = False) -> tuple[str, ...]:
    """Returns a section's list items, placeholders left out (its paragraphs when `paragraphs` and no list)."""
    if not text:
        return ()
    found = [item for item, _ in md.list_items(text) if not _is_placeholder(item)]
    if not found and paragraphs:
        blocks = md.parse_blocks(text)
        texts = (md.inline_text(b.get("children", [])) for b in blocks if b["type"] == "paragraph")
        found = [item for item in texts if item and not _is_placeholder(item)]
    return tuple(found)


def has_item(text: str | None, item: str) -> bool:
    """Returns whether a section already lists the item, ignoring case, markup and closing punctuation."""
    return _normalize_item(item) in {_normalize_item(i) for i in items(text)}


def append_item(text: str, item: str) -> str:
    """Returns a section's text with `- item` after its list, in place of a `(none yet)` placeholder."""
    item = _escape_block_start(item)
    lines = text.splitlines(keepends=True)
    # Nested items sharing a line with their parent shift list_items' line numbers; stay inside the text.
    listed = [(found, min(line, len(lines) - 1)) for found, line in md.list_items(text)]
    real = [line for found, line in listed if not _is_placeholder(found)]
    empty = {line for found, line in listed if _is_placeholder(found) and _PLACEHOLDER_ITEM_RE.match(lines[line])}
    insert = [f"- {item}\n"]
    if real:
        at = _list_end(lines, max(real))
    elif empty:
        at = min(empty)
    else:
        at = content_end(lines)
        if lines[at - 1].strip():
            insert.insert(0, "\n")
    lines[at - 1] = end_line(lines[at - 1])
    kept = [line for i, line in enumerate(lines) if i not in empty]
    at -= sum(1 for i in empty if i < at)
    return "".join(kept[:at] + insert + kept[at:])


def _is_placeholder(item: str) -> bool:
    return bool(_PLACEHOLDER_RE.match(item.replace("*", "").replace("_", " ").strip()))


def _normalize_item(item: str) -> str:
    text = re.sub(r"[*_`]", "", item).lower()
    return " ".join(text.split()).rstrip(".;!")


def _escape_block_start(item: str) -> str:
    """Returns the item with a leading block marker escaped, so `- <item>` stays one plain list item."""
    ordered = re.match(r"\d{1,9}(?=[.)](?:\s|$))", item)
    if ordered:
        return f"{ordered.group()}\\{item[ordered.end():]}"
    return "\\" + item if _ITEM_BLOCK_RE.match(item) else item


def _list_end(lines: list[str], last_item: int) -> int:
    """Returns the index after the last line of the list item starting at `last_item`."""
    end, blank = last_item + 1, False
    for i in range(last_item + 1, len(lines)):
        line = lines[i]
        if not line.strip():
            blank = True
        elif line[0] in " \t" or not (blank or _BLOCK_START_RE.match(line)):
            end, blank = i + 1, False
        else:
            break
    return end
