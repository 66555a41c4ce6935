"""A model's free-form reply parsed into SEARCH/REPLACE blocks, whole-file rewrites, a summary and a lesson.

Parsing is a pure step of its own (as in aider's editblock coder); program/edits.py applies what it found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NoReturn, Sequence

from autoloop_py.errors import EditError

_SEARCH_RE = re.compile(r"^\s*<{5,9} ?SEARCH\b.*$")
_DIVIDER_RE = re.compile(r"^\s*={5,9}\s*$")
_REPLACE_RE = re.compile(r"^\s*>{5,9} ?REPLACE\b.*$")
_FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_SUMMARY_RE = re.compile(r"^\W*summary\W*:\s*(.*?)\s*$", re.IGNORECASE)
_LESSON_RE = re.compile(r"^\W*lesson\W*:\s*(.*?)\s*$", re.IGNORECASE)
_FILE_PREFIX_RE = re.compile(r"^(?:file(?:name)?|path)\s*:\s*", re.IGNORECASE)
_NO_LESSON = {"", "none", "n/a", "-", "(none)", "none."}
_ERROR_CONTEXT_LINES = 30


@dataclass(frozen=True)
class EditBlock:
    """One SEARCH/REPLACE block of a reply.

    Attributes:
      path: the file it edits as written in the reply; None when no filename preceded it.
      search: the exact text to find ('' to create a new file).
      replace: the text to put in its place.
      line: 1-based line of the `<<<<<<< SEARCH` marker in the reply.
    """

    path: str | None
    search: str
    replace: str
    line: int


@dataclass(frozen=True)
class FileRewrite:
    """A whole new file content given as a path line followed by a fenced block.

    Attributes:
      path: the file to rewrite.
      content: its new content (or, for a file with EVOLVE-BLOCK markers, the new block body).
      line: 1-based line of the opening fence in the reply.
    """

    path: str
    content: str
    line: int


@dataclass(frozen=True)
class Reply:
    """A parsed model reply.

    Attributes:
      summary: the SUMMARY line ('' when missing).
      lesson: the LESSON line, or None when absent or 'none'.
      blocks: the SEARCH/REPLACE blocks in reply order.
      rewrites: the whole-file rewrites in reply order.
    """

    summary: str
    lesson: str | None
    blocks: tuple[EditBlock, ...]
    rewrites: tuple[FileRewrite, ...]


@dataclass
class _Parse:
    """Mutable state of one parse_reply pass (private; never escapes parse_reply)."""

    lines: list[str]
    blocks: list[EditBlock] = field(default_factory=list)
    rewrites: list[FileRewrite] = field(default_factory=list)
    code: set[int] = field(default_factory=set)
    skip: set[int] = field(default_factory=set)


def parse_reply(text: str) -> Reply:
    """Parses a reply into summary, lesson, edit blocks and rewrites; raises EditError on a broken block."""
    state = _Parse(text.replace("\r\n", "\n").split("\n"))
    lines = state.lines
    i = 0
    while i < len(lines):
        line = lines[i]
        if i in state.skip or (_FENCE_RE.match(line) and _REPLACE_RE.match(_previous_nonblank(lines, i))):
            i += 1
        elif _SEARCH_RE.match(line):
            i = _read_block(state, i)
        elif _REPLACE_RE.match(line):
            _raise_malformed(lines, i, "`<<<<<<< SEARCH` and `=======` before this line")
        elif _FENCE_RE.match(line):
            i = _read_fence(state, i)
        else:
            i += 1
    prose = [line for i, line in enumerate(lines) if i not in state.code]
    summary, lesson = summary_and_lesson("\n".join(prose))
    return Reply(summary, lesson, tuple(state.blocks), tuple(state.rewrites))


def _read_block(state: _Parse, start: int) -> int:
    """Reads one SEARCH/REPLACE block starting at its SEARCH marker; returns the index after it."""
    lines = state.lines
    divider = _find_marker(lines, start, _DIVIDER_RE, (_SEARCH_RE, _REPLACE_RE), "`=======`")
    end = _find_marker(lines, divider, _REPLACE_RE, (_SEARCH_RE,), "`>>>>>>> REPLACE`")
    previous = state.blocks[-1].path if state.blocks else None
    path = _block_filename(lines, start, previous)
    state.blocks.append(EditBlock(path, _join(lines[start + 1 : divider]), _join(lines[divider + 1 : end]), start + 1))
    state.code.update(range(start, end + 1))
    return end + 1


def _find_marker(
    lines: list[str], start: int, wanted: re.Pattern[str], bad: tuple[re.Pattern[str], ...], expected: str
) -> int:
    """Returns the index of the next line matching wanted; raises if a bad marker or the end comes first."""
    for i in range(start + 1, len(lines)):
        if wanted.match(lines[i]):
            return i
        if any(pattern.match(lines[i]) for pattern in bad):
            _raise_malformed(lines, i, expected)
    _raise_malformed(lines, len(lines) - 1, expected)


def _read_fence(state: _Parse, start: int) -> int:
    """Handles a fenced block: a rewrite when a filename precedes it, a wrapper when it holds edit blocks."""
    lines = state.lines
    match = _FENCE_RE.match(lines[start])
    assert match is not None
    close = _fence_close(lines, start, match.group(1))
    if close is None:
        return start + 1
    body = lines[start + 1 : close]
    if any(_SEARCH_RE.match(line) for line in body):
        # Edit blocks wrapped in a fence: read them as usual and ignore the closing fence.
        state.skip.add(close)
        return start + 1
    state.code.update(range(start, close + 1))
    path = _filename(_previous_nonblank(lines, start))
    if path is not None and ("." in path or "/" in path):  # a bare word names no file: the fence is an example
        state.rewrites.append(FileRewrite(path, _join(body), start + 1))
    return close + 1


def _fence_close(lines: list[str], start: int, fence: str) -> int | None:
    """Returns the index of the line closing the fence opened at start, or None."""
    for i in range(start + 1, len(lines)):
        stripped = lines[i].strip()
        if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            return i
    return None


def _block_filename(lines: list[str], start: int, previous_path: str | None) -> str | None:
    """Returns the filename on the nearest non-empty line before a block (or its opening fence)."""
    index = _previous_nonblank_index(lines, start)
    if index is not None and _FENCE_RE.match(lines[index]) and not _is_closing_after_block(lines, index):
        index = _previous_nonblank_index(lines, index)
    if index is None:
        return previous_path
    line = lines[index]
    if _REPLACE_RE.match(line) or _FENCE_RE.match(line):
        return previous_path
    return _filename(line) or previous_path


def _is_closing_after_block(lines: list[str], index: int) -> bool:
    """Returns whether the fence line at index closes a fence right after a previous block."""
    before = _previous_nonblank_index(lines, index)
    return before is not None and bool(_REPLACE_RE.match(lines[before]))


def _previous_nonblank_index(lines: list[str], index: int) -> int | None:
    """Returns the index of the nearest non-blank line before index, or None."""
    return next((i for i in range(index - 1, -1, -1) if lines[i].strip()), None)


def _previous_nonblank(lines: list[str], index: int) -> str:
    """Returns the nearest non-blank line before index ('' if none)."""
    found = _previous_nonblank_index(lines, index)
    return lines[found] if found is not None else ""


def _filename(line: str) -> str | None:
    """Returns the filename a line names once decoration is stripped, or None if it is prose."""
    name = line.strip().strip("#*` \t")
    name = _FILE_PREFIX_RE.sub("", name).strip("*`: \t")
    if not name or any(ch.isspace() for ch in name) or _SUMMARY_RE.match(line) or _LESSON_RE.match(line):
        return None
    if _SEARCH_RE.match(name) or _DIVIDER_RE.match(name) or _REPLACE_RE.match(name):
        return None
    return name


def _join(lines: Sequence[str]) -> str:
    """Joins reply lines into file text ending with a newline ('' for no lines)."""
    return "".join(line + "\n" for line in lines)


def reply_field(text: str, name: str) -> str | None:
    """Returns the first `NAME: value` line of a reply (any case, markup around the name ignored), or None."""
    pattern = re.compile(rf"^\W*{re.escape(name)}\W*:\s*(.*?)\s*$", re.IGNORECASE)
    for line in text.split("\n"):
        match = pattern.match(line)
        if match and match.group(1).strip("*` "):
            return match.group(1).strip("*` ")
    return None


def summary_and_lesson(text: str) -> tuple[str, str | None]:
    """Returns the first SUMMARY line ('' if none) and LESSON line (None if none) of a text."""
    lines = text.split("\n")
    summary = next((m.group(1) for m in map(_SUMMARY_RE.match, lines) if m), "")
    lesson = next((m.group(1) for m in map(_LESSON_RE.match, lines) if m), "")
    summary = summary.strip("*` ")
    lesson = lesson.strip("*` ")
    return summary, (None if lesson.lower() in _NO_LESSON else lesson)


def _raise_malformed(lines: list[str], at: int, expected: str) -> NoReturn:
    """Raises an EditError quoting the text read so far with a `^^^ Expected` pointer."""
    shown = "\n".join(lines[max(0, at - _ERROR_CONTEXT_LINES + 1) : at + 1])
    raise EditError(
        f"malformed edit block: expected {expected} by reply line {at + 1}\n{shown}\n^^^ Expected {expected}",
        line=at + 1,
    )
