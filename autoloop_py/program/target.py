"""A program's Target: the files a candidate may change, read from the `## Target` section."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterable

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError


@dataclass(frozen=True)
class Target:
    """The files a candidate may change.

    Attributes:
      include: repo-relative POSIX glob patterns a candidate may write.
      exclude: repo-relative patterns it may never write, even when included.
      line: 0-based line of the `## Target` heading in program.md.
    """

    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    line: int = 0

    def allows(self, path: str) -> bool:
        """Returns whether a repo-relative POSIX path may be changed by a candidate."""
        if ".." in PurePosixPath(path).parts or path.startswith("/"):
            return False
        if any(glob_match(p, path) for p in self.exclude):
            return False
        return any(glob_match(p, path) for p in self.include)


def parse_target(section: md.Section | None, root: Path, base: Path, rel: Path, problems: list[ProgramError]) -> Target:
    if section is None:
        problems.append(ProgramError("missing `## Target` section (which files may change?)", rel))
        return Target(())
    include: list[str] = []
    exclude: list[str] = []
    prose: list[str] = []
    excluding = False
    for token in md.parse_blocks(section.body):
        if token["type"] == "paragraph":
            excluding = excluding or _says_do_not_modify(md.inline_text(token.get("children", [])))
            if not excluding:
                prose.extend(c["raw"].strip() for c in _codespans(token))
        elif token["type"] == "list":
            for spans, nested_exclude in _target_items(token, excluding):
                (exclude if nested_exclude else include).extend(spans)
    include = [p for p in include if looks_like_path(p, root, base)]
    exclude = [p for p in exclude if looks_like_path(p, root, base)]
    if not include:
        # A prose Target ("Only modify files in the test directory (e.g., `tests/`).") names its paths inline.
        include = [p for p in prose if looks_like_path(p, root, base)]
    if not include:
        problems.append(ProgramError("`## Target` lists no backticked file paths or globs", rel, section.start + 1))
    outside = {
        raw: why for raw in include + exclude if (why := _leaves_repository(root, raw, _resolve(root, base, raw)))
    }
    for raw, why in outside.items():
        problems.append(ProgramError(f"Target `{raw}` {why}", rel, _line_containing(section, f"`{raw}`")))
    include = [p for p in include if p not in outside]
    resolved_in = [_resolve(root, base, p) for p in include]
    resolved_ex = [_resolve(root, base, p) for p in exclude]
    for pattern, raw in zip(resolved_in, include):
        if not _matches_any(root, pattern):
            line = _line_containing(section, f"`{raw}`")
            problems.append(ProgramError(f"Target `{raw}` matches nothing; fix the path or create the file", rel, line))
    return Target(tuple(resolved_in), tuple(resolved_ex), section.start)


# Extensions that make a backticked word a file name even when no such file exists yet (so a typo is reported).
_FILE_SUFFIXES = frozenset(
    "py pyi ipynb js mjs cjs jsx ts tsx json jsonl yaml yml toml ini cfg conf md rst txt csv tsv c h cc cpp cxx hpp "
    "rs go java kt kts scala rb php pl lua r jl swift m mm cs fs sql sh bash zsh ps1 html htm css scss vue svelte "
    "xml proto graphql tf lock mk cmake gradle dart ex exs erl hs ml zig nim v sv vhd".split()
)
_NOT_PATH_CHARS = frozenset(" \t()=,;:'\"<>{}|+&!%^$#@~")


def looks_like_path(span: str, root: Path, base: Path) -> bool:
    """Returns whether a backticked Target span names a file, folder or glob (not a marker name or code).

    `code/search.py`, `tests/`, `src/**/*.ts`, `Makefile` (when it exists) are paths; `EVOLVE-BLOCK-START`,
    `run_search` and `f(x, y)` are not.
    """
    text = span.strip()
    if not text or any(ch in _NOT_PATH_CHARS for ch in text):
        return False
    if "/" in text or any(ch in text for ch in "*?["):
        return True
    if (root / base / text).exists() or (root / text).exists():
        return True
    stem, dot, suffix = text.rpartition(".")
    return bool(dot and stem and suffix.lower() in _FILE_SUFFIXES)


def _line_containing(section: md.Section, needle: str) -> int:
    lines = section.text.splitlines()
    return section.start + 1 + next((i for i, line in enumerate(lines) if needle in line), 0)


def _target_items(list_token: md.Token, excluding: bool) -> Iterable[tuple[list[str], bool]]:
    for item in list_token.get("children", []):
        own = [c for c in item.get("children", []) if c["type"] != "list"]
        text = " ".join(md.inline_text(c.get("children", [])) for c in own)
        says = _says_do_not_modify(text)
        paths = [c["raw"].strip() for c in own for c in _codespans(c)]
        yield paths, excluding or says
        for sub in item.get("children", []):
            if sub["type"] == "list":
                yield from _target_items(sub, excluding or says)


def _codespans(token: md.Token) -> Iterable[md.Token]:
    if token.get("type") == "codespan":
        yield token
    for child in token.get("children", []) or []:
        yield from _codespans(child)


def _says_do_not_modify(text: str) -> bool:
    lowered = text.lower()
    return "do not modify" in lowered or "don't modify" in lowered or "must not modify" in lowered


def _leaves_repository(root: Path, raw: str, pattern: str) -> str:
    """Returns how a Target path leads outside the repository (`..`, absolute, a symlink out), or ''."""
    pure = PurePosixPath(raw.strip())
    if pure.is_absolute() or Path(raw.strip()).is_absolute():
        return "is an absolute path; write it relative to the program folder or the repository root"
    if ".." in pure.parts:
        return "holds `..`; Target paths stay inside the repository"
    top = root.resolve()
    if any(ch in pattern for ch in "*?["):
        prefix = pattern.split("*")[0].split("?")[0].split("[")[0]
        start = root / prefix.rsplit("/", 1)[0] if "/" in prefix else root
        found = [start, *(p for p in start.rglob("*") if glob_match(pattern, p.relative_to(root).as_posix()))] \
            if start.is_dir() else []
    else:
        found = [root / pattern] if (root / pattern).exists() or (root / pattern).is_symlink() else []
    for path in found:
        real = path.resolve()
        if real != top and top not in real.parents:
            return f"leads outside the repository through a symbolic link ({path.relative_to(root).as_posix()})"
    return ""


def _resolve(root: Path, base: Path, pattern: str) -> str:
    """Returns a repo-relative pattern: relative to the program folder if it matches there, else the root."""
    pattern = pattern.strip().removeprefix("./")
    if pattern.startswith("/"):
        return pattern.lstrip("/")
    local = f"{base.as_posix()}/{pattern}" if str(base) != "." else pattern
    if str(base) == "." or _matches_any(root, local) or not _matches_any(root, pattern):
        return local
    return pattern


def _matches_any(root: Path, pattern: str) -> bool:
    if not any(ch in pattern for ch in "*?["):
        return (root / pattern).exists()
    prefix = pattern.split("*")[0].split("?")[0].split("[")[0]
    start = root / prefix.rsplit("/", 1)[0] if "/" in prefix else root
    if not start.is_dir():
        return False
    return any(path.is_file() and glob_match(pattern, path.relative_to(root).as_posix()) for path in start.rglob("*"))


def glob_match(pattern: str, path: str) -> bool:
    """Returns whether a POSIX path matches a glob where `**` spans folders and `*` does not."""
    return re.fullmatch(_glob_regex(pattern), path) is not None


def _glob_regex(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    if pattern.endswith("/"):
        out.append(".*")
    return "".join(out)


def target_files(target: Target, root: Path) -> list[str]:
    """Returns the existing files under root (repo-relative, sorted) that the Target allows."""
    found: set[str] = set()
    for pattern in target.include:
        if not any(ch in pattern for ch in "*?[") and not pattern.endswith("/"):
            if (root / pattern).is_file() and target.allows(pattern):
                found.add(pattern)
            continue
        prefix = pattern.split("*")[0].split("?")[0].split("[")[0]
        start = root / prefix.rsplit("/", 1)[0] if "/" in prefix else root
        if start.is_dir():
            for path in start.rglob("*"):
                rel = path.relative_to(root).as_posix()
                if path.is_file() and ".git" not in path.parts and target.allows(rel):
                    found.add(rel)
    return sorted(found)
