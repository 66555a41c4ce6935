"""Stale parents: Population code brought up to date with the default branch's later changes to the Target.

A Population entry keeps the evolved code of its candidate as it was when recorded. When the default
branch later changes the Target's evolved block (a bug fix, a new helper), a child built on the old
code would silently revert that commit. So each entry remembers the default-branch commit it was
recorded on (`candidates/<program>/bases.json` on the memory branch), and before a strategy decides,
the change of the block between that commit and today's is merged into the entry's code, three ways.
An entry whose code conflicts with the change is stale: it is not chosen as a parent (nor shown)
until a person rebases it by hand. Entries without a recorded commit (copies a strategy makes, entries
from before this file existed) are taken as recorded on the oldest commit the file knows: a change
they already hold merges cleanly, since both sides made it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from autoloop_py.git.command import call, default_branch, open_repo, rev_parse
from autoloop_py.program.regions import evolved_code
from autoloop_py.state import population as pop
from autoloop_py.state.textmerge import merge3

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rebased:
    """The Population as parents may be chosen from it.

    Attributes:
      population: entries with up-to-date code; stale ones left out.
      updated: ids whose code the default branch's change was merged into.
      stale: ids left out because their code conflicts with that change.
    """

    population: pop.Population
    updated: tuple[int, ...] = ()
    stale: tuple[int, ...] = ()


def bases_path(program: str) -> str:
    """Returns where the default-branch commit of each entry is kept on the memory branch."""
    return f"candidates/{program}/bases.json"


def read_bases(text: str | None) -> dict[int, str]:
    """Returns candidate id -> default-branch commit from the bases file ({} when absent or unreadable)."""
    try:
        data = json.loads(text) if text else {}
    except json.JSONDecodeError:
        log.warning("the bases file is not JSON; Population code is not brought up to date")
        return {}
    if not isinstance(data, dict):
        return {}
    return {int(key): str(value) for key, value in data.items() if str(key).isdigit() and isinstance(value, str)}


def with_base(text: str | None, candidate_id: int, sha: str) -> str:
    """Returns the bases file with the entry's commit set."""
    bases = read_bases(text)
    bases[candidate_id] = sha
    return json.dumps({str(key): bases[key] for key in sorted(bases)}, indent=0) + "\n"


def rebase_population(
    population: pop.Population,
    current: str,
    bases: Mapping[int, str],
    block_at: Callable[[str], str | None],
    load_code: Callable[[str], str | None],
) -> Rebased:
    """Returns the Population with the default branch's change of the block since each entry's commit merged in.

    `block_at(sha)` returns the evolved block of the primary Target at a default-branch commit (None when
    the file is absent there); `load_code` reads folded code back from the memory branch.
    """
    block_at = functools.cache(block_at)
    fallback = _oldest(bases, block_at)
    new_block = block_at(current)
    if new_block is None:
        return Rebased(population)
    kept: list[pop.Candidate] = []
    updated: list[int] = []
    stale: list[int] = []
    for candidate in population.candidates:
        base = bases.get(candidate.id, fallback)
        old_block = block_at(base) if base is not None and base != current else None
        code = candidate.code if candidate.code is not None else (
            load_code(candidate.code_ref) if candidate.code_ref else None
        )
        if old_block is None or old_block == new_block or code is None:
            kept.append(candidate)
            continue
        merged = merge3(old_block, code, new_block, ("the entry", "the default branch then", "the default branch now"))
        if not merged.clean:
            stale.append(candidate.id)
            continue
        if merged.text != code:
            updated.append(candidate.id)
        kept.append(dataclasses.replace(candidate, code=merged.text, raw=None))
    if stale:
        log.warning(
            "Population entries %s conflict with a later change of the Target on the default branch; they are stale "
            "and not chosen as parents until their code is rebased by hand", ", ".join(f"#{i}" for i in stale)
        )
    return Rebased(dataclasses.replace(population, candidates=tuple(kept)), tuple(updated), tuple(stale))


def rebaser(
    root: Path, program: str, primary: str, current: str | None, read: Callable[[str], str | None]
) -> Callable[[pop.Population], pop.Population]:
    """Returns the step that brings a Population's code up to date with the default branch at `current`.

    `read` reads the memory branch (the bases file, folded code); the Target is read from the repository at root.
    """

    def rebase(population: pop.Population) -> pop.Population:
        rebased = rebase_at(root, program, primary, current, read, population)
        if rebased.updated:
            log.info("brought entries %s up to date with the default branch", ", ".join(map(str, rebased.updated)))
        return rebased.population

    return rebase


def rebase_at(
    root: Path,
    program: str,
    primary: str,
    current: str | None,
    read: Callable[[str], str | None],
    population: pop.Population,
) -> Rebased:
    """Returns the Population brought up to date with the default branch at `current` (unchanged without one)."""
    bases = read_bases(read(bases_path(program)))
    if current is None or not bases:
        return Rebased(population)
    repo = open_repo(root)

    def block_at(sha: str) -> str | None:
        shown = call(repo, "show", f"{sha}:{primary}")
        return evolved_code(shown.text) if shown.ok else None

    return rebase_population(population, current, bases, block_at, read)


def default_tip(root: Path, remote: str = "origin") -> str | None:
    """Returns the default branch's commit, the remote's when known (what the runner builds candidates on)."""
    repo = open_repo(root)
    name = default_branch(root, remote)
    return rev_parse(repo, f"refs/remotes/{remote}/{name}") or rev_parse(repo, f"refs/heads/{name}")


def _oldest(bases: Mapping[int, str], block_at: Callable[[str], str | None]) -> str | None:
    """Returns the commit of the entry recorded first (lowest id) whose Target can be read."""
    for candidate_id in sorted(bases):
        if block_at(bases[candidate_id]) is not None:
            return bases[candidate_id]
    return None
