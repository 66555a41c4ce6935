"""Every Mermaid diagram of the README and docs/ renders with mermaid.js, the renderer GitHub uses."""

from __future__ import annotations

from pathlib import Path

from tests.browser import mermaid_errors, mermaid_js
from tests.mermaid_grammar import mermaid_blocks

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_diagram_of_the_readme_and_docs_renders(tmp_path: Path) -> None:
    script = mermaid_js()
    found = [(page.name, block) for page in PAGES for block in mermaid_blocks(page.read_text(encoding="utf-8"))]
    assert any(name == "architecture.md" for name, _ in found)
    errors = mermaid_errors([block for _, block in found], script, tmp_path)
    assert [(name, error) for (name, _), error in zip(found, errors) if error] == []


def test_the_architecture_diagram_draws_every_part_of_loop() -> None:
    (block,) = mermaid_blocks((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    for sub in ("checkout", "evaluation", "record", "iteration", "tick", "slots"):
        assert f'["loop/{sub}"]' in block and (ROOT / "autoloop_py" / "loop" / sub / "__init__.py").is_file()
