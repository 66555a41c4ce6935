"""Markdown structure with source spans: headings, sections, tables and lists read through mistune.

mistune gives an AST but no positions; `_SpanBlockParser` records the source offset of every
top-level block, so callers can map what mistune understood back to line numbers and splice
the original text without re-rendering (the key to lossless round-trips).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Iterable, Iterator

import mistune
from mistune.block_parser import BlockParser
from mistune.core import BlockState
from mistune.plugins.table import table

from autoloop_py.github.agentic_scheduler import normalize_heading  # the scheduler reads headings the same way

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
    return mistune.Markdown(renderer=None, block=_SpanBlockParser(), plugins=[table])


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
    # The document's top-level block tokens inside the section (lines relative to its start) and the
    # document's parse environment, when parsing the section alone would give the same tokens: what
    # section_headings and list_item_texts read instead of parsing the section again.
    blocks: tuple[Token, ...] | None = field(default=None, compare=False, repr=False)
    env: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    inner: tuple[Heading, ...] | None = field(default=None, compare=False, repr=False)  # its headings, so read

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
    return _with_lines(tokens, state.src)


def _with_lines(tokens: list[Token], src: str) -> list[Token]:
    """Returns the tokens, each stamped with the 0-based `line` of its source offset."""
    # Every line boundary str.splitlines knows (\x1e, \u2028… too), so token lines match the split text's.
    line_starts = [0] + [found.end() for found in _NEWLINE_RE.finditer(src)]
    for token in tokens:
        if "pos" in token:
            token["line"] = bisect.bisect_right(line_starts, token["pos"]) - 1
    return tokens


def headings(text: str) -> list[Heading]:
    """Returns the top-level ATX headings (those not inside code, lists or quotes)."""
    tokens, state = _block_tokens(text)
    return _headings(tokens, text.splitlines(), state.env)


def section_headings(section: Section) -> list[Heading]:
    """Returns headings(section.text), read from the document's parse when the section carries it."""
    if section.inner is None:
        return headings(section.text)
    return list(section.inner)


def _headings(tokens: Iterable[Token], lines: list[str], env: dict[str, Any]) -> list[Heading]:
    """Returns the ATX headings among block tokens whose `line` indexes `lines`."""
    found: list[Heading] = []
    for token in tokens:
        if token["type"] != "heading" or token.get("style") != "atx" or "line" not in token:
            continue
        children = _parser().inline(token["text"].strip(" \r\n\t\f"), env)
        found.append(Heading(token["attrs"]["level"], inline_text(children), _block_line(token, lines)))
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
    return _with_lines(state.tokens, state.src), state


def split_sections(text: str, level: int = 2) -> list[Section]:
    """Splits text at headings of `level` or above; the first section is the preamble (maybe empty).

    Each section carries the document's block tokens that fall in it (see Section.blocks) when no link
    reference definition could make the section read differently alone, and the document's lines are
    numbered alike by mistune and by str.splitlines.
    """
    lines = text.splitlines(keepends=True)
    tokens, state = _block_tokens(text)
    every = _headings(tokens, text.splitlines(), state.env)
    cuts = [h for h in every if h.level <= level]
    shared = not state.env.get("ref_links") and len(lines) == state.src.count("\n")
    sections: list[Section] = []
    starts = [0] + [h.line for h in cuts]
    owners: list[Heading | None] = [None, *cuts]
    at = 0  # tokens are in source order: each section takes the next run of them
    for i, (start, owner) in enumerate(zip(starts, owners)):
        end = starts[i + 1] if i + 1 < len(starts) else len(lines)
        blocks: tuple[Token, ...] | None = None
        inner: tuple[Heading, ...] | None = None
        if shared:
            inner = tuple(replace(h, line=h.line - start) for h in every if start <= h.line < end)
            taken = []
            while at < len(tokens) and _block_line(tokens[at], lines) < end:
                taken.append({**tokens[at], "line": tokens[at]["line"] - start} if "line" in tokens[at] else tokens[at])
                at += 1
            blocks = tuple(taken)
        sections.append(Section(owner, start, end, "".join(lines[start:end]), blocks, state.env if shared else None,
                                inner))
    return sections


def _block_line(token: Token, lines: list[str]) -> int:
    """Returns the line a block token starts on (a heading's own line, not the blank lines mistune puts before it)."""
    line = token.get("line", 0)
    if token["type"] == "heading" and token.get("style") == "atx":
        # mistune reports the match start, which may sit on preceding blank lines.
        while line < len(lines) and not lines[line].lstrip().startswith("#"):
            line += 1
    return line


def tables(text: str) -> list[Table]:
    """Returns the top-level tables of text with plain-text cells and line spans."""
    found: list[Table] = []
    for token in parse_blocks(text):
        if token["type"] != "table" or "line" not in token:
            continue
        start = _first_nonblank(text, token["line"])
        head, body = token["children"][0], token["children"][1] if len(token["children"]) > 1 else None
        header = tuple(inline_text(cell.get("children", [])) for cell in head["children"])
        rows = tuple(TableRow(tuple(inline_text(cell.get("children", [])) for cell in row["children"]), start + 2 + i)
                     for i, row in enumerate(body["children"] if body else []))
        found.append(Table(header, rows, start, start + 2 + len(rows)))
    return found


