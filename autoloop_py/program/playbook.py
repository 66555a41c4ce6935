"""Playbook: the strategy file a program opts into, its `<CUSTOMIZE…>` markers and its `code/config.yaml`.

A program opts into a strategy when its `## Evolution Strategy` section names a file directly in
its `strategy/` folder (e.g. `strategy/alphaevolve.md`); the strategy is that file's stem. An
absent section, prose only, or a pointer to a missing file all mean the default flow.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

import yaml

from autoloop_py import markdown as md
from autoloop_py.errors import ProgramError
from autoloop_py.program.model import Program

logger = logging.getLogger(__name__)

MARKER_OPEN = "<CUSTOMIZE"
CONFIG_YAML = PurePosixPath("code/config.yaml")
_POINTER_RE = re.compile(r"(?<![\w/.-])(?:\./)?(strategy/[\w.-]+\.md)(?![\w/-])")
_SUPPORT_RE = re.compile(r"(?<![\w/.-])(?:\./)?(strategy/[\w./-]+\.md)(?![\w/-])")
_LABEL_END_RE = re.compile(r":|,| — | – | \(")
_PREVIEW_CHARS = 60


@dataclass(frozen=True)
class Playbook:
    """The strategy file a program's `## Evolution Strategy` section points to.

    Attributes:
      name: the strategy's name: the playbook's file stem (e.g. alphaevolve).
      path: the playbook, relative to the repository root.
      text: the playbook's content.
      program_dir: the folder relative paths start from (the program folder), relative to the root.
    """

    name: str
    path: Path
    text: str
    program_dir: Path


@dataclass(frozen=True)
class Marker:
    """An unresolved `<CUSTOMIZE…>` placeholder.

    Attributes:
      path: the file it is in (as given by the caller).
      line: 1-based line where the marker starts.
      text: the marker's exact source text, which may span several lines.
    """

    path: Path
    line: int
    text: str

    @property
    def content(self) -> str:
        """Returns the text inside the marker with whitespace collapsed ('' for a bare `<CUSTOMIZE>`)."""
        inner = self.text[len(MARKER_OPEN) :]
        inner = inner[:-1] if inner.endswith(">") else inner
        return " ".join(inner.lstrip(":").split())

    @property
    def label(self) -> str:
        """Returns the content up to its first `:`, `,`, ` — ` or ` (` (e.g. `program-name`, `goal`)."""
        return _LABEL_END_RE.split(self.content, maxsplit=1)[0].strip()

    @property
    def preview(self) -> str:
        """Returns the marker on one line, shortened for messages."""
        content = self.content
        if len(content) > _PREVIEW_CHARS:
            content = content[: _PREVIEW_CHARS - 1].rstrip() + "…"
        return f"<CUSTOMIZE: {content}>" if content else "<CUSTOMIZE>"


def find_playbook(program: Program, root: Path) -> Playbook | None:
    """Returns the playbook the program's Evolution Strategy names, or None for the default flow."""
    pointer = playbook_pointer(program)
    if pointer is None:
        return None
    rel, _ = pointer
    path = program.base_dir / rel
    if not (root / path).is_file():
        logger.info("%s: %s names %s, which does not exist; using the default flow", program.name, program.path, path)
        return None
    text = (root / path).read_text(encoding="utf-8")
    return Playbook(PurePosixPath(rel).stem, path, text, program.base_dir)


def playbook_pointer(program: Program) -> tuple[str, int] | None:
    """Returns (program-relative playbook path, 1-based line in program.md) the section names, if any."""
    mentions = _mentions(program.text, _POINTER_RE)
    return mentions[0] if mentions else None


def runnable_playbook(program: Program, root: Path) -> Playbook | None:
    """Returns the program's playbook (None: default flow); raises ProgramError listing every problem as file:line."""
    playbook = find_playbook(program, root)
    problems = playbook_problems(program, root) if playbook is not None else []
    if playbook is None or not problems:
        return playbook
    listed = "\n".join(f"  {problem}" for problem in problems)
    message = (
        f"the {playbook.name} playbook is not ready to run ({len(problems)} problems); "
        f"resolve them by hand or with `autoloop customize {program.name}`:\n{listed}"
    )
    raise ProgramError(message, playbook.path)


def customize_markers(text: str, path: Path) -> list[Marker]:
    """Returns every `<CUSTOMIZE…>` marker of text, in order, with the 1-based line where it starts."""
    return [Marker(path, text.count("\n", 0, start) + 1, text[start:end]) for start, end in marker_spans(text)]


