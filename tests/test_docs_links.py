"""The README and the docs/ pages: every relative link reaches a file (and its heading), and the README links each page once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote, urlsplit

import mistune
import pytest

from autoloop_py import markdown as md

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted((REPO / "docs").glob("*.md"))
DOCUMENTS = [REPO / "README.md", *PAGES]


def links(text: str) -> list[str]:
    """Returns the targets of every link and image of a markdown document, in order (code spans and blocks excluded)."""
    tokens = mistune.create_markdown(renderer=None, plugins=["table"])(text)
    return [token["attrs"]["url"] for token in _walk(tokens) if token["type"] in ("link", "image")]


def _walk(tokens: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for token in tokens:
        yield token
        yield from _walk(token.get("children") or [])


def anchors(text: str) -> set[str]:
    """Returns the anchors GitHub gives a document's headings (lowercase, punctuation dropped, spaces as `-`)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in md.headings(text):
        slug = re.sub(r"[^\w\- ]", "", heading.text.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[tuple[str, Path, str]]:
    """Returns (link, the file it names, its anchor) for each link of path that stays in the repository."""
    found = []
    for link in links(path.read_text(encoding="utf-8")):
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or link.startswith("mailto:"):
            continue
        target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
        found.append((link, target, unquote(parts.fragment)))
    return found


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_reaches_a_file_and_its_heading(document: Path) -> None:
    for link, target, anchor in relative_links(document):
        assert target.exists(), f"{document.relative_to(REPO)}: link {link!r} names a missing file"
        assert REPO in target.parents, f"{document.relative_to(REPO)}: link {link!r} leaves the repository"
        if anchor:
            assert target.suffix == ".md", f"{document.relative_to(REPO)}: {link!r} has an anchor into a non-page"
            assert anchor in anchors(target.read_text(encoding="utf-8")), (
                f"{document.relative_to(REPO)}: link {link!r} names no heading of {target.name}"
            )


def test_the_readme_links_every_docs_page_once() -> None:
    readme = REPO / "README.md"
    named = [target for _, target, _ in relative_links(readme) if target.parent == REPO / "docs"]
    assert PAGES, "docs/ holds no page"
    for page in PAGES:
        assert named.count(page) == 1, f"README.md links docs/{page.name} {named.count(page)} times, not once"


def test_the_readme_keeps_to_about_a_page() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"README.md has {lines} lines; move detail into a docs/ page"


def test_the_readme_draws_one_iteration_and_one_tick_and_shows_the_report() -> None:
    """Two Mermaid flowcharts in the subset our grammar check accepts (GitHub renders them), and the report's image."""
    from tests.mermaid_grammar import check, mermaid_blocks

    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = mermaid_blocks(text)
    assert len(blocks) == 2 and [check(block) for block in blocks] == [[], []]
    assert "autoloop/NAME" in blocks[0] and "publish" in blocks[1]
    images = [link for link in links(text) if link.endswith(".png")]
    assert images == ["docs/report.png"] and (REPO / images[0]).stat().st_size > 10_000


def test_the_checker_finds_a_broken_link_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Real heading\n\n[ok](#real-heading) [gone](b.md) [bad](#nope)\n")
    found = relative_links(tmp_path / "a.md")
    assert [(link, target.exists()) for link, target, _ in found] == [
        ("#real-heading", True), ("b.md", False), ("#nope", True),
    ]
    text = (tmp_path / "a.md").read_text()
    assert "real-heading" in anchors(text) and "nope" not in anchors(text)
    assert links("`[not](x.md)`\n\n```\n[nor](y.md)\n```\n") == []
