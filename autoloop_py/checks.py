"""Checks: what a candidate may not do — write outside Target or EVOLVE-BLOCKs or through symlinks, touch protected
files, repeat an evaluated candidate."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Mapping

from autoloop_py import edits, state as statefile
from autoloop_py.population import Candidate
from autoloop_py.program import Program
from autoloop_py.proposers.base import Proposal
from autoloop_py.strategies import runner as strategy
from autoloop_py.strategies.runner import StrategyRunner


def violations(program: Program, files: Mapping[str, str], changes: Mapping[str, str | None]) -> list[str]:
    """Returns why a candidate may not be evaluated: paths outside Target, edits outside EVOLVE-BLOCKs, no change."""
    reasons = edits.check_paths(changes.keys(), program.target.allows)
    for path, content in changes.items():
        old = files.get(path)
        if content is not None and old is not None:
            violation = edits.evolve_block_violation(old, content)
            if violation:
                reasons.append(f"{path}: {violation}")
    if not changes:
        reasons.append("the candidate changes nothing")
    return reasons


def links(workdir: Path, changes: Mapping[str, str | None]) -> list[str]:
    """Returns a reason for every changed path that is a symbolic link (an agent could point one outside)."""
    return [f"{path} is a symbolic link; candidates may only write regular files" for path in changes
            if (workdir / path).is_symlink()]


def protected_hashes(program: Program, workdir: Path) -> dict[str, str]:
    """Returns hashes of program.md and the program folder's non-Target files (evaluator, config)."""
    base = workdir / program.base_dir
    paths = [workdir / program.path]
    if program.directory is not None:
        paths += [p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    hashes = {}
    for path in paths:
        rel = path.relative_to(workdir).as_posix()
        if path.is_file() and (rel == program.path.as_posix() or not program.target.allows(rel)):
            hashes[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def tampered(program: Program, workdir: Path, before: Mapping[str, str]) -> str:
    """Returns the protected files whose hashes changed since before, comma-separated ('' when none)."""
    after = protected_hashes(program, workdir)
    changed = sorted(p for p in before if after.get(p) != before[p])
    return ", ".join(changed)


def duplicate_of(
    runner: StrategyRunner | None, state: statefile.StateFile, proposal: Proposal, files: Mapping[str, str]
) -> Candidate | None:
    """Returns the evaluated candidate whose code the proposal repeats, for engines with a `duplicate_of` hook."""
    hook = getattr(runner.engine, "duplicate_of", None) if runner is not None else None
    if hook is None or runner is None:
        return None
    primary = runner.primary
    source = proposal.files.get(primary) or files.get(primary, "")
    return hook(strategy.population_of(state), strategy.evolved_code(source))
