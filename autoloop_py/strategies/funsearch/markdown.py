"""FunSearch's `### ⚙️ Strategy State` block: the islands and clusters rendered, and parsed back (§4.7)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from autoloop_py import markdown as md
from autoloop_py.render import render
from autoloop_py.state.population import format_fitness
from autoloop_py.strategies.block import BlockReader, cell_text, count, finite
from autoloop_py.strategies.funsearch.config import FunSearchConfig
from autoloop_py.strategies.funsearch.state import (
    FIELDS,
    NONE_WORDS,
    Cluster,
    FunSearchState,
    Island,
    Member,
    Signature,
    format_signature,
    sorted_members,
)

_MEMBER_RE = re.compile(r"\s*#?([0-9]{1,15})\s*\(\s*([0-9]{1,15})\s*(?:,\s*([0-9A-Za-z]+)\s*)?\)\s*(,|$)")


def render_state_block(state: FunSearchState, config: FunSearchConfig) -> str:
    """Returns the `### ⚙️ Strategy State` block; the Temperature* column is recomputed from config."""
    fields = [(name, _optional(getattr(state, name))) for name in FIELDS if name != "evicted" or state.evicted]
    islands = [
        (
            str(i.index),
            str(i.version),
            str(i.num_programs),
            "—" if i.best_score is None else format_fitness(i.best_score),
            _optional(i.best_id),
            f"{config.temperature(i.num_programs):.6g}",
        )
        for i in state.islands
    ]
    clusters = [
        (str(i.index), format_signature(c.signature), format_fitness(c.score), _members_text(c.members))
        for i in state.islands
        for c in i.clusters
    ]
    return render("funsearch_state.md.j2", view={"fields": fields, "islands": islands, "clusters": clusters})


def _optional(value: int | None) -> str:
    return "—" if value is None else str(value)


def _members_text(members: tuple[Member, ...]) -> str:
    if not members:
        return "—"
    return ", ".join(f"{m.id} ({m.length}{', ' + m.output_hash if m.output_hash else ''})" for m in members)


# ---------------------------------------------------------------- parsing


def parse_state_block(text: str, path: str = "state.md", first_line: int = 0) -> FunSearchState:
    """Returns the state a block holds ('' → the initial state); raises StateError naming the line.

    first_line is the 0-based line of the block in its file.
    """
    where = BlockReader(path, first_line)
    state = FunSearchState()
    islands: dict[int, Island] = {}
    cluster_tables: list[md.Table] = []
    for table in md.tables(text):
        names = tuple(md.normalize_heading(cell) for cell in table.header)
        if names[:2] == ("field", "value"):
            state = _read_fields(table, where)
        elif names[:1] == ("island",) and "version" in names:
            islands = _read_islands(table, where)
        elif names[:1] == ("island",) and "signature" in names:
            cluster_tables.append(table)
        else:
            raise where.error(
                f"a table with columns {' | '.join(table.header)} is not part of FunSearch's state; "
                "move it out of the Strategy State block",
                table.start,
            )
    for table in cluster_tables:
        islands = _read_clusters(table, islands, where)
    return replace(state, islands=tuple(islands[i] for i in sorted(islands)))


def _read_fields(table: md.Table, where: BlockReader) -> FunSearchState:
    """Returns the initial state with the `| Field | Value |` rows applied."""
    values: dict[str, Any] = {}
    for name, (cell, line) in where.fields([table], FIELDS, strict=True).items():
        none = name in ("last_reset_at", "rng_seed") and cell.strip().lower() in NONE_WORDS
        values[name] = None if none else where.value(cell, line, count, f"field `{name}`")
    return FunSearchState(**values)


def _read_islands(table: md.Table, where: BlockReader) -> dict[int, Island]:
    """Returns the Islands table's islands by index (the Temperature* column is ignored)."""
    columns = where.columns(table, ("Island", "Version", "Programs", "Best score", "Best id"))
    islands: dict[int, Island] = {}
    for row in table.rows:
        index, version, programs, best, best_id = (cell_text(row, i) for i in columns.values())
        number = where.value(index, row.line, count, "island")
        if number in islands:
            raise where.error(f"island {number} has two rows; keep one", row.line)
        islands[number] = Island(
            index=number,
            version=where.value(version, row.line, count, "version"),
            num_programs=where.value(programs, row.line, count, "programs"),
            best_score=_optional_number(best, "best score", where, row.line),
            best_id=None if best_id.lower() in NONE_WORDS else where.value(best_id.lstrip("#"), row.line, count,
                                                                           "best id"),
        )
    return islands


def _read_clusters(table: md.Table, islands: dict[int, Island], where: BlockReader) -> dict[int, Island]:
    """Returns the islands with the Clusters table's rows added to them, in row order."""
    columns = where.columns(table, ("Island", "Signature", "Score", "Members"))
    found: dict[int, list[Cluster]] = {index: list(island.clusters) for index, island in islands.items()}
    for row in table.rows:
        index_text, signature_text, score_text, members_text = (cell_text(row, i) for i in columns.values())
        index = where.value(index_text, row.line, count, "island")
        if index not in found:
            raise where.error(f"cluster of island {index}, which has no row in the Islands table; add it", row.line)
        signature = _signature(signature_text, where, row.line)
        if any(c.signature == signature for c in found[index]):
            raise where.error(f"island {index} has two clusters {format_signature(signature)}; merge them", row.line)
        score = where.value(score_text, row.line, finite, "score")
        found[index].append(Cluster(signature, score, _members(members_text, where, row.line)))
    return {index: replace(island, clusters=tuple(found[index])) for index, island in islands.items()}


def _optional_number(text: str, what: str, where: BlockReader, line: int) -> float | None:
    return None if text.lower() in NONE_WORDS else where.value(text, line, finite, what)


def _signature(text: str, where: BlockReader, line: int) -> Signature:
    inner = text.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        raise where.error(f"signature {text!r} must read like `(10, 16)`", line)
    parts = [part.strip() for part in inner[1:-1].split(",")]
    parts = parts[:-1] if len(parts) > 1 and not parts[-1] else parts
    if not parts or not parts[0]:
        raise where.error(f"signature {text!r} is empty; it lists the per-test scores, like `(10, 16)`", line)
    return tuple(where.value(part, line, finite, "signature score") for part in parts)


def _members(text: str, where: BlockReader, line: int) -> tuple[Member, ...]:
    """Returns the members of a cell like `12 (340, 9f2c), 31 (512)`, shortest first."""
    if text.strip().lower() in NONE_WORDS:
        return ()
    members: list[Member] = []
    position = 0
    while position < len(text):
        found = _MEMBER_RE.match(text, position)
        if found is None or (found.group(4) == "," and found.end() == len(text)):
            raise where.error(
                f"members {text!r} must read like `12 (340, 9f2c), 31 (512)`: id (chars[, output hash])", line
            )
        members.append(Member(int(found.group(1)), int(found.group(2)), found.group(3)))
        position = found.end()
    return sorted_members(members)
