"""Tests for markdown.py: spans of headings, sections, tables, lists and code through mistune."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py import markdown as md

DOC = """# Title

intro

## ⚙️ Machine State

| Field | Value |
|-------|-------|
| **Last Run** | `2025-01-01T00:00:00Z` |
| Iteration Count | 3 |

## Code

```python
## not a heading
```

- **Status**: ✅ Accepted
- **Change**: foo
  - nested
"""


def test_headings_skip_code_blocks() -> None:
    found = md.headings(DOC)
    assert [(h.level, h.text, h.line) for h in found] == [(1, "Title", 0), (2, "⚙️ Machine State", 4), (2, "Code", 11)]


def test_split_sections_cover_every_line() -> None:
    sections = md.split_sections(DOC)
    assert "".join(s.text for s in sections) == DOC
    assert [s.key for s in sections] == ["", "title", "machine state", "code"]


def test_tables_plain_cells_and_lines() -> None:
    [table] = md.tables(DOC)
    assert table.header == ("Field", "Value")
    assert [(r.cells, r.line) for r in table.rows] == [
        (("Last Run", "2025-01-01T00:00:00Z"), 8),
        (("Iteration Count", "3"), 9),
    ]


def test_list_items_with_lines() -> None:
    assert md.list_items(DOC) == [("Status: ✅ Accepted", 17), ("Change: foo", 18), ("nested", 19)]


def test_fenced_code() -> None:
    assert md.fenced_code(DOC) == [("python", "## not a heading\n", 13)]


def test_normalize_heading_ignores_emoji_and_markup() -> None:
    for text in ("⚙️ Machine State", "⚙ machine state", "**Machine State**", "`Machine`  State", "⚙\ufe0f MACHINE STATE"):
        assert md.normalize_heading(text) == "machine state"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["# A", "## B", "text", "", "```", "- item", "| a | b |", "### C"]), max_size=30))
def test_split_sections_is_lossless(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    assert "".join(s.text for s in md.split_sections(text)) == text


def test_headings_match_the_full_parse_with_inline_markup_references_and_crlf() -> None:
    # headings() skips mistune's inline pass for non-heading blocks; its result must equal the full parse's.
    text = DOC + "\r\n## **Bold** `code` [link][ref] _em_\r\n\r\n[ref]: https://example.invalid\r\n### Iter\\#3 ##\n"
    expected = []
    lines = text.replace("\r\n", "\n").splitlines()
    for token in md.parse_blocks(text):
        if token["type"] == "heading" and token.get("style") == "atx":
            line = next(i for i in range(token["line"], len(lines)) if lines[i].lstrip().startswith("#"))
            expected.append((token["attrs"]["level"], md.inline_text(token["children"]), line))
    assert [(h.level, h.text, h.line) for h in md.headings(text)] == expected
    assert expected[-2:] == [(2, "Bold code link em", 21), (3, "Iter#3", 24)]


_PIECES = ["# A", "## B", "### Iteration 3", "text", "", "```", "- item", "- **Status**: ✅ _ok_", "  - nested `x`",
           "* [a link](u)", "1. one", "> - quoted", "<!-- c -->", "| a | b |", "    - indented", "---", "\\- no"]


@settings(max_examples=120, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30), st.booleans())
def test_a_section_reads_as_it_would_alone(lines: list[str], reference: bool) -> None:
    # A section carries the document's parse; what it gives must equal parsing the section's text alone.
    text = "\n".join(lines + (["", "[u]: https://example.invalid"] if reference else [])) + "\n"
    for section in md.split_sections(text):
        assert reference or section.blocks is not None  # only a reference definition may change a section's reading
        assert md.section_headings(section) == md.headings(section.text)
        if section.blocks is not None and section.env is not None:
            alone = [item for item, _ in md.list_items(section.text)]
            assert md.list_item_texts(section.blocks, section.env) == alone
