"""State file: the `<name>.md` on the memory branch — parse, render losslessly, update and compact.

The file is kept as its level-2 sections in source order, each holding its exact text, so
`render_state(parse_state(text)) == text`. Updates replace only the regions the runner owns:
the Machine State table lines (machine_state.py), the history entries it prepends or folds
(history.py), placeholder lines it removes and the bullets it appends to Lessons Learned.
Every other byte is re-emitted as read.
"""

from __future__ import annotations

import logging
import math
import re
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Union

from autoloop_py import markdown as md
from autoloop_py.errors import StateError
from autoloop_py.render import render
from autoloop_py.state import model_stats, prompt_stats, prose
from autoloop_py.state.history import (
    RECORD_STATUSES,
    TIGHT_FRACTION,
    HistoryEntry,
    HistorySection,
    IterationRecord,
    compact_entries,
    parse_history_section,
    prepend_entry,
    relabel_entry,
    render_entry,
)
from autoloop_py.state.machine import (
    MachineSection,
    MachineState,
    advance,
    check_direction,
    is_improvement,
    parse_machine_section,
    table_rows,
    with_baseline,
    with_spend,
    with_values,
)
from autoloop_py.state.parts import (
    SUMMARY_LIMIT,
    content_end,
    is_break,
    macro,
    one_line,
    trim,
)
from autoloop_py.state.schedule_table import improvement

logger = logging.getLogger(__name__)

DEFAULT_BUDGET = 30720

MACHINE = "machine state"
HISTORY = "iteration history"
LESSONS = "lessons learned"
PRIORITIES = "current priorities"
FORECLOSED = "foreclosed avenues"
FUTURE = "future directions"
POPULATION = "population"
MODELS = model_stats.MODELS
PROMPTS = prompt_stats.PROMPTS

_SECTION_MACROS = {
    PRIORITIES: "priorities_section",
    LESSONS: "lessons_section",
    FORECLOSED: "foreclosed_section",
    FUTURE: "future_section",
    HISTORY: "history_section",
}
_ODD_BREAKS_RE = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass(frozen=True)
class RawSection:
    """A section the runner reads but never rewrites as a whole (prose, unknown, preamble).

    Attributes:
      key: the normalised heading ('' for the text before the first heading).
      text: the exact source text.
    """

    key: str
    text: str


Section = Union[RawSection, MachineSection, HistorySection]


@dataclass(frozen=True)
class StateFile:
    """A parsed state file: its sections in source order, each with its exact text.

    Attributes:
      sections: the preamble and every level-2 section, in file order.
      path: where the file was read from, for messages.
    """

    sections: tuple[Section, ...]
    path: str = "state.md"

    @property
    def machine(self) -> MachineState:
        """Returns the Machine State values."""
        return next((s.machine for s in self.sections if isinstance(s, MachineSection)), MachineState())

    @property
    def history(self) -> tuple[HistoryEntry, ...]:
        """Returns the Iteration History entries, newest first."""
        return next((s.entries for s in self.sections if isinstance(s, HistorySection)), ())

    @property
    def lessons(self) -> tuple[str, ...]:
        """Returns the Lessons Learned items."""
        return prose.items(self.section_text(LESSONS))

    @property
    def priorities(self) -> tuple[str, ...]:
        """Returns the Current Priorities items (its paragraphs when it has no list)."""
        return prose.items(self.section_text(PRIORITIES), paragraphs=True)

    @property
    def foreclosed(self) -> tuple[str, ...]:
        """Returns the Foreclosed Avenues items."""
        return prose.items(self.section_text(FORECLOSED))

    def section_text(self, key: str) -> str | None:
        """Returns the text of the first section whose normalised heading is `key`."""
        return next((section.text for section in self.sections if section.key == key), None)


# ---------------------------------------------------------------- creating and reading


def new_state(name: str, goal: str, metric: str, direction: str, target_metric: float | None) -> StateFile:
    """Returns the state of a program that has never run, rendered from the skeleton."""
    check_direction(direction)
    machine = MachineState(metric_direction=direction, target_metric=target_metric, branch=f"autoloop/{name}")
    text = render(
        "state.md.j2",
        name=name,
        goal=trim(one_line(goal.strip().split("\n\n")[0]), SUMMARY_LIMIT) or "—",
        metric=metric,
        direction=direction,
        branch=machine.branch,
        rows=table_rows(machine),
    )
    return parse_state(text, f"{name}.md")


