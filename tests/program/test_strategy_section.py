"""Strategy section: program.md's `## Evolution Strategy` replaced or added, every other line kept."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.program.strategy_section import section_line, with_strategy_section

PROGRAM = "# P\n\n## Goal\n\nGrow x.\n\n## Evolution Strategy\n\nPlain hill climbing.\n\n## Notes\n\nKeep me.\n"
BLOCK = "## Evolution Strategy\nThis program uses the **X** strategy: read `strategy/x.md`.\n"


def test_the_section_is_replaced_in_place() -> None:
    assert with_strategy_section(PROGRAM, BLOCK) == (
        "# P\n\n## Goal\n\nGrow x.\n\n" + BLOCK + "\n## Notes\n\nKeep me.\n"
    )
    assert section_line(PROGRAM) == 7


def test_an_absent_section_is_appended_after_a_blank_line() -> None:
    text = "# P\n\n## Goal\n\nGrow x.\n\n\n"
    assert with_strategy_section(text, BLOCK) == "# P\n\n## Goal\n\nGrow x.\n\n" + BLOCK
    assert section_line(text) is None
    assert with_strategy_section("", BLOCK) == BLOCK


def test_a_heading_with_more_words_is_the_section() -> None:
    text = "## Evolution Strategy (inspired by OpenEvolve)\n\nprose\n"
    assert with_strategy_section(text, BLOCK) == BLOCK


_LINE = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n#`~<>"), max_size=30)


@given(before=st.lists(_LINE, max_size=6), after=st.lists(_LINE, max_size=6))
def test_the_other_sections_come_back_byte_for_byte(before: list[str], after: list[str]) -> None:
    head = "# P\n\n## Goal\n\n" + "".join(f"{line}\n" for line in before) + "\n"
    tail = "## Notes\n\n" + "".join(f"{line}\n" for line in after)
    result = with_strategy_section(head + "## Evolution Strategy\n\nold\n\n" + tail, BLOCK)
    assert result.startswith(head)
    assert result.endswith(tail)
    assert result == head + BLOCK + "\n" + tail
