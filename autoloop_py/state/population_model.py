"""Population model: the dataclasses of the state file's `## 🧬 Population` section.

They sit below both the text form (population_markdown.py) and the ranking (population.py), so that
population.py can re-export the whole API without an import cycle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

from autoloop_py.program.regions import evolve_regions

OPERATORS = ("exploitation", "exploration", "crossover", "migration")
CANDIDATE_STATUSES = ("accepted", "rejected", "error")
# The block naming the entries folded out to the memory branch (population_fold.py).
FOLDED_HEADING_RE = re.compile(r"^ {0,3}###[ \t]+🗄️?[ \t]*Folded entries[ \t#]*$")


@dataclass(frozen=True)
class Candidate:
    """One evaluated candidate (seed 003 schema).

    Attributes:
      id: monotonic across the run, from 1.
      island: the island index it belongs to (None when the strategy has no islands).
      fitness: the raw primary metric as evaluated (None for an error); never changed once recorded.
      gen: the iteration number at which it was produced.
      operator: exploitation | exploration | crossover | migration (or a strategy's own label).
      parents: ids of its parents (0–2 for AlphaEvolve).
      cell: the MAP-Elites feature cell (dim1 bucket, dim2 bucket), or None.
      approach: one-line summary of the idea.
      status: accepted | rejected | error.
      notes: one sentence on what was learned.
      code: the full source of the evolved block, ending with a newline ('' when empty); None when only
        a reference is kept.
      code_ref: where the full source is stored on the memory branch (path), when code was folded away.
      language: the code block's info string (e.g. python); not written for folded code.
      extra: further `- **Label**: value` bullets in order (strategy-specific or written by people).
      raw: the entry's exact source text when parsed (rendered back unchanged while the entry is untouched).
    """

    id: int
    island: int | None
    fitness: float | None
    gen: int
    operator: str
    parents: tuple[int, ...] = ()
    cell: tuple[str, str] | None = None
    approach: str = ""
    status: str = "rejected"
    notes: str = ""
    code: str | None = None
    code_ref: str | None = None
    language: str = "python"
    extra: tuple[tuple[str, str], ...] = ()
    raw: str | None = None


@dataclass(frozen=True)
class RawBlock:
    """A `###` block of the section the parser could not read, kept verbatim and out of `candidates`.

    Attributes:
      text: the block's exact source text.
      line: 0-based line in the state file where it starts.
    """

    text: str
    line: int


@dataclass(frozen=True)
class StateSlot:
    """Marks where the `### ⚙️ Strategy State` block sits among the entries."""


LayoutItem = Union[Candidate, RawBlock, StateSlot]


@dataclass(frozen=True)
class Population:
    """The `## 🧬 Population` section.

    Attributes:
      candidates: the readable entries, newest (highest id) first.
      intro: the raw text between the heading line and the first `###` block.
      strategy_state: the raw `### ⚙️ Strategy State` block, owned by the strategy ('' when absent).
      next_id: the id the next candidate gets: max(ids)+1, or a larger value carried by the strategy
        state's `next_id` row or by eviction of the newest entries.
      heading: the raw heading line.
      layout: the blocks in file order as parsed (candidates as read, unreadable blocks, the strategy-state
        slot); render keeps this order and sends untouched entries back byte for byte.
    """

    candidates: tuple[Candidate, ...]
    intro: str
    strategy_state: str = ""
    next_id: int = 1
    heading: str = "## 🧬 Population\n"
    layout: tuple[LayoutItem, ...] = ()

    @property
    def unreadable(self) -> tuple[RawBlock, ...]:
        """Returns the blocks kept verbatim because they could not be read."""
        return tuple(item for item in self.layout if isinstance(item, RawBlock))


def evolved_lines(code: str) -> int:
    """Returns the lines of the evolved block: between EVOLVE-BLOCK markers when present, else all lines."""
    regions = evolve_regions(code)
    if regions:
        return sum(end - start for start, end in regions)
    return code.count("\n") + (code[-1:] not in ("", "\n"))  # a last line without its line break counts too
