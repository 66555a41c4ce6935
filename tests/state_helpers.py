"""Shared helpers for the state-file tests: a fresh state, records, runs, and upstream's table reader."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from autoloop_py import markdown as md
from autoloop_py.errors import StateError
from autoloop_py.state.file import DEFAULT_BUDGET, IterationRecord, StateFile, apply_iteration, new_state, parse_state
from autoloop_py.state.population_fold import is_folded_block
from autoloop_py.state.population_model import Population, RawBlock

FIXTURE = Path(__file__).parent / "fixtures" / "upstream_state.md"
T0 = datetime(2026, 11, 21, 16, 40, tzinfo=timezone.utc)


def fresh(direction: str = "higher", target: float | None = None) -> StateFile:
    return new_state("demo", "Make the solver faster.", "score", direction, target)


def rec(status: str, i: int = 0, metric: float | None = None, **kw: Any) -> IterationRecord:
    """Returns a record i hours after T0; accepted and rejected ones default to metric 0.5."""
    if metric is None and status != "error":
        metric = 0.5
    return IterationRecord(status, T0 + timedelta(hours=i), f"change {i}", metric, **kw)


def run(state: StateFile, records: list[IterationRecord], direction: str = "higher",
        target: float | None = None, budget: int = DEFAULT_BUDGET) -> StateFile:
    for record in records:
        state = apply_iteration(state, record, direction=direction, target_metric=target, budget=budget)
    return state


def sections_by_key(text: str) -> dict[str, str]:
    return {s.key: s.text for s in md.split_sections(text, 2)}


def upstream_parse(text: str) -> dict[str, object]:
    """Re-implements upstream's scheduler reading of the Machine State table."""
    found = re.search(r"## ⚙️ Machine State.*?(?=\n## |\Z)", text, re.DOTALL)
    if not found:
        return {}
    state: dict[str, object] = {}
    for row in re.finditer(r"\|\s*(.+?)\s*\|\s*(.+?)\s*\|", found.group(0)):
        key, value = row.group(1).strip().lower().replace(" ", "_"), row.group(2).strip()
        if key == "field" or set(key) <= {"-"}:
            continue
        state[key] = None if value in ("—", "-", "") else value
    state["iteration_count"] = int(state.get("iteration_count") or 0)  # type: ignore[call-overload]
    state["paused"] = str(state.get("paused")).lower() == "true"
    state["completed"] = str(state.get("completed")).lower() == "true"
    raw = state.get("recent_statuses")
    state["recent_statuses"] = [s.strip().lower() for s in str(raw).split(",")] if raw else []
    return state


def table_file(*rows: str) -> str:
    """Returns a minimal state file whose Machine State table holds `rows`."""
    return "# Autoloop: x\n\n## ⚙️ Machine State\n\n| Field | Value |\n|---|---|\n" + "".join(r + "\n" for r in rows)


def assert_parse_error(text: str, line: int, words: str) -> None:
    """Asserts that parsing raises a StateError at `line` whose message contains `words`."""
    with pytest.raises(StateError) as caught:
        parse_state(text, "demo.md")
    assert caught.value.line == line
    assert str(caught.value.path) == "demo.md"
    assert words in caught.value.message
    assert str(caught.value).startswith(f"demo.md:{line}: ")


def folded_ids(population: Population) -> tuple[int, ...]:
    """Returns the ids the Population's folded-entries block names (empty when nothing is folded)."""
    ids: list[int] = []
    for block in population.layout:
        if isinstance(block, RawBlock) and is_folded_block(block.text):
            body = re.sub(r"`memory/autoloop:[^`]+`", "", block.text.split("\n", 1)[1] if "\n" in block.text else "")
            for first, last in re.findall(r"#([0-9]{1,15})(?:[–-]#([0-9]{1,15}))?", body):
                ids += range(int(first), int(last or first) + 1)
    return tuple(sorted(set(ids)))
