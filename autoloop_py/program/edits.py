"""Edits: the blocks and rewrites of a parsed reply applied to the Target files.

Applying walks a ladder of named matching rungs, from exact to forgiving, and every failure comes back
as data (`EditFailure`) so a proposer can show the model which block failed and the nearest real lines.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath
from typing import Callable, Iterable, Mapping

from autoloop_py.program import paths
from autoloop_py.program.regions import evolve_block_violation, evolve_regions, split_lines
from autoloop_py.program.reply import EditBlock, FileRewrite, Reply


@dataclass(frozen=True)
class EditFailure:
    """Why part of a reply could not be applied, phrased for the model.

    Attributes:
      path: the file concerned, if known.
      reason: one sentence naming the block and what to do instead.
      block: the failing block, if the failure is about one.
      nearest_lines: the window of the file most similar to the block's SEARCH text.
    """

    path: str | None
    reason: str
    block: EditBlock | None = None
    nearest_lines: str = ""


# --- applying ------------------------------------------------------------------------------------

_Lines = list[str]
# A rung maps (file lines, search lines, replace lines) to the candidate (start, end, replacement) spans.
_Span = tuple[int, int, _Lines]
_Rung = Callable[[_Lines, _Lines, _Lines], list[_Span]]


def apply_reply(
    reply: Reply, files: Mapping[str, str], default_path: str | None = None
) -> tuple[dict[str, str], list[EditFailure]]:
    """Applies a reply's blocks and rewrites to files; returns the new content of changed files and failures."""
    if not reply.blocks and not reply.rewrites:
        return {}, [EditFailure(None, "the reply contains no edit: give SEARCH/REPLACE blocks or a whole-file rewrite")]
    working = dict(files)
    failures: list[EditFailure] = []
    edits: list[EditBlock | FileRewrite] = sorted([*reply.blocks, *reply.rewrites], key=lambda e: e.line)
    for edit in edits:
        failure = _apply_one(edit, working, default_path)
        if failure is not None:
            failures.append(failure)
    changed = {p: c for p, c in working.items() if files.get(p) != c}
    for path in list(changed):
        violation = evolve_block_violation(files[path], changed[path]) if path in files else None
        if violation is not None:
            del changed[path]
            failures.append(EditFailure(path, f"changes to {path} were discarded: {violation}"))
    return changed, failures


def _apply_one(edit: EditBlock | FileRewrite, working: dict[str, str], default_path: str | None) -> EditFailure | None:
    """Applies one block or rewrite to working in place; returns a failure instead when it cannot."""
    raw = edit.path if edit.path is not None else default_path
    if raw is None:
        return EditFailure(
            None,
            f"the edit block at reply line {edit.line} names no file; put the file path on the line before it",
            edit if isinstance(edit, EditBlock) else None,
        )
    path = _resolve_path(raw, working)
    if isinstance(edit, FileRewrite):
        return _apply_rewrite(edit, path, working)
    return _apply_block(edit, path, working)


def _resolve_path(path: str, files: Mapping[str, str]) -> str:
    """Returns the known file a reply's path means: exact, else the one file ending with it."""
    while path.startswith("./"):
        path = path[2:]
    if path in files:
        return path
    suffix = [p for p in files if p.endswith("/" + path)]
    return suffix[0] if len(suffix) == 1 else path


def _apply_rewrite(edit: FileRewrite, path: str, working: dict[str, str]) -> EditFailure | None:
    """Replaces a whole file, or only its EVOLVE-BLOCK body when the new text carries no markers."""
    old = working.get(path)
    regions = evolve_regions(old) if old is not None else []
    if not regions or evolve_regions(edit.content):
        working[path] = edit.content
        return None
    if len(regions) > 1:
        return EditFailure(
            path,
            f"{path} has {len(regions)} EVOLVE-BLOCK regions; rewrite it whole with its markers or use SEARCH/REPLACE",
        )
    assert old is not None
    lines = _lines_keepends(old)
    start, end = regions[0]
    working[path] = "".join(lines[:start]) + edit.content + "".join(lines[end:])
    return None


def _apply_block(block: EditBlock, path: str, working: dict[str, str]) -> EditFailure | None:
    """Applies one SEARCH/REPLACE block to working[path] in place, or returns why it cannot."""
    content = working.get(path)
    if not block.search.strip():
        if content is None:
            working[path] = block.replace
            return None
        return EditFailure(
            path,
            f"the edit block for {path} at reply line {block.line} has an empty SEARCH but {path} exists; "
            "quote the lines to replace",
            block,
        )
    if content is None:
        return EditFailure(path, f"{path} does not exist; use an empty SEARCH to create it", block)
    new, matches = replace_block(content, block.search, block.replace)
    if new is None:
        return _block_failure(path, block, content, matches)
    working[path] = new
    return None


def _block_failure(path: str, block: EditBlock, content: str, matches: int) -> EditFailure:
    """Returns the failure for a block, naming it by file and first SEARCH line."""
    first = next((line.strip() for line in block.search.split("\n") if line.strip()), "")
    where = f"the SEARCH block for {path} starting `{first}` (reply line {block.line})"
    if matches > 1:
        return EditFailure(path, f"{where} matches {matches} places; include more context", block)
    return EditFailure(
        path,
        f"{where} matches no lines of the file; copy the lines exactly as they are now",
        block,
        nearest_lines(content, block.search),
    )


def replace_block(content: str, search: str, replace: str) -> tuple[str | None, int]:
    """Returns (new content, 1) for a unique match along the ladder, else (None, number of matches)."""
    lines, search_lines, replace_lines = split_lines(content), split_lines(search), split_lines(replace)
    trimmed = _strip_blank_edges(search_lines, replace_lines)
    for variant_search, variant_replace in [(search_lines, replace_lines), *([trimmed] if trimmed else [])]:
        for rung in _RUNGS:
            spans = rung(lines, variant_search, variant_replace)
            if len(spans) > 1:
                return None, len(spans)
            if spans:
                return _splice(content, lines, spans[0]), 1
    return None, 0


