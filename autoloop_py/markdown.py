"""Markdown structure with source spans: headings, sections, tables and lists read through mistune.

mistune gives an AST but no positions; `_SpanBlockParser` records the source offset of every
top-level block, so callers can map what mistune understood back to line numbers and splice
the original text without re-rendering (the key to lossless round-trips).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Iterator

import mistune
from mistune.block_parser import BlockParser
from mistune.core import BlockState

Token = dict[str, Any]


class _SpanBlockParser(BlockParser):
    """A mistune block parser that stamps each top-level token with its source offset."""

    def parse_method(self, m: Any, state: BlockState) -> int | None:  # type: ignore[override]
        before = len(state.tokens)
        end = super().parse_method(m, state)
        if state.parent is None:
            for token in state.tokens[before:]:
                token.setdefault("pos", m.start())
        return end


@lru_cache(maxsize=1)
def _parser() -> mistune.Markdown:
    return mistune.Markdown(renderer=None, block=_SpanBlockParser(), plugins=[_table_plugin()])


def _table_plugin() -> Any:
    from mistune.plugins.table import table

    return table


@dataclass(frozen=True)
class Heading:
    """An ATX heading at the top level of a document.

    Attributes:
      level: 1 for `#`, 2 for `##`, ...
      text: the heading's plain text (markup such as `**` and backticks removed).
      line: 0-based line index in the source.
    """

    level: int
    text: str
    line: int


@dataclass(frozen=True)
class Section:
    """A run of source lines: a heading and everything up to the next heading of its level or above.

    Attributes:
      heading: the heading, or None for the text before the first heading.
      start: 0-based index of the first line (the heading line).
      end: index one past the last line.
      text: the exact source text of those lines.
    """

    heading: Heading | None
    start: int
    end: int
    text: str

    @property
    def key(self) -> str:
        """Returns the normalised heading text ('' for the preamble)."""
        return normalize_heading(self.heading.text) if self.heading else ""

    @property
    def body(self) -> str:
        """Returns the text after the heading line."""
        if self.heading is None:
            return self.text
        return "".join(self.text.splitlines(keepends=True)[1:])


@dataclass(frozen=True)
class TableRow:
    """One body row of a table, as plain-text cells, with its 0-based source line."""

    cells: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Table:
    """A table: header cells, body rows, and the source lines it spans [start, end)."""

    header: tuple[str, ...]
    rows: tuple[TableRow, ...]
    start: int
    end: int


def parse_blocks(text: str) -> list[Token]:
    """Returns mistune's top-level block tokens, each with a `line` (0-based) key added."""
    tokens, state = _parser().parse(text)
    assert isinstance(tokens, list)
    src = state.src
    line_starts = _line_offsets(src)
    for token in tokens:
        if "pos" in token:
            token["line"] = _offset_to_line(line_starts, token["pos"])
    return tokens


def headings(text: str) -> list[Heading]:
    """Returns the top-level ATX headings (those not inside code, lists or quotes)."""
    found: list[Heading] = []
    lines = text.splitlines()
    tokens, state = _block_tokens(text)
    for token in tokens:
        if token["type"] != "heading" or token.get("style") != "atx" or "line" not in token:
            continue
        line = token["line"]
        # mistune reports the match start, which may sit on preceding blank lines.
        while line < len(lines) and not lines[line].lstrip().startswith("#"):
            line += 1
        children = _parser().inline(token["text"].strip(" \r\n\t\f"), state.env)
        found.append(Heading(token["attrs"]["level"], inline_text(children), line))
    return found


def _block_tokens(text: str) -> tuple[list[Token], BlockState]:
    """Returns the top-level block tokens, each with its `line`, with only their raw inline `text`.

    Like `parse_blocks` without the inline pass, which is half of mistune's time: a state file
    with megabytes of history is split at its headings in seconds instead of tens of seconds.
    """
    state = _parser().block.state_cls()
    src = text.replace("\r\n", "\n").replace("\r", "\n")
    state.process(src if src.endswith("\n") else src + "\n")
    _parser().block.parse(state)
    line_starts = _line_offsets(state.src)
    for token in state.tokens:
        if "pos" in token:
            token["line"] = _offset_to_line(line_starts, token["pos"])
    return state.tokens, state


def split_sections(text: str, level: int = 2) -> list[Section]:
    """Splits text at headings of `level` or above; the first section is the preamble (maybe empty)."""
    lines = text.splitlines(keepends=True)
    cuts = [h for h in headings(text) if h.level <= level]
    sections: list[Section] = []
    starts = [0] + [h.line for h in cuts]
    owners: list[Heading | None] = [None, *cuts]
    for i, (start, owner) in enumerate(zip(starts, owners)):
        end = starts[i + 1] if i + 1 < len(starts) else len(lines)
        sections.append(Section(owner, start, end, "".join(lines[start:end])))
    return sections