def load_state(
    text: str | None, path: str, *, name: str, goal: str, metric: str, direction: str, target_metric: float | None
) -> StateFile:
    """Returns the parsed state, or a fresh one when the file is absent or empty (a first run)."""
    if text is None or not text.strip():
        return replace(new_state(name, goal, metric, direction, target_metric), path=path)
    return parse_state(text, path)


def parse_state(text: str, path: str = "state.md") -> StateFile:
    """Parses a state file; raises StateError naming the line when it cannot be trusted."""
    known = _KNOWN.pop((text, path), None)
    return remember(known if known is not None else _parse_state(text, path), text)


def remember(state: StateFile, text: str | None = None) -> StateFile:
    """Returns `state`, kept as the parse of its text (`text`: its rendering, when the caller has it).

    A run reads the same text several times (pick, load, record), and a file of megabytes takes seconds to parse.
    A state the runner rendered is kept too: an update's state equals the parse of its text (tests/longrun asserts
    it after every record), so the next iteration reads it without parsing. Errors are not kept.
    """
    _KNOWN[(render_state(state) if text is None else text, state.path)] = state
    while len(_KNOWN) > _KEPT_STATES:
        _KNOWN.popitem(last=False)
    return state


_KEPT_STATES = 4
_KNOWN: OrderedDict[tuple[str, str], StateFile] = OrderedDict()


def _parse_state(text: str, path: str) -> StateFile:
    if not text.strip():
        raise StateError("the state file is empty; delete it to start the program afresh", path, 1)
    _check_line_breaks(text, path)
    sections: list[Section] = []
    seen: dict[str, int] = {}
    for found in md.split_sections(text, 2):
        if found.key in (MACHINE, HISTORY) and found.key in seen:
            raise StateError(
                f"a second '{found.heading.text if found.heading else ''}' section (the first is at line "
                f"{seen[found.key]}); merge them into one",
                path,
                found.start + 1,
            )
        seen.setdefault(found.key, found.start + 1)
        sections.append(_parse_section(found, path))
    if MACHINE not in seen:
        raise StateError(
            "no '## ⚙️ Machine State' section, so pause and completion cannot be read; "
            "restore the section (see the state template) or delete the file to start afresh",
            path,
            1,
        )
    return StateFile(tuple(sections), path)


def render_state(state: StateFile) -> str:
    """Returns the file text: every section's text, in order."""
    return "".join(section.text for section in state.sections)


def _check_line_breaks(text: str, path: str) -> None:
    found = _ODD_BREAKS_RE.search(text)
    if found:
        line = text.count("\n", 0, found.start()) + 1
        raise StateError(
            f"unusual line-break character U+{ord(found.group()):04X}; replace it with a newline", path, line
        )


def _parse_section(found: md.Section, path: str) -> Section:
    if found.key == MACHINE:
        return parse_machine_section(found, path)
    if found.key == HISTORY:
        return parse_history_section(found)
    return RawSection(found.key, found.text)


def with_machine(state: StateFile, machine: MachineState) -> StateFile:
    """Returns the state with new Machine State values; only the table lines are rewritten."""
    sections = [with_values(s, machine) if isinstance(s, MachineSection) else s for s in state.sections]
    return replace(state, sections=tuple(sections))


# ---------------------------------------------------------------- sections


def _history_index(state: StateFile) -> int | None:
    return next((i for i, s in enumerate(state.sections) if isinstance(s, HistorySection)), None)


def _history_section(state: StateFile) -> HistorySection | None:
    return next((s for s in state.sections if isinstance(s, HistorySection)), None)


def _set_history(state: StateFile, history: HistorySection) -> StateFile:
    """Returns the state with its Iteration History section (one at most: parse_state refuses two) replaced."""
    return replace(state, sections=tuple(history if isinstance(s, HistorySection) else s for s in state.sections))


