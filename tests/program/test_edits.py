"""Tests for autoloop_py.program.edits: literal model replies, parsed and applied."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.program.edits import apply_reply, check_paths
from autoloop_py.program.reply import EditBlock, FileRewrite, Reply, parse_reply

SEARCH_PY = """import math


def search(items, x):
    for i, item in enumerate(items):
        if item == x:
            return i
    return -1
"""

EVOLVED = """import math

# EVOLVE-BLOCK-START
def step(x):
    return x * 0.5
# EVOLVE-BLOCK-END

def main():
    return step(2)
"""


def test_fenced_block_with_summary_and_lesson() -> None:
    reply = parse_reply(
        "SUMMARY: return early from the loop using a cached index lookup\n"
        "LESSON: cheap lookups beat scans when the list is reused\n\n"
        "code/search.py\n"
        "```python\n"
        "<<<<<<< SEARCH\n"
        "    return -1\n"
        "=======\n"
        "    return None\n"
        ">>>>>>> REPLACE\n"
        "```\n"
    )
    assert reply.summary == "return early from the loop using a cached index lookup"
    assert reply.lesson == "cheap lookups beat scans when the list is reused"
    assert reply.blocks == (EditBlock("code/search.py", "    return -1\n", "    return None\n", 6),)
    changed, failures = apply_reply(reply, {"code/search.py": SEARCH_PY})
    assert failures == []
    assert changed["code/search.py"].endswith("    return None\n")


def test_missing_filename_uses_default_path() -> None:
    reply = parse_reply("SUMMARY: x\n\n<<<<<<< SEARCH\nimport math\n=======\nimport bisect\n>>>>>>> REPLACE\n")
    assert reply.blocks[0].path is None
    changed, failures = apply_reply(reply, {"code/search.py": SEARCH_PY}, default_path="code/search.py")
    assert failures == []
    assert changed["code/search.py"].startswith("import bisect\n")


def test_missing_filename_without_default_fails() -> None:
    reply = parse_reply("<<<<<<< SEARCH\nimport math\n=======\nimport bisect\n>>>>>>> REPLACE\n")
    changed, failures = apply_reply(reply, {"a.py": SEARCH_PY, "b.py": SEARCH_PY})
    assert changed == {}
    assert "names no file" in failures[0].reason


def test_two_files_and_filename_decorations() -> None:
    reply = parse_reply(
        "### File: `a.py`\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n\n"
        "**b.py**:\n<<<<<<< SEARCH\ny = 1\n=======\ny = 3\n>>>>>>> REPLACE\n"
        "<<<<<<< SEARCH\nz = 1\n=======\nz = 4\n>>>>>>> REPLACE\n"
    )
    assert [b.path for b in reply.blocks] == ["a.py", "b.py", "b.py"]
    changed, failures = apply_reply(reply, {"a.py": "x = 1\n", "b.py": "y = 1\nz = 1\n"})
    assert failures == []
    assert changed == {"a.py": "x = 2\n", "b.py": "y = 3\nz = 4\n"}


def test_whole_file_rewrite() -> None:
    reply = parse_reply("SUMMARY: rewrite\n\ncode/search.py\n```python\ndef search(items, x):\n    return 0\n```\n")
    assert reply.rewrites == (FileRewrite("code/search.py", "def search(items, x):\n    return 0\n", 4),)
    changed, failures = apply_reply(reply, {"code/search.py": SEARCH_PY})
    assert failures == []
    assert changed == {"code/search.py": "def search(items, x):\n    return 0\n"}


def test_rewrite_without_markers_replaces_only_the_evolve_region() -> None:
    reply = parse_reply("code/step.py\n```python\ndef step(x):\n    return x * 0.25\n```\n")
    changed, failures = apply_reply(reply, {"code/step.py": EVOLVED})
    assert failures == []
    assert changed["code/step.py"] == EVOLVED.replace("0.5", "0.25")


def test_edit_outside_evolve_region_is_discarded() -> None:
    reply = parse_reply("code/step.py\n<<<<<<< SEARCH\nimport math\n=======\nimport os\n>>>>>>> REPLACE\n")
    changed, failures = apply_reply(reply, {"code/step.py": EVOLVED})
    assert changed == {}
    assert "outside the EVOLVE-BLOCK" in failures[0].reason


def test_indentation_shifted_search_is_reindented() -> None:
    reply = parse_reply(
        "code/search.py\n<<<<<<< SEARCH\nif item == x:\n    return i\n=======\nif item >= x:\n    return i\n"
        ">>>>>>> REPLACE\n"
    )
    changed, failures = apply_reply(reply, {"code/search.py": SEARCH_PY})
    assert failures == []
    assert "        if item >= x:\n            return i\n" in changed["code/search.py"]


def test_over_indented_search_is_dedented() -> None:
    content = "def f():\n    return 1\n"
    reply = parse_reply("f.py\n<<<<<<< SEARCH\n        return 1\n=======\n        return 2\n>>>>>>> REPLACE\n")
    changed, failures = apply_reply(reply, {"f.py": content})
    assert failures == [] and changed["f.py"] == "def f():\n    return 2\n"


def test_trailing_whitespace_in_search_is_ignored() -> None:
    reply = parse_reply("code/search.py\n<<<<<<< SEARCH\n    return -1   \n=======\n    return None\n>>>>>>> REPLACE\n")
    changed, failures = apply_reply(reply, {"code/search.py": SEARCH_PY})
    assert failures == [] and changed["code/search.py"].endswith("    return None\n")


def test_stray_blank_lines_around_search_are_ignored() -> None:
    reply = parse_reply("code/search.py\n<<<<<<< SEARCH\n\nimport math\n\n\n\n\n=======\nimport os\n>>>>>>> REPLACE\n")
    changed, failures = apply_reply(reply, {"code/search.py": SEARCH_PY})
    assert failures == []
    assert changed["code/search.py"].startswith("import os\n\n\ndef search")


def test_ambiguous_search_fails_with_count() -> None:
    reply = parse_reply("f.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n")
    changed, failures = apply_reply(reply, {"f.py": "x = 1\ny = 0\nx = 1\nx = 1\n"})
    assert changed == {}
    assert "matches 3 places; include more context" in failures[0].reason


def test_no_match_names_block_and_shows_nearest_lines() -> None:
    reply = parse_reply(
        "code/search.py\n<<<<<<< SEARCH\n    for j, item in enumerate(items):\n        if item == x:\n=======\nX\n"
        ">>>>>>> REPLACE\n"
    )
    changed, failures = apply_reply(reply, {"code/search.py": SEARCH_PY})
    assert changed == {}
    (failure,) = failures
    assert failure.path == "code/search.py"
    assert "`for j, item in enumerate(items):`" in failure.reason and "matches no lines" in failure.reason
    assert failure.nearest_lines == "    for i, item in enumerate(items):\n        if item == x:\n"
    assert failure.block is reply.blocks[0]


def test_reply_without_edits_fails() -> None:
    changed, failures = apply_reply(parse_reply("SUMMARY: I would change things\n"), {"f.py": "x\n"})
    assert changed == {}
    assert [f.reason.split(":")[0] for f in failures] == ["the reply contains no edit"]


def test_empty_search_creates_new_file_but_not_over_existing() -> None:
    reply = parse_reply("new.py\n<<<<<<< SEARCH\n=======\nx = 1\n>>>>>>> REPLACE\n")
    assert apply_reply(reply, {}) == ({"new.py": "x = 1\n"}, [])
    changed, failures = apply_reply(reply, {"new.py": "y\n"})
    assert changed == {} and "empty SEARCH" in failures[0].reason


def test_short_path_resolves_to_the_one_matching_target() -> None:
    reply = parse_reply("search.py\n<<<<<<< SEARCH\nimport math\n=======\nimport os\n>>>>>>> REPLACE\n")
    changed, _ = apply_reply(reply, {"code/search.py": SEARCH_PY})
    assert list(changed) == ["code/search.py"]


def test_crlf_file_keeps_its_newlines_and_missing_final_newline() -> None:
    reply = parse_reply("f.py\n<<<<<<< SEARCH\nb = 2\n=======\nb = 3\n>>>>>>> REPLACE\n")
    changed, _ = apply_reply(reply, {"f.py": "a = 1\r\nb = 2"})
    assert changed == {"f.py": "a = 1\r\nb = 3"}


def test_form_feed_is_not_a_line_break() -> None:
    reply = parse_reply("f.py\n<<<<<<< SEARCH\nb = 2\n=======\nb = 3\n>>>>>>> REPLACE\n")
    changed, _ = apply_reply(reply, {"f.py": "a = 1\x0c# page\nb = 2\n"})
    assert changed == {"f.py": "a = 1\x0c# page\nb = 3\n"}


def test_check_paths_rejects_escapes_absolute_and_disallowed() -> None:
    paths = ["code/a.py", "../x.py", "code/../../x", "/etc/passwd", "other.py"]
    reasons = check_paths(paths, lambda p: p.startswith("code/"))
    assert len(reasons) == 4
    assert "leaves the repository" in reasons[0] and "leaves the repository" in reasons[1]
    assert "absolute" in reasons[2]
    assert reasons[3].startswith("other.py is not in the program's Target")


_line = st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"), max_size=20)


@given(st.lists(_line, min_size=1, max_size=8), st.integers(min_value=0, max_value=7))
def test_exact_unique_line_is_replaced_in_place(lines: list[str], pick: int) -> None:
    content = "".join(f"{i}:{line}\n" for i, line in enumerate(lines))
    index = pick % len(lines)
    target = f"{index}:{lines[index]}"
    reply = Reply("", None, (EditBlock("f.txt", target + "\n", "NEW\n", 1),), ())
    changed, failures = apply_reply(reply, {"f.txt": content})
    assert failures == []
    assert changed["f.txt"].split("\n")[index] == "NEW"
