"""What a bounded memory folder drops first: old trace rows and saved candidate sources no Population needs.

Every recorded candidate's full source is saved on the memory branch (strategies.runner.code_path), so in
gh-aw's repo-memory folder, which must stay under a file count, `candidates/**` grows by one file an
iteration. What reads those files back: a Population entry whose code was folded out of the state file
(`Full source: memory/autoloop:candidates/…`), in the state file or in the folded-entries file
`candidates/<program>/population.md`. So a source goes only when no Population entry (folded or not,
the best among them) is that candidate or names it as a parent; oldest (lowest id) first. A program whose
state file cannot be read keeps all its sources.

The trace's rows (`traces/<program>/rows/<iteration>-<id>.json`, with their entries in the children index)
grow one an iteration too. `prune_plan` drops both together by age: the oldest row or free source first,
whichever is older, so a long run keeps its recent rows and its recent sources alike.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, Iterable

from autoloop_py.errors import StateError
from autoloop_py.state import file as statefile
from autoloop_py.state.population import population_of

logger = logging.getLogger(__name__)

# A candidate's saved source; bases.json and population.md, which are not, never match.
_SOURCE_RE = re.compile(r"candidates/([^/]+)/(\d+)(?:\.[^/]*)?")
# A trace row, or its entry in its parent's children index: the file name starts with the zero-padded iteration.
_ROW_RE = re.compile(r"traces/[^/]+/(?:rows|children/[^/]+)/(\d+)-[^/]*")


def prune_plan(paths: Iterable[str], limit: int, read: Callable[[str], str | None]) -> list[str]:
    """Returns the files to delete so that at most `limit` of paths stay: rows and free sources, oldest first.

    A row goes with its children-index entries; a source goes only when no Population entry needs it. When
    that is not enough, fewer than `limit` cannot be reached and the list holds everything that may go.
    """
    paths = list(paths)
    excess = len(paths) - limit
    if excess <= 0:
        return []
    units: dict[tuple[int, str], list[str]] = {}
    for path in paths:
        if (row := _ROW_RE.fullmatch(path)) is not None:
            units.setdefault((int(row.group(1)), "row " + path.rsplit("/", 1)[1]), []).append(path)
    for path in prunable_sources(paths, len(paths), read):
        units[(_source_age(path), "source " + path)] = [path]
    doomed: list[str] = []
    for key in sorted(units):
        if len(doomed) >= excess:
            break
        doomed += units[key]
    return doomed


def is_source(path: str) -> bool:
    """Returns whether path is a candidate's saved source (`candidates/<program>/<id>.<ext>`)."""
    return _SOURCE_RE.fullmatch(path) is not None


def _source_age(path: str) -> int:
    found = _SOURCE_RE.fullmatch(path)
    return int(found.group(2)) if found else 0


def prunable_sources(paths: Iterable[str], count: int, read: Callable[[str], str | None]) -> list[str]:
    """Returns up to `count` saved candidate sources among paths that nothing needs, oldest first per id.

    read: reads a file of the memory (the state files `<program>.md` and their folded-entries files).
    """
    sources = [(found.group(1), int(found.group(2)), path) for path in paths
               if (found := _SOURCE_RE.fullmatch(path)) is not None]
    if count <= 0 or not sources:
        return []
    needed = {program: needed_ids(program, read) for program in {program for program, _, _ in sources}}
    free = [(number, path) for program, number, path in sources
            if needed[program] is not None and number not in needed[program]]
    return [path for _, path in sorted(free)[:count]]


def needed_ids(program: str, read: Callable[[str], str | None]) -> set[int] | None:
    """Returns the ids whose source the program's Population may read back: its entries and their parents.

    None: every source is needed (the state file is missing or cannot be read, so nothing is known).
    """
    path = f"{program}.md"
    text = read(path)
    if text is None:
        return None
    try:
        population = population_of(statefile.parse_state(text, path), read)
    except (StateError, ValueError) as err:  # a person's edit that does not parse
        logger.warning("%s: keeping every saved candidate source of %s: %s", path, program, err)
        return None
    ids = {candidate.id for candidate in population.candidates}
    return ids | {parent for candidate in population.candidates for parent in candidate.parents}
