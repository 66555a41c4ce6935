"""EvoX's `### ⚙️ Strategy State` block (§3.8): render the controller, the label texts and every strategy; parse back.

Strategy entries sit under `##### Strategy S<k> · …` headings so that they nest inside the block's
`####` sections (a `###` heading would end the block). Label texts and code sit in fenced blocks
inside `<details>`, which a line scanner reads back exactly; the field table is read through mistune.
A folded strategy shows `- **Code**: <path> on memory/autoloop` instead of its code (evox_fold.py);
one whose code was read back shows both.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Any, Callable

from autoloop_py import markdown as md
from autoloop_py.render import render
from autoloop_py.state.memory import MEMORY_BRANCH
from autoloop_py.state.population import format_fitness
from autoloop_py.state.population_markdown import fence_step
from autoloop_py.strategies.block import BlockReader, count, finite
from autoloop_py.strategies.evox.config import EvoXConfig
from autoloop_py.strategies.evox.strategy import STATUSES, EvoXState, StrategyRecord, initial_state
from autoloop_py.strategies.prompt import fence_for, with_newline

NONE = "—"
FIELDS = (
    "switch_interval", "stagnant_count", "last_tracked_best", "evolve_due", "window_start_iteration",
    "window_start_score", "window_bests", "active", "pending", "fallback", "best_strategy_J", "evolutions",
    "meta_failures", "meta_failures_in_row", "meta_backoff", "labels", "rng_seed", "rng_draws",
)
LABEL_TITLES = ("DIVERGE", "REFINE")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*$")
_ENTRY_RE = re.compile(
    r"^Strategy S(\d+) · J (\S+) · window (—|(\d+)–(\d+)) · status (\S+)$"
)
_BULLET_RE = re.compile(r"^\s*[-*+]\s+\*\*([^*]+)\*\*:\s?(.*)$")
_SUMMARY_RE = re.compile(r"^\s*<details>\s*<summary>\s*(.*?)\s*</summary>\s*$", re.IGNORECASE)
_CODE_REF_RE = re.compile(r"`?([^`]+?)`?\s+on\s+`?[^`\s]+`?")


# ---------------------------------------------------------------- rendering


def render_state_block(state: EvoXState, direction: str) -> str:
    """Returns the `### ⚙️ Strategy State` block of the state (strategies newest first)."""
    view = {
        "fields": _field_rows(state, direction),
        "labels": [(title, fence_for(text), with_newline(text)) for title, text in
                   zip(LABEL_TITLES, (state.diverge_label, state.refine_label))],
        "strategies": [_entry_view(s, state, direction) for s in reversed(state.strategies)],
    }
    return render("evox_state.md.j2", view=view)


def _field_rows(state: EvoXState, direction: str) -> list[tuple[str, str]]:
    values = {
        "switch_interval": str(state.switch_interval), "stagnant_count": str(state.stagnant_count),
        "last_tracked_best": raw_text(state.last_tracked_best, direction),
        "evolve_due": "yes" if state.evolve_due else "no",
        "window_start_iteration": str(state.window_start_iteration),
        "window_start_score": raw_text(state.window_start_score, direction),
        "window_bests": ", ".join(raw_text(b, direction) for b in state.window_bests) or NONE,
        "active": f"S{state.active}", "pending": _sid(state.pending), "fallback": _sid(state.fallback),
        "best_strategy_J": NONE if state.best_strategy_j is None else format_fitness(state.best_strategy_j),
        "evolutions": str(state.evolutions), "meta_failures": str(state.meta_failures),
        "meta_failures_in_row": str(state.meta_failures_in_row), "meta_backoff": str(state.meta_backoff),
        "labels": state.labels,
        "rng_seed": str(state.rng_seed), "rng_draws": str(state.rng_draws),
    }
    return [(name, values[name]) for name in FIELDS]


def _entry_view(s: StrategyRecord, state: EvoXState, direction: str) -> dict[str, Any]:
    j = format_fitness(s.j) if s.j is not None else "pending" if s.status == "active" else NONE
    if s.window_start is None:
        window = NONE
    else:
        end = s.window_end if s.window_end is not None else s.window_start + state.switch_interval
        window = f"{s.window_start}–{end}"
    bullets = [
        ("Parent strategy", _sid(s.parent)),
        ("Score change", f"{raw_text(s.start_score, direction)} → {raw_text(s.end_score, direction)}"),
        ("Validation", s.validation or NONE),
        ("Checksum", s.checksum or NONE),
        ("Summary", s.note or NONE),
    ]
    if s.code_ref is not None:
        bullets.append(("Code", f"{s.code_ref} on {MEMORY_BRANCH}"))
    return {"id": s.id, "j": j, "window": window, "status": s.status, "bullets": bullets,
            "show_code": s.code_ref is None or bool(s.code), "fence": fence_for(s.code), "code": with_newline(s.code)}


def raw_text(value: float | None, direction: str) -> str:
    """Returns an oriented value as its raw metric text ('—' for None)."""
    return NONE if value is None else format_fitness(value if direction == "higher" else -value)


def _sid(value: int | None) -> str:
    return NONE if value is None else f"S{value}"


# ---------------------------------------------------------------- parsing


@dataclass(frozen=True)
class _Reader(BlockReader):
    """A block reader that also orients raw metric cells.

    Attributes:
      direction: the metric direction, "higher" or "lower".
    """

    direction: str = "higher"

    def score(self, text: str) -> float | None:
        """Converts a raw metric cell to its oriented value ('—' is None)."""
        if text == NONE:
            return None
        raw = finite(text)
        return raw if self.direction == "higher" else -raw


def _strategy_id(text: str) -> int:
    found = re.fullmatch(r"S([0-9]{1,9})", text)
    if not found:
        raise ValueError("a strategy id such as S2")
    return int(found.group(1))


def _code_ref(text: str) -> str:
    found = _CODE_REF_RE.fullmatch(text)
    if not found:
        raise ValueError(f"`<path> on {MEMORY_BRANCH}`")
    return found.group(1)


def _optional_id(text: str) -> int | None:
    return None if text == NONE else _strategy_id(text)


def _yes_no(text: str) -> bool:
    if text not in ("yes", "no"):
        raise ValueError("yes or no")
    return text == "yes"


def _label_state(text: str) -> str:
    if text not in ("pending", "default", "generated", "failed"):
        raise ValueError("pending, default, generated or failed")
    return text


def parse_state_block(text: str, path: str, first_line: int, config: EvoXConfig) -> EvoXState:
    """Returns the state a block holds ('' gives the initial state); raises StateError naming the line."""
    if not text.strip():
        return initial_state(config)
    reader = _Reader(path, first_line, config.direction)
    lines = text.splitlines()
    outline = _outline(lines)
    fours = [(line, key) for line, level, key in outline if level <= 4 and line > 0]
    bounds = {key: (line, next((n for n, _ in fours if n > line), len(lines))) for line, key in fours}
    head_end = fours[0][0] if fours else len(lines)
    state = _with_fields(EvoXState(switch_interval=config.interval, strategies=()),
                         reader.fields(md.tables("\n".join(lines[:head_end])), FIELDS, strict=True), reader)
    if "variation operators" in bounds:
        state = _with_labels(state, lines, bounds["variation operators"], reader)
    if "search strategies" not in bounds:
        raise reader.error("the strategy state has no `#### Search strategies` section; restore it from git history", 0)
    strategies = _strategies(lines, bounds["search strategies"], outline, state, reader)
    return _checked(replace(state, strategies=strategies), lines, reader)


def _outline(lines: list[str]) -> list[tuple[int, int, str]]:
    """Returns (line, level, normalised text) of each ATX heading outside fenced code."""
    found: list[tuple[int, int, str]] = []
    fence: tuple[str, int] | None = None
    for index, line in enumerate(lines):
        if fence is None:
            heading = _HEADING_RE.match(line)
            if heading:
                found.append((index, len(heading.group(1)), heading.group(2)))
                continue
        fence = fence_step(fence, line)
    return [(n, level, text if level == 5 else md.normalize_heading(text)) for n, level, text in found]


def _fenced(lines: list[str], start: int, end: int) -> tuple[str, int, int] | None:
    """Returns (content, open line, line after the close) of the first fenced block in [start, end)."""
    for index in range(start, end):
        opened = fence_step(None, lines[index])
        if opened is None:
            continue
        for close in range(index + 1, end):
            if fence_step(opened, lines[close]) is None:
                body = lines[index + 1:close]
                return "".join(line + "\n" for line in body), index, close + 1
        return None
    return None


def _with_fields(state: EvoXState, rows: dict[str, tuple[str, int]], reader: _Reader) -> EvoXState:
    get = functools.partial(reader.field, rows)
    return replace(
        state,
        switch_interval=max(1, get("switch_interval", count, state.switch_interval)),
        stagnant_count=get("stagnant_count", count, 0), last_tracked_best=get("last_tracked_best", reader.score, None),
        evolve_due=get("evolve_due", _yes_no, False), window_start_iteration=get("window_start_iteration", count, 0),
        window_start_score=get("window_start_score", reader.score, None),
        window_bests=_bests(rows.get("window_bests"), reader),
        active=get("active", _strategy_id, 0), pending=get("pending", _optional_id, None),
        fallback=get("fallback", _optional_id, None),
        best_strategy_j=None if get("best_strategy_J", str, NONE) == NONE else get("best_strategy_J", finite, None),
        evolutions=get("evolutions", count, 0), meta_failures=get("meta_failures", count, 0),
        meta_failures_in_row=get("meta_failures_in_row", count, 0), meta_backoff=get("meta_backoff", count, 0),
        labels=get("labels", _label_state, "pending"), rng_seed=get("rng_seed", count, state.rng_seed),
        rng_draws=get("rng_draws", count, 0),
    )


def _bests(row: tuple[str, int] | None, reader: _Reader) -> tuple[float, ...]:
    if row is None or row[0].strip() == NONE:
        return ()
    scores = [reader.value(part, row[1], reader.score, "a window best") for part in row[0].split(",")]
    return tuple(s for s in scores if s is not None)


def _with_labels(state: EvoXState, lines: list[str], bounds: tuple[int, int], reader: _Reader) -> EvoXState:
    """Returns the state with the DIVERGE and REFINE texts of the `<details>` blocks."""
    found: dict[str, str] = {}
    index = bounds[0]
    while index < bounds[1]:
        summary = _SUMMARY_RE.match(lines[index])
        index += 1
        if summary and summary.group(1).upper() in LABEL_TITLES:
            block = _fenced(lines, index, bounds[1])
            if block is None:
                what = summary.group(1)
                raise reader.error(f"the {what} text must sit in a fenced block under its summary", index - 1)
            found[summary.group(1).upper()] = block[0].removesuffix("\n")
            index = block[2]
    return replace(state, diverge_label=found.get("DIVERGE", ""), refine_label=found.get("REFINE", ""))


def _strategies(lines: list[str], bounds: tuple[int, int], outline: list[tuple[int, int, str]], state: EvoXState,
                reader: _Reader) -> tuple[StrategyRecord, ...]:
    """Returns the strategy entries, oldest first."""
    heads = [n for n, level, _ in outline if level == 5 and bounds[0] < n < bounds[1]]
    records = [_entry(lines, head, end, state, reader) for head, end in zip(heads, [*heads[1:], bounds[1]])]
    seen: set[int] = set()
    for record, head in zip(records, heads):
        if record.id in seen:
            raise reader.error(f"strategy S{record.id} appears twice; give the copy an unused id or delete it", head)
        seen.add(record.id)
    return tuple(sorted(records, key=lambda r: r.id))


def _entry(lines: list[str], head: int, end: int, state: EvoXState, reader: _Reader) -> StrategyRecord:
    """Returns one strategy entry: heading, bullets and the code under `<details>`."""
    title = _HEADING_RE.match(lines[head])
    found = _ENTRY_RE.match(title.group(2) if title else "")
    if not found:
        raise reader.error("a strategy heading must read `##### Strategy S<k> · J <value|pending|—> · "
                           "window <a>–<b>|— · status <status>`", head)
    status = found.group(6)
    if status not in STATUSES:
        raise reader.error(f"status {status!r} must be one of {', '.join(STATUSES)}", head)
    bullets = _bullets(lines, head + 1, end)
    code = _fenced(lines, head + 1, end)
    code_ref = _text_bullet(bullets, "Code", reader, _code_ref, None)
    if code is None and code_ref is None:
        raise reader.error(f"strategy S{found.group(1)} has no code; put its source in a ```python block, or name "
                           f"the file that holds it with `- **Code**: <path> on {MEMORY_BRANCH}`", head)
    j_text = found.group(2)
    j = None if j_text in ("pending", NONE) else reader.value(j_text, head, finite, "J")
    start = None if found.group(4) is None else int(found.group(4))
    start_score, end_score = _change(bullets.get("Score change", (f"{NONE} → {NONE}", head)), reader)
    return StrategyRecord(
        id=int(found.group(1)), code=code[0] if code is not None else "", status=status, j=j, window_start=start,
        window_end=int(found.group(5)) if j is not None and start is not None else None,
        start_score=start_score, end_score=end_score,
        parent=_text_bullet(bullets, "Parent strategy", reader, _optional_id, None),
        validation=_text_bullet(bullets, "Validation", reader, str, ""),
        checksum=_text_bullet(bullets, "Checksum", reader, str, ""),
        note=_text_bullet(bullets, "Summary", reader, str, ""), code_ref=code_ref,
    )


def _bullets(lines: list[str], start: int, end: int) -> dict[str, tuple[str, int]]:
    found: dict[str, tuple[str, int]] = {}
    for index in range(start, end):
        if _SUMMARY_RE.match(lines[index]):
            break
        bullet = _BULLET_RE.match(lines[index])
        if bullet:
            found[bullet.group(1).strip()] = (bullet.group(2).strip(), index)
    return found


def _text_bullet(bullets: dict[str, tuple[str, int]], name: str, reader: _Reader, kind: Callable[[str], Any],
                 default: Any) -> Any:
    if name not in bullets or bullets[name][0] == NONE:
        return default
    return reader.value(bullets[name][0], bullets[name][1], kind, name)


def _change(bullet: tuple[str, int], reader: _Reader) -> tuple[float | None, float | None]:
    parts = bullet[0].split("→")
    if len(parts) != 2:
        raise reader.error(f"score change {bullet[0]!r} must read `<start> → <end>` (— when unknown)", bullet[1])
    return (reader.value(parts[0], bullet[1], reader.score, "the start score"),
            reader.value(parts[1], bullet[1], reader.score, "the end score"))


def _checked(state: EvoXState, lines: list[str], reader: _Reader) -> EvoXState:
    """Returns the state once its strategy references resolve; raises StateError on the field's row."""
    ids = {s.id for s in state.strategies}
    if not ids:
        raise reader.error("the strategy state lists no strategy; restore the `##### Strategy S0` entry", 0)
    for name in ("active", "pending", "fallback"):
        value = getattr(state, name)
        if value is not None and value not in ids:
            row = next((n for n, line in enumerate(lines) if line.startswith(f"| {name} |")), 0)
            raise reader.error(f"{name} S{value} is not a listed strategy; name one of the `##### Strategy` entries",
                               row)
    return state
