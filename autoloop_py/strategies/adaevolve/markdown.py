"""AdaEvolve's `### ⚙️ Strategy State` block: render the state and parse it back (§2.7).

The block holds primary values only; columns marked `*` are recomputed on render and ignored on
parse. Tables are read through mistune; the idea lists are read line by line because each item
carries an HTML `<details>` block, inside which a markdown parser stops seeing list structure.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Sequence

from autoloop_py import markdown as md
from autoloop_py.render import render
from autoloop_py.state.population import Candidate, format_fitness
from autoloop_py.strategies.adaevolve.archive import in_archive
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.state import (
    NEG_INF,
    STARTING_PRESET,
    AdaEvolveState,
    IslandState,
    Paradigm,
    TriedParadigm,
    initial_state,
    intensity,
    raw_value,
    ucb_score,
)
from autoloop_py.strategies.block import BlockReader, cell_text, count, finite

NONE = "—"


# ---------------------------------------------------------------- rendering


def render_state_block(state: AdaEvolveState, config: AdaEvolveConfig, population: Sequence[Candidate] = ()) -> str:
    """Returns the `### ⚙️ Strategy State` block; Members* counts each island's archive in population."""
    members = [sum(1 for c in population if c.island == k and in_archive(c, config.direction))
               for k in range(len(state.islands))]
    direction = config.direction
    view = {
        "fields": _general_rows(state, direction),
        "islands": [_island_row(k, island, state, config, members[k]) for k, island in enumerate(state.islands)],
        "paradigm_fields": _paradigm_rows(state, direction),
        "ideas": [
            {"tag": f"uses {p.uses}/{config.paradigm_max_uses}" + (" · retired" if p.retired else ""), "p": p}
            for p in state.paradigms
        ],
        "tried": [(t.outcome, t.approach_type, t.idea, f"{t.gain:+.4f}") for t in state.tried],
    }
    return render("adaevolve_state.md.j2", view=view)


def _general_rows(state: AdaEvolveState, direction: str) -> list[tuple[str, str]]:
    return [
        ("iteration", str(state.iteration)),
        ("current_island", str(state.current_island)),
        ("global_best", _fitness_text(state.global_best, direction)),
        ("best_program_id", NONE if state.best_program_id is None else str(state.best_program_id)),
        ("ucb_normaliser", _fitness_text(state.ucb_normaliser, direction)),
        ("last_spawn_iteration", str(state.last_spawn)),
        ("rng_seed", str(state.rng_seed)),
        ("rng_draws", str(state.rng_draws)),
    ]


def _island_row(k: int, island: IslandState, state: AdaEvolveState, config: AdaEvolveConfig, members: int
                ) -> list[str]:
    ucb = ucb_score(island, state.iteration, config)
    return [
        str(k), island.preset, format_fitness(island.g), _fitness_text(island.best, config.direction),
        str(island.improvements), str(island.evaluations), str(island.visits), format_fitness(island.decayed_visits),
        format_fitness(island.decayed_reward), f"{intensity(island.g, config):.4f}",
        NONE if ucb is None else f"{ucb:.4f}", str(members),
    ]


def _paradigm_rows(state: AdaEvolveState, direction: str) -> list[tuple[str, str]]:
    return [
        ("window", ",".join(str(tick) for tick in state.window) or NONE),
        ("cur", str(state.current_paradigm)),
        ("best_at_gen", _fitness_text(state.best_at_gen, direction)),
        ("best_during", _fitness_text(state.best_during, direction)),
        ("guide_failed_at", NONE if state.guide_failed_at is None else str(state.guide_failed_at)),
        ("guide_failures", str(state.guide_failures)),
    ]


def _fitness_text(f: float, direction: str) -> str:
    return NONE if f == NEG_INF else format_fitness(raw_value(f, direction))


# ---------------------------------------------------------------- parsing

_GENERAL = ("iteration", "current_island", "global_best", "best_program_id", "ucb_normaliser",
            "last_spawn_iteration", "rng_seed", "rng_draws")
_PARADIGM_FIELDS = ("window", "cur", "best_at_gen", "best_during", "guide_failed_at", "guide_failures")
_ISLAND_COLUMNS = ("island", "preset", "g", "best", "improvements", "evaluations", "visits", "decayed visits",
                   "decayed reward")
# The idea may itself hold " — ", so it runs to the last one; approach types never hold it.
_IDEA_RE = re.compile(r"^\s{0,3}\d+[.)]\s+\[([^\]]*)\]\s*(.*)\s+—\s+(\S.*?)\s*$")
_TAG_USES_RE = re.compile(r"uses\s+(\d+)(?:\s*/\s*\d+)?", re.IGNORECASE)
_TRIED_RE = re.compile(r"^\s{0,3}[-*+]\s+(SUCCESS|FAILED):\s*(.*?)\s+—\s+(.*)\s+\(([+-]?[0-9.eE+-]+)\)\s*$")
_DETAIL_RE = re.compile(r"^\s*(Description|Optimize|Cautions):\s?(.*)$")