def list_item_texts(blocks: Iterable[Token], env: dict[str, Any]) -> list[str]:
    """Returns the plain texts of list_items() of a text, from its block tokens (as Section.blocks has them).

    env: the document's parse environment; it must hold no link reference definitions (as Section.env).
    """
    texts: list[str] = []
    for token in blocks:
        if token["type"] == "list" and "line" in token:
            texts.extend(_item_texts(token, env))
    return texts


def _item_texts(token: Token, env: dict[str, Any]) -> Iterator[str]:
    """Yields the plain text of each item of a list token, nested items after their parent (as _walk_items)."""
    for item in token.get("children", []):
        own = [child for child in item.get("children", []) if child["type"] != "list"]
        yield " ".join(_block_plain_text(child, env) for child in own).strip()
        for sub in item.get("children", []):
            if sub["type"] == "list":
                yield from _item_texts(sub, env)


def _block_plain_text(block: Token, env: dict[str, Any]) -> str:
    """Returns inline_text of a block token's children once mistune's inline pass has run over it."""
    if "children" in block:
        return inline_text([_inline_pass(child, env) for child in block["children"]])
    if "text" in block:
        # The same bullet lines ("**Status**: ❌ Rejected") recur in thousands of entries.
        return _inline_plain_text(block["text"].strip(" \r\n\t\f"))
    return ""


@lru_cache(maxsize=4096)
def _inline_plain_text(text: str) -> str:
    """Returns the plain text of inline markdown, in a document without link reference definitions."""
    return inline_text(_parser().inline(text, {"ref_links": {}}))


def _inline_pass(token: Token, env: dict[str, Any]) -> Token:
    """Returns a copy of a block token with its inline text parsed into children, as mistune's parse() does."""
    if "children" in token:
        return {**token, "children": [_inline_pass(child, env) for child in token["children"]]}
    if "text" in token:
        copied = {key: value for key, value in token.items() if key != "text"}
        copied["children"] = _parser().inline(token["text"].strip(" \r\n\t\f"), env)
        return copied
    return token


def list_items(text: str, code_spans: bool = False) -> list[tuple[str, int]]:
    """Returns (plain text, 0-based line) of each top-level list item, nested items flattened.

    code_spans: keep code spans in backticks (as inline_text's option).
    """
    items: list[tuple[str, int]] = []
    for token in parse_blocks(text):
        if token["type"] == "list" and "line" in token:
            line = _first_nonblank(text, token["line"])
            items.extend(_walk_items(token, text, line, code_spans))
    return items


def item_text(item: Token, code_spans: bool = False) -> str:
    """Returns the inline text of a list item token without its nested lists."""
    own = [c for c in item.get("children", []) if c["type"] != "list"]
    return " ".join(inline_text(c.get("children", []), code_spans) for c in own).strip()


def _walk_items(token: Token, text: str, line: int, code_spans: bool) -> Iterator[tuple[str, int]]:
    lines = text.splitlines()
    cursor = line
    for item in token.get("children", []):
        content = item_text(item, code_spans)
        cursor = next((i for i in range(cursor, len(lines)) if _MARKER_RE.match(lines[i])), cursor)
        yield content, cursor
        cursor += 1
        for sub in item.get("children", []):
            if sub["type"] == "list":
                for found in _walk_items(sub, text, cursor, code_spans):
                    cursor = found[1] + 1
                    yield found


def fenced_code(text: str) -> list[tuple[str, str, int]]:
    """Returns (info string, code, 0-based line) of each top-level fenced code block."""
    return [
        (((token.get("attrs") or {}).get("info", "") or "").strip(), token["raw"], _first_nonblank(text, token["line"]))
        for token in parse_blocks(text) if token["type"] == "block_code" and "line" in token
    ]


def inline_text(children: list[Token], code_spans: bool = False) -> str:
    """Returns the plain text of inline tokens: emphasis, code spans and links reduced to their text.

    code_spans: keep code spans in backticks (where they name code, as in a prompt).
    """
    parts: list[str] = []
    for child in children:
        if child["type"] == "codespan" and code_spans:
            parts.append(f"`{child['raw']}`")
        elif "raw" in child and child["type"] in ("text", "codespan", "inline_html", "block_text"):
            parts.append(child["raw"] if child["type"] != "inline_html" else "")
        elif child["type"] in ("softbreak", "linebreak"):
            parts.append(" ")
        elif "children" in child:
            parts.append(inline_text(child["children"], code_spans))
        elif "text" in child:
            parts.append(child["text"])
    return "".join(parts).strip()


_NEWLINE_RE = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


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


def _first_nonblank(text: str, line: int) -> int:
    lines = text.splitlines()
    while line < len(lines) and not lines[line].strip():
        line += 1
    return line


_MARKER_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])(?:\s|$)")
