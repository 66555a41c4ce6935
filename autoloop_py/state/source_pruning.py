"""Which saved candidate sources (`candidates/<program>/<id>.<ext>`) a bounded memory folder may drop first.

Every recorded candidate's full source is saved on the memory branch (strategies.runner.code_path), so in
gh-aw's repo-memory folder, which must stay under a file count, `candidates/**` grows by one file an
iteration. What reads those files back: a Population entry whose code was folded out of the state file
(`Full source: memory/autoloop:candidates/…`), in the state file or in the folded-entries file
`candidates/<program>/population.md`. So a source goes only when no Population entry (folded or not,
the best among them) is that candidate or names it as a parent; oldest (lowest id) first. A program whose
state file cannot be read keeps all its sources.
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


def prunable_sources(paths: Iterable[str], count: int, read: Callable[[str], str | None]) -> list[str]:
    """Returns up to `count` saved candidate sources among paths that nothing needs, oldest first per id.

    read: reads a file of the memory (the state files `<program>.md` and their folded-entries files).
    """
    sources = [(found.group(1), int(found.group(2)), path) for path in paths
               if (found := _SOURCE_RE.fullmatch(path)) is not None]
    if count <= 0 or not sources:
        return []
    needed = {program: needed_ids(program, read) for program in {program for program, _, _ in sources}}
    free = [(number, path) for program, number, path in sources if _free(number, needed[program])]
    return [path for _, path in sorted(free)[:count]]


def _free(number: int, needed: set[int] | None) -> bool:
    return needed is not None and number not in needed


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