def label_bare_markers(text: str) -> str:
    """Returns text with each bare `<CUSTOMIZE>` saying what to write: the marker at its place on the nearest line
    above with as many markers, labelled, prefixed with what its own line says before its first marker.

    A template repeats a labelled line with bare markers (AlphaEvolve's `- **Island 1 — <CUSTOMIZE>**:
    <CUSTOMIZE>` under Island 0's `<CUSTOMIZE: family name>` and `<CUSTOMIZE: one-line description>`); the copy
    a program gets reads `<CUSTOMIZE: Island 1 family name>`, a label of its own that an answers file can name.
    """
    lines = text.split("\n")
    labels: dict[int, list[str]] = {}  # marker count -> the labels of the last line with that many, all labelled
    for index, line in enumerate(lines):
        markers = customize_markers(line, Path())
        if not markers:
            continue
        if all(marker.label for marker in markers):
            labels[len(markers)] = [marker.label for marker in markers]
            continue
        above = labels.get(len(markers))
        if above is None:
            continue
        context = " ".join(re.sub(r"[*_`#>|—–-]", " ", line[: line.find(MARKER_OPEN)]).split())
        spans = marker_spans(line)
        for (start, end), marker, label in reversed(list(zip(spans, markers, above))):  # from the end: spans hold
            if not marker.label:
                line = f"{line[:start]}<CUSTOMIZE: {context} {label}>{line[end:]}"
        lines[index] = line
    return "\n".join(lines)


def marker_spans(text: str) -> list[tuple[int, int]]:
    """Returns the [start, end) character spans of the markers; nested `<…>` pairs stay inside one marker."""
    spans: list[tuple[int, int]] = []
    position = 0
    while (start := text.find(MARKER_OPEN, position)) != -1:
        end = _marker_end(text, start)
        spans.append((start, end))
        position = end
    return spans


def _marker_end(text: str, start: int) -> int:
    """Returns the offset after the `>` closing the marker at start (the line's end when it never closes)."""
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        # `<` opens only when text follows it, so "n < 100" inside a marker does not swallow the rest.
        if char == "<" and index + 1 < len(text) and not text[index + 1].isspace():
            depth += 1
        elif char == ">":
            depth -= 1
            if depth == 0:
                return index + 1
    newline = text.find("\n", start)
    return len(text) if newline == -1 else newline


def playbook_problems(program: Program, root: Path) -> list[ProgramError]:
    """Returns what keeps the program's playbook from running: markers and missing support files."""
    playbook = find_playbook(program, root)
    if playbook is None:
        return []
    problems = [marker_problem(m, program) for m in customize_markers(playbook.text, playbook.path)]
    for rel in strategy_files(playbook, root):
        if rel != playbook.path:
            markers = customize_markers((root / rel).read_text(encoding="utf-8"), rel)
            problems.extend(marker_problem(m, program) for m in markers)
    return problems + _missing_support(program, root)


def playbook_warnings(program: Program, root: Path) -> list[ProgramError]:
    """Returns a warning when the Evolution Strategy names a playbook that does not exist (the default flow runs)."""
    pointer = playbook_pointer(program)
    if pointer is None or (root / program.base_dir / pointer[0]).is_file():
        return []
    rel, line = pointer
    message = (
        f"`## Evolution Strategy` names {rel}, which does not exist, so the default flow runs; "
        f"create {program.base_dir / rel} or remove the pointer"
    )
    return [ProgramError(message, program.path, line)]


def strategy_files(playbook: Playbook, root: Path) -> list[Path]:
    """Returns the playbook and the markdown files of its prompts/ folder, repo-relative."""
    prompts = root / playbook.path.parent / "prompts"
    found = sorted(p.relative_to(root) for p in prompts.rglob("*.md") if p.is_file()) if prompts.is_dir() else []
    return [playbook.path, *found]


def marker_problem(marker: Marker, program: Program) -> ProgramError:
    """Returns the error for an unresolved marker of one of the program's files."""
    message = (
        f"unresolved {marker.preview} marker; replace it with this program's text "
        f"(or run `autoloop customize {program.name}`)"
    )
    return ProgramError(message, marker.path, marker.line)


def _missing_support(program: Program, root: Path) -> list[ProgramError]:
    problems = []
    for rel, line in _mentions(program.text, _SUPPORT_RE):
        if not (root / program.base_dir / rel).is_file():
            message = f"the Evolution Strategy lists {rel}, which does not exist; create it or drop it from the list"
            problems.append(ProgramError(message, program.path, line))
    return problems


# Asked several times per iteration (the playbook's pointer) of a program.md that rarely changes in a run.
@functools.lru_cache(maxsize=16)
def _mentions(text: str, pattern: re.Pattern[str]) -> tuple[tuple[str, int], ...]:
    """Returns (path, 1-based line) of each distinct `strategy/…` path the Evolution Strategy prose mentions."""
    section = md.section_named(md.split_sections(text), "evolution strategy")
    if section is None:
        return ()
    seen: dict[str, int] = {}
    for index, line in _prose_lines(section.body):
        for match in pattern.finditer(line):
            seen.setdefault(match.group(1), section.start + 2 + index)
    return tuple((path, line) for path, line in seen.items() if ".." not in PurePosixPath(path).parts)


