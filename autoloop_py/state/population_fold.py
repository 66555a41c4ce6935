"""Whole Population entries folded out of the state file into one memory-branch file, and read back.

Folding code alone leaves every entry's heading and bullets in the state file, which at a Population
of 200 is still four times its byte budget. So when the file is still over budget, the runner moves
whole entries (non-elites first, never the best) into `candidates/<program>/population.md` on the
memory branch: a Population section of its own that people can read and edit like the state file.
The state file keeps one `### 🗄️ Folded entries` block naming that file and the ids it holds, and the
runner reads the entries back before a strategy decides or records, so no decision ever sees fewer
entries than were recorded.
"""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import groupby
from typing import Callable, Iterable

from autoloop_py.errors import StateError
from autoloop_py.render import render
from autoloop_py.state.population_markdown import parse_population, render_population
from autoloop_py.state.population_model import FOLDED_HEADING_RE, Candidate, LayoutItem, Population, RawBlock

_REF_RE = re.compile(r"`memory/autoloop:([^`]+)`")


def folded_path(program: str) -> str:
    """Returns the memory-branch file that holds a program's folded entries."""
    return f"candidates/{program}/population.md"


def is_folded_block(text: str) -> bool:
    """Returns whether a `###` block of the Population is the folded-entries block."""
    first = text.split("\n", 1)[0]
    return bool(FOLDED_HEADING_RE.match(first.rstrip("\r")))


def fold_entries(population: Population, fold: Iterable[int], path: str) -> tuple[Population, str]:
    """Returns the Population with the entries `fold` names moved out, and the text of the file at path.

    The file holds every folded entry (as entries of a `## 🧬 Population` section); the state file keeps
    one block saying which entries are there. Without ids to fold, the Population comes back unchanged
    and the text is ''.
    """
    wanted = set(fold)
    moved = tuple(c for c in population.candidates if c.id in wanted)
    if not moved:
        return population, ""
    kept = tuple(c for c in population.candidates if c.id not in wanted)
    block = render("population_folded.md.j2", count=len(moved), ids=id_ranges(c.id for c in moved), path=path)
    layout: list[LayoutItem] = [
        item for item in population.layout
        if not (isinstance(item, Candidate) and item.id in wanted)
        and not (isinstance(item, RawBlock) and is_folded_block(item.text))
    ]  # fmt: skip
    layout.append(RawBlock(block, 0))
    archive = Population(moved, render("population_folded_intro.md.j2"), next_id=population.next_id,
                         layout=tuple(c for c in population.layout if isinstance(c, Candidate) and c.id in wanted))
    return replace(population, candidates=kept, layout=tuple(layout)), render_population(archive)


def unfold_entries(population: Population, read: Callable[[str], str | None], path: str = "state.md") -> Population:
    """Returns the Population with its folded entries read back from the memory branch (unchanged when none).

    An entry in the state file wins over one with the same id in the folded file (a person moved it back).
    """
    blocks = [item for item in population.layout if isinstance(item, RawBlock) and is_folded_block(item.text)]
    if not blocks:
        return population
    known = {c.id for c in population.candidates}
    loaded: list[Candidate] = []
    for block in blocks:
        found = _REF_RE.search(block.text)
        if found is None:
            raise StateError("the Folded entries block names no `memory/autoloop:` file", path, block.line + 1)
        text = read(found.group(1))
        if text is None:
            raise StateError(
                f"the folded entries are in {found.group(1)}, which is not on the memory branch; "
                "restore it from the branch's history or delete the Folded entries block",
                path, block.line + 1,
            )  # fmt: skip
        archive = parse_population(text, found.group(1))
        loaded += [c for c in archive.candidates if c.id not in known]
        known |= {c.id for c in archive.candidates}
    candidates = tuple(sorted((*population.candidates, *loaded), key=lambda c: -c.id))
    layout = tuple(item for item in population.layout if item not in blocks) + tuple(loaded)
    next_id = max([population.next_id, *(c.id + 1 for c in loaded)])
    return replace(population, candidates=candidates, layout=layout, next_id=next_id)


def id_ranges(ids: Iterable[int]) -> str:
    """Returns ids as short text: `#3, #5, #7–#40`."""
    # Consecutive ids share their distance from their place in the sorted list.
    runs = [[n for _, n in run] for _, run in groupby(enumerate(sorted(set(ids))), lambda pair: pair[1] - pair[0])]
    return ", ".join(f"#{run[0]}" if len(run) == 1 else f"#{run[0]}–#{run[-1]}" for run in runs)