@dataclass(frozen=True)
class _Reader(BlockReader):
    """A block reader that also orients raw metric cells.

    Attributes:
      direction: the metric direction, "higher" or "lower".
    """

    direction: str = "higher"

    def fitness(self, text: str) -> float:
        """Converts a raw metric cell to the oriented fitness ('—' is −inf)."""
        if text in (NONE, "-inf", "–"):
            return NEG_INF
        # raw_value is its own inverse: m = f, or −f for lower-is-better.
        return raw_value(finite(text), self.direction)


def _signed(text: str) -> int:
    if not re.fullmatch(r"-?[0-9]{1,15}", text):
        raise ValueError("a whole number")
    return int(text)


def _non_negative(text: str) -> float:
    try:
        value = finite(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ValueError("a number >= 0")
    return value


def _optional_count(text: str) -> int | None:
    if text in (NONE, "–", "-", ""):
        return None
    if not re.fullmatch(r"[0-9]{1,15}", text):
        raise ValueError("a whole number >= 0 (or —)")
    return int(text)


def parse_state_block(text: str, path: str, first_line: int, config: AdaEvolveConfig) -> AdaEvolveState:
    """Returns the state a block holds ('' gives the initial state); raises StateError naming the line."""
    if not text.strip():
        return initial_state(config)
    reader = _Reader(path, first_line, config.direction)
    sections = {s.key: s for s in md.split_sections(text, level=4)}
    tables = md.tables(text)
    general = _fields(tables, sections.get("strategy state"), _GENERAL, reader)
    islands = _islands(tables, sections.get("islands"), config, reader)
    state = _with_general(initial_state(config), general, reader)
    state = replace(state, islands=islands)
    state = _with_paradigms(state, sections.get("paradigms"), tables, text, config, reader)
    if not 0 <= state.current_island < len(islands):
        line = general.get("current_island", ("", 0))[1]
        raise reader.error(f"current_island {state.current_island} is not an island (0–{len(islands) - 1})", line)
    return state


def _in_section(table: md.Table, section: md.Section | None) -> bool:
    return section is not None and section.start <= table.start < section.end


def _fields(tables: list[md.Table], section: md.Section | None, known: tuple[str, ...], reader: _Reader
            ) -> dict[str, tuple[str, int]]:
    """Returns a section's `| Field | Value |` rows; unknown fields are ignored."""
    return reader.fields((t for t in tables if _in_section(t, section)), known, strict=False)


def _with_general(state: AdaEvolveState, rows: dict[str, tuple[str, int]], reader: _Reader) -> AdaEvolveState:
    get = functools.partial(reader.field, rows)
    return replace(
        state, iteration=get("iteration", count, state.iteration),
        current_island=get("current_island", count, state.current_island),
        global_best=get("global_best", reader.fitness, state.global_best),
        best_program_id=get("best_program_id", _optional_count, state.best_program_id),
        ucb_normaliser=get("ucb_normaliser", reader.fitness, state.ucb_normaliser),
        last_spawn=get("last_spawn_iteration", _signed, state.last_spawn),
        rng_seed=get("rng_seed", _signed, state.rng_seed), rng_draws=get("rng_draws", count, state.rng_draws),
    )


def _islands(tables: list[md.Table], section: md.Section | None, config: AdaEvolveConfig, reader: _Reader
             ) -> tuple[IslandState, ...]:
    """Returns the islands table's rows; every primary column must be present and numbered 0..K-1."""
    table = next((t for t in tables if _in_section(t, section) and t.header
                  and md.normalize_heading(t.header[0]) == "island"), None)
    if table is None:
        raise reader.error("the strategy state has no `#### Islands` table; restore it from git history", 0)
    columns = reader.columns(table, _ISLAND_COLUMNS, "islands table")
    islands = [_island(row, position, columns, config, reader) for position, row in enumerate(table.rows)]
    if not islands:
        raise reader.error("the islands table has no rows; AdaEvolve needs at least one island", table.start)
    return tuple(islands)


def _island(row: md.TableRow, position: int, columns: dict[str, int], config: AdaEvolveConfig, reader: _Reader
            ) -> IslandState:
    def cell(name: str) -> str:
        return cell_text(row, columns[name])

    if reader.value(cell("island"), row.line, count, "island") != position:
        raise reader.error(f"island {cell('island')!r} is out of place: rows are numbered 0..K-1, "
                           f"so this one should be {position}", row.line)
    preset = cell("preset").strip().strip("`").lower()
    if position >= config.num_islands and config.preset(preset) is None:
        names = ", ".join(p.name for p in config.presets)
        raise reader.error(f"island {position}'s preset {preset!r} is not in the playbook's presets ({names})",
                           row.line)
    return IslandState(
        preset=preset or STARTING_PRESET,
        g=reader.value(cell("g"), row.line, _non_negative, f"island {position}'s G"),
        best=reader.value(cell("best"), row.line, reader.fitness, f"island {position}'s best"),
        improvements=reader.value(cell("improvements"), row.line, count, "improvements"),
        evaluations=reader.value(cell("evaluations"), row.line, count, "evaluations"),
        visits=reader.value(cell("visits"), row.line, count, "visits"),
        decayed_visits=reader.value(cell("decayed visits"), row.line, _non_negative, "decayed visits"),
        decayed_reward=reader.value(cell("decayed reward"), row.line, _non_negative, "decayed reward"),
    )


def _with_paradigms(state: AdaEvolveState, section: md.Section | None, tables: list[md.Table], text: str,
                    config: AdaEvolveConfig, reader: _Reader) -> AdaEvolveState:
    """Returns the state with the paradigm tracker's fields and idea lists read."""
    if section is None:
        return state
    rows = _fields(tables, section, _PARADIGM_FIELDS, reader)
    window_text, window_line = rows.get("window", (NONE, section.start))
    window = _window(window_text, window_line, reader)[-config.paradigm_window_size:]
    ideas, tried = _idea_lists(text.splitlines()[section.start:section.end], section.start, reader)
    cur = reader.field(rows, "cur", count, 0)
    if ideas and cur >= len(ideas):
        raise reader.error(f"cur {cur} is not an active idea (0–{len(ideas) - 1})", rows["cur"][1])
    return replace(
        state, window=window, paradigms=ideas, current_paradigm=cur if ideas else 0, tried=tried,
        best_at_gen=reader.field(rows, "best_at_gen", reader.fitness, 0.0),
        best_during=reader.field(rows, "best_during", reader.fitness, 0.0),
        guide_failed_at=reader.field(rows, "guide_failed_at", _optional_count, None),
        guide_failures=reader.field(rows, "guide_failures", count, 0),
    )


def _window(text: str, line: int, reader: _Reader) -> tuple[int, ...]:
    if text.strip() in (NONE, "", "–", "-"):
        return ()
    ticks = [part.strip() for part in text.split(",")]
    if not all(tick in ("0", "1") for tick in ticks):
        raise reader.error(f"window {text!r} must list 0s and 1s separated by commas (or —)", line)
    return tuple(int(tick) for tick in ticks)


def _idea_lists(
    lines: list[str], offset: int, reader: _Reader
) -> tuple[tuple[Paradigm, ...], tuple[TriedParadigm, ...]]:
    """Returns the active ideas (numbered items with their details) and the tried ideas (bullets)."""
    ideas: list[Paradigm] = []
    tried: list[TriedParadigm] = []
    for index, line in enumerate(lines):
        idea = _IDEA_RE.match(line)
        if idea:
            ideas.append(_paradigm(idea, lines[index + 1:], offset + index, reader))
            continue
        found = _TRIED_RE.match(line)
        if found:
            gain = reader.value(found.group(4), offset + index, finite, "the gain")
            tried.append(TriedParadigm(found.group(3).strip(), found.group(2).strip(), found.group(1), gain))
    return tuple(ideas), tuple(tried)


def _paradigm(match: re.Match[str], after: list[str], line: int, reader: _Reader) -> Paradigm:
    tag = match.group(1)
    uses = _TAG_USES_RE.search(tag)
    retired = "retired" in tag.lower()
    if uses is None and not retired:
        raise reader.error(f"idea tag [{tag}] must read `[uses N/M]` (add `· retired` to retire it)", line)
    details = _details(after)
    return Paradigm(
        idea=match.group(2).strip(), description=details.get("Description", ""),
        approach_type=match.group(3).strip(), what_to_optimize=details.get("Optimize", "score") or "score",
        cautions=details.get("Cautions", ""), uses=int(uses.group(1)) if uses else 0, retired=retired,
    )


def _details(after: list[str]) -> dict[str, str]:
    """Returns the Description/Optimize/Cautions lines of the `<details>` right under an idea."""
    found: dict[str, str] = {}
    opened = False
    for line in after:
        stripped = line.strip()
        if not opened:
            if not stripped:
                continue
            if not stripped.lower().startswith("<details"):
                break
            opened = True
            continue
        if stripped.lower() == "</details>":
            break
        detail = _DETAIL_RE.match(line)
        if detail:
            found[detail.group(1)] = detail.group(2).strip()
    return found