def _prose_lines(body: str) -> list[tuple[int, str]]:
    """Returns (0-based index, line) of the lines outside code blocks."""
    lines = body.splitlines()
    tokens = [t for t in md.parse_blocks(body) if "line" in t]
    code: set[int] = set()
    for i, token in enumerate(tokens):
        if token["type"] == "block_code":
            end = tokens[i + 1]["line"] if i + 1 < len(tokens) else len(lines)
            code.update(range(token["line"], end))
    return [(i, line) for i, line in enumerate(lines) if i not in code]


def load_config_yaml(program: Program, root: Path) -> dict[str, Any]:
    """Returns the program's `code/config.yaml` as a mapping ({} when absent or empty)."""
    rel = program.base_dir / CONFIG_YAML
    path = root / rel
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ProgramError(f"invalid YAML: {getattr(err, 'problem', None) or err}; fix the file", rel, line) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProgramError("must be a mapping of `key: value` lines (e.g. `population_size: 40`)", rel, 1)
    return {str(key): value for key, value in data.items()}


def resolve_markers(
    files: Mapping[str, str], answers: Mapping[str, Any], source: Path
) -> tuple[dict[str, str], list[str]]:
    """Returns the files with answered markers replaced, and the answer keys that matched no marker.

    A key is `file:line` (the file as in `files`, or a path ending with it; a list value answers the
    markers on that line in order), or a marker's full text, content or label (e.g. `program-name`),
    which answers every marker it matches.
    """
    table = _Answers(source)
    for key, value in answers.items():
        if (place := _place_key(str(key), files)) is not None:
            table.by_place[place] = value
        else:
            table.by_text[_normalize(str(key))] = value
    resolved = {name: _resolve_file(name, text, table) for name, text in files.items()}
    unused = [str(k) for k in answers if _key_id(str(k), files) not in table.used]
    return resolved, unused


@dataclass
class _Answers:
    """The answers of one file, indexed, and which of them were used."""

    source: Path
    by_text: dict[str, Any] = field(default_factory=dict)
    by_place: dict[str, Any] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)

    def lookup(self, marker: Marker, nth: int, name: str) -> str | None:
        """Returns the answer for the nth marker on its line of file name, or None."""
        place = f"{name}:{marker.line}"
        if place in self.by_place:
            self.used.add("place:" + place)
            value = self.by_place[place]
            if isinstance(value, list):
                if nth >= len(value):
                    message = f"`{place}` gives {len(value)} answers but that line has more markers"
                    raise ProgramError(message, self.source)
                value = value[nth]
            return _answer_text(value, place, self.source)
        for key in (_normalize(marker.text), _normalize(marker.content), _normalize(marker.label)):
            if key and key in self.by_text:
                self.used.add("text:" + key)
                return _answer_text(self.by_text[key], key, self.source)
        return None


def _resolve_file(name: str, text: str, answers: _Answers) -> str:
    out: list[str] = []
    cursor = 0
    per_line: dict[int, int] = {}
    for marker, (start, end) in zip(customize_markers(text, Path(name)), marker_spans(text)):
        nth = per_line.get(marker.line, 0)
        per_line[marker.line] = nth + 1
        answer = answers.lookup(marker, nth, name)
        out.append(text[cursor:start] + (marker.text if answer is None else answer))
        cursor = end
    return "".join(out) + text[cursor:]


def _answer_text(value: Any, key: str, source: Path) -> str:
    if isinstance(value, (dict, list)) or value is None:
        raise ProgramError(f"the answer for `{key}` must be text, got {value!r}", source)
    return str(value).rstrip("\n")


def _normalize(key: str) -> str:
    return " ".join(key.split())


def file_named(path: str, files: Mapping[str, str]) -> str | None:
    """Returns the key of files that path names: exactly, or as the unique key it ends with (repo-relative paths)."""
    if path in files:
        return path
    matches = [name for name in files if path.endswith("/" + name)]
    return matches[0] if len(matches) == 1 else None


def _place_key(key: str, files: Mapping[str, str]) -> str | None:
    """Returns `file:line` for a key naming a line of one of files, None for a key naming a marker's text."""
    path, _, line = key.rpartition(":")
    name = file_named(path.strip(), files) if line.strip().isdigit() else None
    return None if name is None else f"{name}:{int(line)}"


def _key_id(key: str, files: Mapping[str, str]) -> str:
    place = _place_key(key, files)
    return "text:" + _normalize(key) if place is None else "place:" + place