def _ensure_section(state: StateFile, key: str) -> StateFile:
    """Returns the state with a section for `key`; a missing one is added from the skeleton, logged."""
    if state.section_text(key) is not None:
        return state
    skeleton = macro(_SECTION_MACROS[key])
    section = parse_history_section(md.split_sections(skeleton)[-1]) if key == HISTORY else RawSection(key, skeleton)
    logger.info("%s: added the missing '%s' section", state.path, key)
    return _add_section(state, section, _history_index(state))


def _add_section(state: StateFile, section: Section, at: int | None) -> StateFile:
    """Returns the state with a new section at index `at`, a `---` line after it; at the end (after one) when None."""
    sections = list(state.sections)
    if at is not None:
        sections.insert(at, _append_text(section, "\n---\n\n"))
    else:
        sections[-1] = _append_text(sections[-1], _separator_after(sections[-1].text))
        sections.append(section)
    return replace(state, sections=tuple(sections))


def _separator_after(text: str) -> str:
    """Returns what to append to the last section so that a new one follows a `---` line."""
    lines = text.splitlines(keepends=True)
    newline = "" if text.endswith(("\n", "\r")) else "\n"
    if any(is_break(line) for line in lines[content_end(lines) :]):
        return newline + ("" if (text + newline).endswith("\n\n") else "\n")
    return newline + "\n---\n\n"


def _append_text(section: Section, suffix: str) -> Section:
    if isinstance(section, RawSection):
        return replace(section, text=section.text + suffix)
    return replace(section, tail=section.tail + suffix)


def with_section(state: StateFile, key: str, text: str) -> StateFile:
    """Returns the state with a runner-owned raw section (e.g. the Population) replaced, or appended when missing."""
    sections = list(state.sections)
    for index, section in enumerate(sections):
        if section.key == key:
            if not isinstance(section, RawSection):
                raise ValueError(f"section {key!r} is not a raw section")
            sections[index] = RawSection(key, text)
            return replace(state, sections=tuple(sections))
    return _add_section(state, RawSection(key, text), None)


# ---------------------------------------------------------------- prose sections


def add_lesson(state: StateFile, lesson: str) -> StateFile:
    """Returns the state with a lesson appended to Lessons Learned, unless it is already there."""
    return add_item(state, LESSONS, lesson)


def add_item(state: StateFile, key: str, item: str) -> StateFile:
    """Returns the state with `- item` appended to the list of a prose section (created if missing)."""
    if key not in _SECTION_MACROS or key == HISTORY:
        raise ValueError(f"{key!r} is not a prose section of the state file")
    item = one_line(item)
    if not item or prose.has_item(state.section_text(key), item):
        return state
    state = _ensure_section(state, key)
    sections = list(state.sections)
    index = next(i for i, s in enumerate(sections) if s.key == key)
    sections[index] = RawSection(key, prose.append_item(sections[index].text, item))
    return replace(state, sections=tuple(sections))


# ---------------------------------------------------------------- updates


def apply_iteration(
    state: StateFile,
    record: IterationRecord,
    *,
    direction: str,
    target_metric: float | None,
    min_delta: float = 0.0,
    budget: int = DEFAULT_BUDGET,
) -> StateFile:
    """Returns the state after one iteration: table updated, entry prepended, lesson added, compacted."""
    _check_record(record)
    check_direction(direction)
    before = with_baseline(state.machine, record.baseline)
    after = advance(before, record, direction, target_metric, min_delta)
    state = with_machine(state, after)
    gain = improvement(before.best_metric, record.metric, direction)
    state = _with_model_use(state, record, gain)
    state = _with_prompt_use(state, record, gain)
    state = _prepend_entry(state, render_entry(record, after.iteration_count, before.best_metric))
    if record.lesson:
        state = add_lesson(state, record.lesson)
    return compact(state, budget)


def models_of(state: StateFile) -> model_stats.ModelTable:
    """Returns the Models table (empty before any model call); raises StateError naming a malformed row's line."""
    return model_stats.parse_models_section(state.section_text(MODELS), state.path, section_line(state, MODELS))


