"""The strategy of the commit an iteration runs on: its playbook, prompts and `code/config.yaml`, not the working
tree's.

Iterations run on the base branch's commit (program.md is reloaded from it: iteration.committed_program); the
strategy files follow the same source. Copies in the working tree that differ (edits not yet committed or
pushed) are not used, and one warning names them.
"""

from __future__ import annotations

import logging
from pathlib import Path

from autoloop_py.program.model import Program
from autoloop_py.program.playbook import CONFIG_YAML, playbook_pointer
from autoloop_py.strategies import runner as strategy

log = logging.getLogger(__name__)


def committed_runner(program: Program, root: Path, tree: Path, base: str) -> strategy.StrategyRunner | None:
    """Returns the strategy runner read from tree (the checkout of base); warns once when root's copies differ."""
    if tree != root and not program.path.is_absolute():
        differing = differing_files(strategy_files(program, root) | strategy_files(program, tree), root, tree)
        if differing:
            log.warning(
                "%s differ%s from the copies on %s: this iteration uses %s's (commit and push the edits to use them)",
                ", ".join(differing), "s" if len(differing) == 1 else "", base, base,
            )
    return strategy.load_runner(program, tree)


def strategy_files(program: Program, tree: Path) -> set[str]:
    """Returns the repo-relative files the program's strategy reads in tree: playbook, prompts, code/config.yaml."""
    pointer = playbook_pointer(program)
    if pointer is None:
        return set()
    playbook = program.base_dir / pointer[0]
    prompts = tree / playbook.parent / "prompts"
    files = {playbook.as_posix(), (program.base_dir / CONFIG_YAML).as_posix()}
    files.update(p.relative_to(tree).as_posix() for p in prompts.glob("*.md") if p.is_file())
    return files


def differing_files(files: set[str], root: Path, tree: Path) -> list[str]:
    """Returns, sorted, the files whose content differs between the two trees (present in one only included)."""
    return [rel for rel in sorted(files) if _content(root / rel) != _content(tree / rel)]


def _content(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None
