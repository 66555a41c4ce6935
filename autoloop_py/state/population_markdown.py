"""Population markdown: parse and render the state file's `## 🧬 Population` section losslessly.

The section is read line by line rather than through mistune: the seed's compact schema puts the
code fence right under `<details>`, inside a CommonMark HTML block, where a markdown parser stops
seeing fences and would take a `# comment` or `### x` line of the code for a heading. The scanner
here tracks fences itself, so headings inside code never split an entry.
"""

from __future__ import annotations

import logging
import re
from dataclasses import fields, replace

from autoloop_py import markdown as md
from autoloop_py.errors import StateError
from autoloop_py.render import render
from autoloop_py.state.parts import STATUS_ICONS, finite_number, format_number, one_line
from autoloop_py.state.population_model import (
    CANDIDATE_STATUSES,
    FOLDED_HEADING_RE,
    Candidate,
    LayoutItem,
    Population,
    RawBlock,
    StateSlot,
    evolved_lines,
)

logger = logging.getLogger(__name__)

_NONE_WORDS = ("", "—", "–", "-", "none", "null")
# A bullet's label in lower-case letters only -> the field it sets (`Parent(s)`, `Feature cell` and `Note` too).
_LABELS = {key: key for key in ("operator", "parents", "cell", "approach", "status", "notes", "lines")}
_LABELS |= {"parent": "parents", "featurecell": "cell", "note": "notes"}
_N = r"([0-9]{1,15})"
_CANDIDATE_RE = re.compile(
    rf"^ {{0,3}}###[ \t]+Candidate[ \t]+#?{_N}[ \t]*·[ \t]*island[ \t]+(\S+)[ \t]*·[ \t]*"
    rf"fitness[ \t]+(\S+)[ \t]*·[ \t]*gen[ \t]+{_N}[ \t#]*$",
    re.IGNORECASE,
)
_BLOCK_HEADING_RE = re.compile(r"^ {0,3}#{1,3}(?:[ \t]|$)")
_SECTION_HEADING_RE = re.compile(r"^ {0,3}##(?:[ \t]|$)")
# Ends the intro when the newest entries were evicted: the ids they had are never handed out again.
_NEXT_ID_RE = re.compile(r"<!-- autoloop-next-id: ([0-9]{1,15}) -->\n\n\Z")
_LEVEL3_RE = re.compile(r"^ {0,3}###[ \t]+(.*)$")
_BREAK_RE = re.compile(r"^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_BULLET_RE = re.compile(r"^ {0,3}[-*+](?:[ \t]+(.*))?$")
# `**Label**: value` or `**Label:** value`.
_LABEL_RE = re.compile(r"^\*\*([^*]+)(?:\*\*[ \t]*:|:\*\*)(.*)$")
_DETAILS_RE = re.compile(r"^ {0,3}<details>[ \t]*(<summary>.*</summary>)?[ \t]*$", re.IGNORECASE)
_DETAILS_START_RE = re.compile(r"^ {0,3}<details\b", re.IGNORECASE)
_DETAILS_END_RE = re.compile(r"^ {0,3}</details>[ \t]*$", re.IGNORECASE)
_SUMMARY_RE = re.compile(r"^ {0,3}<summary>.*</summary>[ \t]*$", re.IGNORECASE)
_FENCE_OPEN_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
# A line with its newline, or the last line when it has none.
_LINE_RE = re.compile(r"[^\n]*\n|[^\n]+\Z")
_REF_RE = re.compile(r"^ {0,3}Full source:[ \t]*`memory/autoloop:([^`]+)`[ \t]*$")


class _Unreadable(Exception):
    """An entry that cannot be understood: why, and the 0-based line."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


# ---------------------------------------------------------------- heading numbers, strategy state, read-back


def format_fitness(value: float | None) -> str:
    """Returns fitness as written in an entry heading: `null`, or the shortest text that reads back the same."""
    return "null" if value is None else format_number(value)


def with_strategy_state(population: Population, text: str) -> Population:
    """Returns the population with its strategy-state block replaced ('' removes it), ended by a blank line.

    A `next_id` row in the block's `| Field | Value |` table raises next_id, as it does when parsed.
    """
    if text:
        text = text if text.endswith("\n") else text + "\n"
        text = text if text.endswith("\n\n") else text + "\n"
        lines = _split_keep(text)
        blocks = _blocks(lines, 0)
        if blocks != [(0, len(lines))] or not _is_state_heading(lines[0]):
            raise ValueError("strategy state must be one block under a `### ⚙️ Strategy State` heading")
    next_id = max(population.next_id, _carried_next_id(text, "strategy state", 0))
    return replace(population, strategy_state=text, next_id=next_id)


def check_writable(candidate: Candidate) -> None:
    """Raises ValueError unless the candidate's entry reads back as the same candidate."""
    rows = _rows(_split_keep(_entry_text(candidate)))
    try:
        back = _parse_entry(rows, 0)
    except _Unreadable as error:
        raise ValueError(f"candidate {candidate.id} cannot be written to the Population: {error.reason}") from None
    if candidate.code is None:
        back = replace(back, language=candidate.language)
    differ = [
        f.name for f in fields(Candidate) if f.name != "raw" and getattr(back, f.name) != getattr(candidate, f.name)
    ]
    if differ:
        raise ValueError(f"candidate {candidate.id} would read back with different {', '.join(differ)}")


# ---------------------------------------------------------------- rendering


def render_population(population: Population) -> str:
    """Returns the section text; untouched parsed entries come back byte for byte."""
    laid = {item.id for item in population.layout if isinstance(item, Candidate)}
    current = {c.id: c for c in population.candidates}
    pending = [c for c in population.candidates if c.id not in laid]
    out = [population.heading, population.intro]
    held = [c.id + 1 for c in population.candidates] + [_carried_next_id(population.strategy_state, "", 0), 1]
    if population.next_id > max(held):
        _append(out, f"<!-- autoloop-next-id: {population.next_id} -->\n\n")
    if population.strategy_state and StateSlot() not in population.layout:
        _append(out, population.strategy_state)
    for item in population.layout:
        if pending and not isinstance(item, StateSlot):
            _append(out, "".join(_entry_text(c) + "\n" for c in pending))
            pending = []
        _append(out, _item_text(item, current, population.strategy_state))
    if pending:
        _append(out, "".join(_entry_text(c) + "\n" for c in pending))
    return "".join(out)


def _item_text(item: LayoutItem, current: dict[int, Candidate], strategy_state: str) -> str:
    if isinstance(item, StateSlot):
        return strategy_state
    if isinstance(item, RawBlock):
        return item.text
    now = current.get(item.id)
    if now is None:
        return ""
    if now == item and item.raw is not None:
        return item.raw
    return _entry_text(now) + _gap(item.raw or "\n")


def _append(out: list[str], text: str) -> None:
    if text and out and out[-1] and not out[-1].endswith("\n"):
        out.append("\n")
    out.append(text)


def _gap(raw: str) -> str:
    """Returns the blank lines that end raw (the spacing after an entry, kept when it is re-rendered)."""
    lines = _split_keep(raw)
    tail = []
    while lines and not lines[-1].strip():
        tail.append(lines.pop())
    return "".join(reversed(tail))


def _entry_text(candidate: Candidate) -> str:
    code = candidate.code
    runs = [len(run) for run in re.findall("`+", code or "")]
    entry = {
        "id": candidate.id,
        "island": "—" if candidate.island is None else candidate.island,
        "fitness": format_fitness(candidate.fitness),
        "gen": candidate.gen,
        "bullets": _bullets(candidate),
        "code": code,
        "fence": "`" * max(3, max(runs, default=0) + 1),
        "language": candidate.language,
        "ref": candidate.code_ref,
    }
    return render("population_entry.md.j2", entry=entry)


def _bullets(candidate: Candidate) -> list[tuple[str, str]]:
    # One line each: a model-written approach or note with a line break would otherwise start bullets of its own
    # (a forged `- **Objectives**:` or `- **Island**:` line the strategies would read back).
    status = candidate.status
    bullets = [
        ("Operator", one_line(candidate.operator)),
        ("Parent(s)", ", ".join(str(p) for p in candidate.parents) or "—"),
        ("Feature cell", " · ".join(candidate.cell) if candidate.cell else "—"),
        ("Approach", one_line(candidate.approach)),
        ("Status", f"{STATUS_ICONS[status]} {status}" if status in CANDIDATE_STATUSES else status),
        ("Notes", one_line(candidate.notes)),
        *((one_line(label), one_line(value)) for label, value in candidate.extra),
    ]
    if candidate.code is not None:
        bullets.append(("Lines", f"{evolved_lines(candidate.code)}*"))
    return bullets


# ---------------------------------------------------------------- parsing


def parse_population(text: str, path: str = "state.md", first_line: int = 0) -> Population:
    """Parses the section (heading line included); unreadable entries are kept verbatim with a warning."""
    lines = _split_keep(text)
    if not lines or not _SECTION_HEADING_RE.match(lines[0].rstrip("\r\n")):
        raise StateError("the Population section must start with its `## 🧬 Population` heading", path, first_line + 1)
    blocks = _blocks(lines, 1)
    intro = "".join(lines[1 : blocks[0][0] if blocks else len(lines)])
    kept = _NEXT_ID_RE.search(intro)
    intro = intro[: kept.start()] if kept else intro
    layout: list[LayoutItem] = []
    strategy_state, carried = "", int(kept.group(1)) if kept else 0
    for start, end in blocks:
        block = lines[start:end]
        if _is_state_heading(block[0]) and not strategy_state:
            strategy_state = "".join(block)
            carried = _carried_next_id(strategy_state, path, first_line + start)
            layout.append(StateSlot())
        else:
            layout.append(_read_block(block, path, first_line + start))
    candidates = _unique(layout, [first_line + start for start, _ in blocks], path)
    next_id = max([c.id + 1 for c in candidates] + [carried, 1])
    return Population(candidates, intro, strategy_state, next_id, lines[0], tuple(layout))


def _read_block(block: list[str], path: str, line: int) -> Candidate | RawBlock:
    if FOLDED_HEADING_RE.match(block[0].rstrip("\r\n")):
        return RawBlock("".join(block), line)  # entries folded to the memory branch: population_fold.py
    try:
        if _is_state_heading(block[0]):
            raise _Unreadable("a second `### ⚙️ Strategy State` block (merge it into the first)", line)
        candidate = _parse_entry(_rows(block), line)
    except _Unreadable as error:
        logger.warning(
            "%s:%d: %s; the entry is kept as written but left out of the population until it is fixed",
            path,
            error.line + 1,
            error.reason,
        )
        return RawBlock("".join(block), line)
    return replace(candidate, raw="".join(block))


def _unique(layout: list[LayoutItem], starts: list[int], path: str) -> tuple[Candidate, ...]:
    """Returns the candidates sorted newest first; raises StateError on a repeated id."""
    seen: dict[int, int] = {}
    for item, start in zip(layout, starts):
        if not isinstance(item, Candidate):
            continue
        if item.id in seen:
            raise StateError(
                f"candidate {item.id} appears twice (also at line {seen[item.id]}); ids must be unique, "
                "so delete one entry or give it an unused id",
                path,
                start + 1,
            )
        seen[item.id] = start + 1
    found = [item for item in layout if isinstance(item, Candidate)]
    return tuple(sorted(found, key=lambda c: c.id, reverse=True))


def _carried_next_id(strategy_state: str, path: str, first_line: int) -> int:
    """Returns the `next_id` row of the strategy state's `| Field | Value |` table (0 when absent or unreadable)."""
    for table in md.tables(strategy_state):
        if tuple(md.normalize_heading(h) for h in table.header[:2]) != ("field", "value"):
            continue
        for row in table.rows:
            if len(row.cells) >= 2 and md.normalize_heading(row.cells[0]) == "next id":
                if re.fullmatch(_N, row.cells[1].strip()):
                    return int(row.cells[1])
                logger.warning(
                    "%s:%d: next_id %r is not a whole number; ignored", path, first_line + row.line + 1, row.cells[1]
                )
    return 0


def _blocks(lines: list[str], start: int) -> list[tuple[int, int]]:
    """Returns the [start, end) line spans of the level-1..3 heading blocks from `start`, outside fences."""
    heads: list[int] = []
    fence: tuple[str, int] | None = None
    for i in range(start, len(lines)):
        row = lines[i].rstrip("\r\n")
        if fence is None and _BLOCK_HEADING_RE.match(row):
            heads.append(i)
        fence = fence_step(fence, row)
    return [(h, heads[k + 1] if k + 1 < len(heads) else len(lines)) for k, h in enumerate(heads)]


def fence_step(fence: tuple[str, int] | None, row: str) -> tuple[str, int] | None:
    """Returns the open fence (char, length) after `row`, None outside code (a line scanner's step, as CommonMark)."""
    if fence is None:
        opened = _fence_open(row)
        return (opened[0][0], len(opened[0])) if opened else None
    closed = _FENCE_CLOSE_RE.match(row)
    if closed and closed.group(1)[0] == fence[0] and len(closed.group(1)) >= fence[1]:
        return None
    return fence


def _fence_open(row: str) -> tuple[str, str, int] | None:
    """Returns (fence, info, indent) when row opens a fenced code block."""
    found = _FENCE_OPEN_RE.match(row)
    if not found or (found.group(2)[0] == "`" and "`" in found.group(3)):
        return None
    return found.group(2), found.group(3).strip(), len(found.group(1))


def _is_state_heading(line: str) -> bool:
    found = _LEVEL3_RE.match(line.rstrip("\r\n"))
    return found is not None and md.normalize_heading(found.group(1).strip("# \t")) == "strategy state"


def _parse_entry(rows: list[str], line: int) -> Candidate:
    """Returns the candidate of an entry's lines (without line breaks); raises _Unreadable."""
    head = _CANDIDATE_RE.match(rows[0])
    if not head:
        raise _Unreadable("the heading must read `### Candidate <id> · island <n> · fitness <value> · gen <N>`", line)
    at, bullets = _read_bullets(rows, 1, line)
    at, code, ref, language = _read_details(rows, at, line)
    _read_tail(rows, at, line)
    candidate = _from_bullets(bullets, line)
    return replace(
        candidate,
        id=int(head.group(1)),
        island=_island(head.group(2), line),
        fitness=_fitness(head.group(3), line),
        gen=int(head.group(4)),
        code=code,
        code_ref=ref,
        language=language,
    )


def _read_bullets(rows: list[str], at: int, line: int) -> tuple[int, list[tuple[str, str, int]]]:
    """Returns where the bullets end and each (label, value, line); a wrapped line continues its bullet."""
    bullets: list[tuple[str, str, int]] = []
    joined = False
    while at < len(rows) and not _BREAK_RE.match(rows[at]) and not _DETAILS_START_RE.match(rows[at]):
        row = rows[at]
        found = _BULLET_RE.match(row)
        if found:
            bullets.append((*_label(found.group(1) or ""), line + at))
        elif row.strip() and joined:
            label, value, where = bullets[-1]
            bullets[-1] = (label, f"{value} {row.strip()}".strip(), where)
        elif row.strip():
            raise _Unreadable("text outside a `- **Label**: value` bullet", line + at)
        joined = bool(row.strip())
        at += 1
    return at, bullets


def _label(content: str) -> tuple[str, str]:
    found = _LABEL_RE.match(content)
    return (found.group(1).strip(), found.group(2).strip()) if found else ("", content.strip())


def _read_details(rows: list[str], at: int, line: int) -> tuple[int, str | None, str | None, str]:
    """Returns where the `<details>` block ends, and the code, reference and language it holds."""
    if at >= len(rows) or not _DETAILS_START_RE.match(rows[at]):
        return at, None, None, "python"
    opened = _DETAILS_RE.match(rows[at])
    if not opened:
        raise _Unreadable("the code block must open with `<details><summary>Code</summary>`", line + at)
    end, fence = at + 1, None
    while end < len(rows) and (fence is not None or not _DETAILS_END_RE.match(rows[end])):
        fence = fence_step(fence, rows[end])
        end += 1
    if end >= len(rows):
        raise _Unreadable("`<details>` without its `</details>`", line + at)
    inner = [i for i in range(at + 1, end) if rows[i].strip()]
    if not opened.group(1) and inner and _SUMMARY_RE.match(rows[inner[0]]):
        inner = inner[1:]
    code, ref, language = _read_code(rows, inner, line)
    return end + 1, code, ref, language


def _read_code(rows: list[str], inner: list[int], line: int) -> tuple[str | None, str | None, str]:
    """Returns (code, reference, language) from the non-blank rows inside `<details>`."""
    if not inner:
        return None, None, "python"
    ref = _REF_RE.match(rows[inner[0]])
    if ref and len(inner) == 1:
        return None, ref.group(1).strip(), "python"
    opened = _fence_open(rows[inner[0]])
    if not opened:
        raise _Unreadable("inside `<details>` put a fenced code block or `Full source: ...`", line + inner[0])
    fence: tuple[str, int] | None = (opened[0][0], len(opened[0]))
    close = inner[0] + 1
    while fence is not None and close < len(rows):
        fence = fence_step(fence, rows[close])
        close += 1
    after = [i for i in inner if i >= close]
    if after:
        raise _Unreadable("text after the code block inside `<details>`", line + after[0])
    code = "".join(_dedent(row, opened[2]) + "\n" for row in rows[inner[0] + 1 : close - 1])
    return code, None, opened[1]


def _dedent(row: str, indent: int) -> str:
    spaces = len(row) - len(row.lstrip(" "))
    return row[min(spaces, indent) :]


def _read_tail(rows: list[str], at: int, line: int) -> None:
    """Checks that only blank lines and one `---` follow the entry's code."""
    seen_break = False
    for i in range(at, len(rows)):
        if not rows[i].strip():
            continue
        if _BREAK_RE.match(rows[i]) and not seen_break:
            seen_break = True
            continue
        raise _Unreadable("unexpected text after the entry (an entry ends with its code and `---`)", line + i)


def _from_bullets(bullets: list[tuple[str, str, int]], line: int) -> Candidate:
    """Returns a candidate (id, island, fitness, gen and code not yet set) from an entry's bullets."""
    values: dict[str, tuple[str, int]] = {}
    extra: list[tuple[str, str]] = []
    for label, value, at in bullets:
        key = _LABELS.get(re.sub("[^a-z]", "", label.lower())) if label else None
        if key is None:
            extra.append((label, value))
        elif key in values:
            raise _Unreadable(f"a second **{label}** bullet", at)
        elif key != "lines":
            values[key] = (value, at)
    for key in ("operator", "status"):
        if key not in values:
            raise _Unreadable(f"no **{key.capitalize()}** bullet", line)
    return Candidate(
        id=0,
        island=None,
        fitness=None,
        gen=0,
        operator=values["operator"][0],
        parents=_parents(*values.get("parents", ("", line))),
        cell=_cell(*values.get("cell", ("", line))),
        approach=values.get("approach", ("", line))[0],
        status=_status(*values["status"]),
        notes=values.get("notes", ("", line))[0],
        extra=tuple(extra),
    )


def _island(text: str, line: int) -> int | None:
    if text.lower() in _NONE_WORDS:
        return None
    if not re.fullmatch(_N, text):
        raise _Unreadable(f"island {text!r} is not a whole number (or — for none)", line)
    return int(text)


def _fitness(text: str, line: int) -> float | None:
    if text.lower() in ("null", "none"):
        return None
    value = finite_number(text)
    if value is None:
        raise _Unreadable(f"fitness {text!r} is not a number (write `null` for an error)", line)
    return value


def _parents(text: str, line: int) -> tuple[int, ...]:
    if text.lower() in _NONE_WORDS:
        return ()
    ids = [part.strip().lstrip("#") for part in text.split(",")]
    if not all(re.fullmatch(_N, i) for i in ids):
        raise _Unreadable(f"parents {text!r} must be ids separated by commas (or —)", line)
    return tuple(int(i) for i in ids)


def _cell(text: str, line: int) -> tuple[str, str] | None:
    if text.lower() in _NONE_WORDS:
        return None
    parts = [part.strip() for part in text.split("·")]
    if len(parts) != 2 or not all(parts):
        raise _Unreadable(f"feature cell {text!r} must read `<dimension 1> · <dimension 2>` (or —)", line)
    return parts[0], parts[1]


def _status(text: str, line: int) -> str:
    word = re.sub(r"^\W+|\W+$", "", text).lower()
    if word not in CANDIDATE_STATUSES:
        raise _Unreadable(f"status {text!r} is not one of ✅ accepted, ❌ rejected, ⚠️ error", line)
    return word


def _rows(block: list[str]) -> list[str]:
    return [row.rstrip("\n").removesuffix("\r") for row in block]


def _split_keep(text: str) -> list[str]:
    """Returns text's lines with their newlines, split on newlines only (str.splitlines also splits on form feeds)."""
    return _LINE_RE.findall(text)