def tables(text: str) -> list[Table]:
    """Returns the top-level tables of text with plain-text cells and line spans."""
    found: list[Table] = []
    for token in parse_blocks(text):
        if token["type"] != "table" or "line" not in token:
            continue
        start = _first_nonblank(text, token["line"])
        head, body = token["children"][0], token["children"][1] if len(token["children"]) > 1 else None
        header = tuple(inline_text(cell.get("children", [])) for cell in head["children"])
        rows = []
        for i, row in enumerate(body["children"] if body else []):
            cells = tuple(inline_text(cell.get("children", [])) for cell in row["children"])
            rows.append(TableRow(cells, start + 2 + i))
        found.append(Table(header, tuple(rows), start, start + 2 + len(rows)))
    return found


def list_items(text: str) -> list[tuple[str, int]]:
    """Returns (plain text, 0-based line) of each top-level list item, nested items flattened."""
    items: list[tuple[str, int]] = []
    for token in parse_blocks(text):
        if token["type"] == "list" and "line" in token:
            line = _first_nonblank(text, token["line"])
            items.extend(_walk_items(token, text, line))
    return items


def _walk_items(token: Token, text: str, line: int) -> Iterator[tuple[str, int]]:
    lines = text.splitlines()
    cursor = line
    for item in token.get("children", []):
        own = [c for c in item.get("children", []) if c["type"] != "list"]
        content = " ".join(inline_text(c.get("children", [])) for c in own).strip()
        cursor = _next_marker_line(lines, cursor)
        yield content, cursor
        cursor += 1
        for sub in item.get("children", []):
            if sub["type"] == "list":
                for found in _walk_items(sub, text, cursor):
                    cursor = found[1] + 1
                    yield found


def fenced_code(text: str) -> list[tuple[str, str, int]]:
    """Returns (info string, code, 0-based line) of each top-level fenced code block."""
    found = []
    for token in parse_blocks(text):
        if token["type"] == "block_code" and "line" in token:
            info = (token.get("attrs") or {}).get("info", "") or ""
            found.append((info.strip(), token["raw"], _first_nonblank(text, token["line"])))
    return found


def inline_text(children: list[Token]) -> str:
    """Returns the plain text of inline tokens: emphasis, code spans and links reduced to their text."""
    parts: list[str] = []
    for child in children:
        if "raw" in child and child["type"] in ("text", "codespan", "inline_html", "block_text"):
            parts.append(child["raw"] if child["type"] != "inline_html" else "")
        elif child["type"] in ("softbreak", "linebreak"):
            parts.append(" ")
        elif "children" in child:
            parts.append(inline_text(child["children"]))
        elif "text" in child:
            parts.append(child["text"])
    return "".join(parts).strip()


_NEWLINE_RE = re.compile("\n")
_EMOJI_RE = re.compile(r"[^\w\s\-–—:./()]", re.UNICODE)


def section_named(sections: Iterable[Section], name: str) -> Section | None:
    """Returns the first section whose heading is `name` or starts with it as whole words.

    `## Evolution Strategy (inspired by OpenEvolve)` is the `evolution strategy` section; `## Goals`
    is not the `goal` one.
    """
    for section in sections:
        key = section.key
        if key == name or (key.startswith(name) and not key[len(name)].isalnum()):
            return section
    return None


def normalize_heading(text: str) -> str:
    """Returns a heading reduced for matching: no emoji or variation selectors, lowercase, single spaces."""
    text = unicodedata.normalize("NFKC", text).replace("\ufe0f", "")
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("So", "Sk", "Cf", "Mn"))
    text = text.replace("*", "").replace("`", "").replace("_", " ")
    return " ".join(text.lower().split())


def _line_offsets(src: str) -> list[int]:
    return [0] + [found.end() for found in _NEWLINE_RE.finditer(src)]


def _offset_to_line(offsets: list[int], pos: int) -> int:
    lo, hi = 0, len(offsets) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if offsets[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _first_nonblank(text: str, line: int) -> int:
    lines = text.splitlines()
    while line < len(lines) and not lines[line].strip():
        line += 1
    return line


_MARKER_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])(?:\s|$)")


def _next_marker_line(lines: list[str], start: int) -> int:
    for i in range(start, len(lines)):
        if _MARKER_RE.match(lines[i]):
            return i
    return start