def with_model_spend(state: StateFile, use: model_stats.ModelUse, when: datetime) -> StateFile:
    """Returns the state with model calls made outside an iteration (customize, judge, replay) in Spent and Models."""
    tokens = sum(used for used, _ in use.spend.values())
    costs = [usd for _, usd in use.spend.values() if usd is not None]
    record = IterationRecord("rejected", when, "model calls", None, tokens=tokens or None,
                             cost=sum(costs) if costs else None, extra=model_stats.use_bullets(use))
    state = with_machine(state, with_spend(state.machine, record))
    return _with_model_use(state, record, 0.0)


def prompts_of(state: StateFile) -> prompt_stats.PromptTable:
    """Returns the Prompts table (empty when people wrote none); raises StateError naming a malformed row's line."""
    return prompt_stats.parse_prompts_section(state.section_text(PROMPTS), state.path, section_line(state, PROMPTS))


def _with_model_use(state: StateFile, record: IterationRecord, gain: float) -> StateFile:
    """Returns the state with the record's model use added to the Models table (created before the history)."""
    use = model_stats.use_of(record)
    if use.proposer is None and not use.spend:
        return state
    table = model_stats.with_record(models_of(state), record, gain)
    return _with_table(state, MODELS, model_stats.render_models_section(table))


def _with_prompt_use(state: StateFile, record: IterationRecord, gain: float) -> StateFile:
    """Returns the state with the record's prompt variant credited in the Prompts table (created before the history)."""
    if prompt_stats.use_of(record) == (None, None):
        return state
    table = prompt_stats.with_record(prompts_of(state), record, gain)
    return _with_table(state, PROMPTS, prompt_stats.render_prompts_section(table))


def _with_table(state: StateFile, key: str, rendered: str) -> StateFile:
    """Returns the state with a runner-rendered table section replaced, or inserted before the history when new."""
    if state.section_text(key) is not None:
        return with_section(state, key, rendered)
    return _add_section(state, RawSection(key, rendered), _history_index(state))


def _check_record(record: IterationRecord) -> None:
    if record.status not in RECORD_STATUSES:
        raise ValueError(f"record status {record.status!r} is not one of {RECORD_STATUSES}")
    if record.status in ("accepted", "pending-ci") and record.metric is None:
        raise ValueError(f"record status {record.status!r} needs its metric")
    for value in (record.metric, record.baseline):
        if value is not None and not math.isfinite(value):
            raise ValueError(f"metric {value!r} is not a finite number")


def with_entry_status(state: StateFile, iteration: int, label: str) -> StateFile:
    """Returns the state with the Status bullet of history entry `Iteration N` set to `label` (entry-level edit)."""
    history = _history_section(state)
    if history is None:
        return state
    updated = relabel_entry(history, iteration, label)
    if updated == history:
        logger.info("%s: no Iteration %d entry with a Status bullet to set to %r", state.path, iteration, label)
    return _set_history(state, updated)


def _prepend_entry(state: StateFile, entry_text: str) -> StateFile:
    state = _ensure_section(state, HISTORY)
    history = _history_section(state)
    assert history is not None
    return _set_history(state, prepend_entry(history, entry_text))


# ---------------------------------------------------------------- compaction


def compact(state: StateFile, budget: int = DEFAULT_BUDGET) -> StateFile:
    """Returns the state with old history folded: 10 detailed entries kept (5 above 80 % of the budget)."""
    history = _history_section(state)
    if history is None:
        return state

    def size(entries: tuple[HistoryEntry, ...]) -> int:
        return _size(_set_history(state, replace(history, entries=entries)))

    entries = compact_entries(history.entries, budget, size)
    if entries != history.entries:
        state = _set_history(state, replace(history, entries=entries))
    if _size(state) > budget:
        logger.warning(
            "%s: %d bytes after compaction, over the %d-byte budget; shorten the prose sections",
            state.path,
            _size(state),
            budget,
        )
    return state


def _size(state: StateFile) -> int:
    return len(render_state(state).encode("utf-8"))


def section_line(state: StateFile, key: str) -> int:
    """Returns the 0-based line where the section `key` starts (the end of the file when it is missing)."""
    line = 0
    for section in state.sections:
        if section.key == key:
            return line
        line += len(section.text.splitlines())
    return line