def _strip_blank_edges(search: _Lines, replace: _Lines) -> tuple[_Lines, _Lines] | None:
    """Returns search without blank edge lines and replace without the same blank edges (None: search has no
    blank edge, or nothing but blank lines)."""
    lead = next((i for i, line in enumerate(search) if line.strip()), None)
    if lead is None:
        return None
    trail = next(i for i, line in enumerate(reversed(search)) if line.strip())
    if not lead and not trail:
        return None
    new_search = search[lead : len(search) - trail]
    new_replace = list(replace)
    while lead and new_replace and not new_replace[0].strip():
        new_replace.pop(0)
        lead -= 1
    while trail and new_replace and not new_replace[-1].strip():
        new_replace.pop()
        trail -= 1
    return new_search, new_replace


def _windows(lines: _Lines, search: _Lines, replace: _Lines, same: Callable[[str, str], bool]) -> list[_Span]:
    """Returns every window of lines matching search line by line under `same`."""
    n = len(search)
    return [
        (i, i + n, replace)
        for i in range(len(lines) - n + 1)
        if all(same(lines[i + k], search[k]) for k in range(n))
    ]


def _indentation(lines: _Lines, search: _Lines, replace: _Lines) -> list[_Span]:
    """The lines match up to one uniform indentation difference, which the replacement inherits."""
    spans: list[_Span] = []
    n = len(search)
    for i in range(len(lines) - n + 1):
        shifted = _reindent(lines[i : i + n], search, replace)
        if shifted is not None:
            spans.append((i, i + n, shifted))
    return spans


def _reindent(window: _Lines, search: _Lines, replace: _Lines) -> _Lines | None:
    """Returns replace re-indented like window when window equals search shifted uniformly, else None."""
    pairs = [(w.rstrip(), s.rstrip()) for w, s in zip(window, search)]
    if any(bool(w.strip()) != bool(s.strip()) for w, s in pairs):
        return None
    texts = [(w, s) for w, s in pairs if w.strip()]
    if not texts:
        return None
    w0, s0 = texts[0]
    w_indent, s_indent = w0[: len(w0) - len(w0.lstrip())], s0[: len(s0) - len(s0.lstrip())]
    if w_indent.endswith(s_indent):
        add, remove = w_indent[: len(w_indent) - len(s_indent)], ""
    elif s_indent.endswith(w_indent):
        add, remove = "", s_indent[: len(s_indent) - len(w_indent)]
    else:
        return None
    if not all(w == add + s[len(remove) :] and s.startswith(remove) for w, s in texts):
        return None
    return [_shift(line, add, remove) for line in replace]


def _shift(line: str, add: str, remove: str) -> str:
    """Returns a replacement line with the indentation difference applied (blank lines untouched)."""
    if not line.strip():
        return line
    if remove and line.startswith(remove):
        line = line[len(remove) :]
    return add + line


_RUNGS: tuple[_Rung, ...] = (
    functools.partial(_windows, same=lambda a, b: a == b),  # the SEARCH lines verbatim (line endings aside)
    functools.partial(_windows, same=lambda a, b: a.rstrip() == b.rstrip()),  # trailing whitespace ignored
    _indentation,
)


def _lines_keepends(text: str) -> list[str]:
    """Returns text's lines with their newline, split on newlines only."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _splice(content: str, lines: _Lines, span: _Span) -> str:
    """Returns content with lines [start, end) replaced, keeping the file's newline style and ending."""
    start, end, replacement = span
    newline = "\r\n" if "\r\n" in content else "\n"
    out = lines[:start] + replacement + lines[end:]
    return newline.join(out) + (newline if out and content.endswith("\n") else "")


def nearest_lines(content: str, search: str) -> str:
    """Returns the window of content most similar to search (difflib), for showing the model."""
    lines, wanted = _lines_keepends(content), _lines_keepends(search)
    n = max(1, len(wanted))
    if not lines:
        return ""
    target = "".join(wanted)
    windows = ["".join(lines[i : i + n]) for i in range(max(1, len(lines) - n + 1))]
    scored = sorted(
        range(len(windows)),
        key=lambda i: -difflib.SequenceMatcher(None, target, windows[i], autojunk=False).quick_ratio(),
    )
    # quick_ratio is a cheap upper bound; the real ratio only runs on the few best windows.
    best = max(scored[:8], key=lambda i: difflib.SequenceMatcher(None, target, windows[i]).ratio())
    return windows[best]


# --- checks --------------------------------------------------------------------------------------


def check_paths(changed: Iterable[str], allows: Callable[[str], bool], existing: Iterable[str] = ()) -> list[str]:
    """Returns a reason for every changed path that is absolute, leaves the repository, is one git refuses or
    misstores (`paths.path_problems`: `.git` in any case, a case collision with another path or with `existing`…)
    or is not allowed."""
    reasons: list[str] = []
    plain: list[str] = []
    for path in changed:
        if path.startswith(("/", "\\")) or PureWindowsPath(path).drive:
            reasons.append(f"{path} is an absolute path; candidates may only change repository files")
        elif ".." in PurePosixPath(path.replace("\\", "/")).parts:
            reasons.append(f"{path} leaves the repository (`..`); candidates may only change repository files")
        else:
            plain.append(path)
    reasons += paths.path_problems(plain, existing)
    for path in plain:
        if paths.path_problem(path) is None and not allows(path):
            reasons.append(f"{path} is not in the program's Target list; change only the Target files")
    return reasons
