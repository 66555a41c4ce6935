"""EVOLVE-BLOCK regions: the parts of a Target file a candidate may change, and the file a strategy evolves."""

from __future__ import annotations

from pathlib import Path

from autoloop_py.errors import ProgramError
from autoloop_py.program.model import Program
from autoloop_py.program.target import target_files

EVOLVE_START = "EVOLVE-BLOCK-START"
EVOLVE_END = "EVOLVE-BLOCK-END"


def evolve_regions(text: str) -> list[tuple[int, int]]:
    """Returns the 0-based [start, end) line ranges between EVOLVE-BLOCK marker pairs ([] if none or unpaired)."""
    regions: list[tuple[int, int]] = []
    open_at: int | None = None
    for i, line in enumerate(split_lines(text)):
        if EVOLVE_START in line:
            if open_at is not None:
                return []
            open_at = i + 1
        elif EVOLVE_END in line:
            if open_at is None:
                return []
            regions.append((open_at, i))
            open_at = None
    return regions if open_at is None else []


def _marker_count(text: str) -> int:
    """Returns how many EVOLVE-BLOCK marker lines text has."""
    return sum(1 for line in split_lines(text) if EVOLVE_START in line or EVOLVE_END in line)


def _outside(text: str, regions: list[tuple[int, int]]) -> list[str]:
    """Returns the lines outside the regions (markers included), each region as one placeholder."""
    lines = split_lines(text)
    out: list[str] = []
    cursor = 0
    for start, end in regions:
        out.extend(lines[cursor:start])
        out.append("\0region")
        cursor = end
    return out + lines[cursor:]


def evolve_block_violation(old: str, new: str) -> str | None:
    """Returns why new changes old outside its EVOLVE-BLOCK (or breaks the markers); None if it is fine."""
    old_regions = evolve_regions(old)
    if not old_regions:
        return None
    new_regions = evolve_regions(new)
    if len(new_regions) != len(old_regions) or _marker_count(new) != _marker_count(old):
        return "the EVOLVE-BLOCK-START/EVOLVE-BLOCK-END marker lines were removed or duplicated; keep them as they are"
    before, after = _outside(old, old_regions), _outside(new, new_regions)
    if before == after:
        return None
    first = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
    line = _original_line(old_regions, first)
    return f"text outside the EVOLVE-BLOCK changed (near line {line}); edit only between the markers"


def _original_line(regions: list[tuple[int, int]], index: int) -> int:
    """Returns the 1-based line in the old file of an index into its `_outside` list."""
    line = index
    for start, end in regions:
        if start < line:
            line += end - start - 1
    return line + 1


def place_code(text: str, code: str) -> str:
    """Returns text with its EVOLVE-BLOCK content replaced by code (the whole text when it has no block)."""
    found = evolve_regions(text)
    if not found:
        return code
    start, end = found[0]
    lines = text.splitlines(keepends=True)
    body = code if code.endswith("\n") or not code else code + "\n"
    return "".join(lines[:start]) + body + "".join(lines[end:])


def evolved_code(text: str) -> str:
    """Returns the content of the first EVOLVE-BLOCK (the whole text when there is none)."""
    found = evolve_regions(text)
    if not found:
        return text
    start, end = found[0]
    return "".join(text.splitlines(keepends=True)[start:end])


def primary_target(program: Program, root: Path) -> str:
    """Returns the Target file a strategy evolves: the first with EVOLVE-BLOCK markers, else the first."""
    paths = target_files(program.target, root)
    if not paths:
        raise ProgramError("a strategy needs at least one existing Target file", program.path)
    return next((path for path in paths if evolve_regions((root / path).read_text(encoding="utf-8"))), paths[0])


def split_lines(text: str) -> list[str]:
    """Returns text's lines without terminators, split on newlines only (str.splitlines also splits on \\f)."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines
