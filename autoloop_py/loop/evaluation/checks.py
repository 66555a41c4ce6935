"""Checks: what a candidate may not do — write outside Target or EVOLVE-BLOCKs or through symlinks, touch protected
files, repeat an evaluated candidate."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path, PurePosixPath
from typing import Callable, Mapping

from autoloop_py.git.command import git_environment, hardened_command
from autoloop_py.program import edits, regions
from autoloop_py.program.model import Program
from autoloop_py.program.regions import evolved_code
from autoloop_py.proposers.base import Proposal
from autoloop_py.state import file as statefile
from autoloop_py.state.population import Candidate, population_of
from autoloop_py.strategies.runner import StrategyRunner


def violations(program: Program, files: Mapping[str, str], changes: Mapping[str, str | None]) -> list[str]:
    """Returns why a candidate may not be evaluated: paths outside Target, files over the size cap, edits outside
    EVOLVE-BLOCKs (deleting a file that has them included), no change."""
    reasons = edits.check_paths(changes.keys(), program.target.allows, files.keys())
    cap = program.config.max_file_bytes
    for path, content in changes.items():
        old = files.get(path)
        size = len(content.encode("utf-8")) if content is not None else 0
        if size > cap:
            # Checked first: a huge file is neither diffed against its markers, evaluated nor kept in a trace.
            reasons.append(f"{path} is {size} bytes, over the program's limit of {cap} (`max-file-bytes`)")
        elif content is None and old is not None and regions.evolve_regions(old):
            reasons.append(f"{path}: deleting a file with EVOLVE-BLOCK markers; edit only between the markers")
        elif content is not None and old is not None:
            violation = regions.evolve_block_violation(old, content)
            if violation:
                reasons.append(f"{path}: {violation}")
    if not changes:
        reasons.append("the candidate changes nothing")
    return reasons


def case_insensitive(directory: Path) -> bool:
    """Returns whether the file system at `directory` treats names that differ only in case as one name."""
    for entry in directory.iterdir():
        swapped = directory / entry.name.swapcase()
        if swapped.name != entry.name:
            return swapped.exists() and os.path.samefile(entry, swapped)
    with tempfile.NamedTemporaryFile(prefix="autoloop-case-Probe-", dir=directory) as probe:
        swapped = Path(probe.name).with_name(Path(probe.name).name.swapcase())
        return swapped.exists()


def real_paths(
    workdir: Path, changes: Mapping[str, str | None], insensitive: Callable[[Path], bool] | None = None
) -> tuple[dict[str, str | None], list[str]]:
    """Returns the changes keyed by the names the file system really uses, and the paths that name one file twice.

    On a case-insensitive file system `Code/Solution.py` is the existing `code/solution.py`, so
    the Target and EVOLVE-BLOCK checks must see that name; elsewhere names are kept as written.
    """
    if not changes or not (insensitive or case_insensitive)(workdir):
        return dict(changes), []
    real: dict[str, str | None] = {}
    spelled: dict[str, str] = {}
    clashes = []
    for path, content in changes.items():
        name = _real_name(workdir, path)
        if name.casefold() in spelled:
            clashes.append(
                f"{path} and {spelled[name.casefold()]} name the same file on this case-insensitive file system"
            )
            continue
        spelled[name.casefold()] = path
        real[name] = content
    return real, clashes


def _real_name(workdir: Path, path: str) -> str:
    """Returns `path` with each existing component spelled as its directory lists it."""
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or ".." in parts:
        return path  # check_paths refuses these as written
    current = workdir
    named: list[str] = []
    for index, part in enumerate(parts):
        listed = current.iterdir() if current.is_dir() else ()
        match = next((e.name for e in listed if e.name.casefold() == part.casefold()), None)
        if match is None:
            return "/".join([*named, *parts[index:]])
        named.append(match)
        current = current / match
    return "/".join(named)


def links(workdir: Path, changes: Mapping[str, str | None]) -> list[str]:
    """Returns a reason for every changed path that is a symbolic link (an agent could point one outside)."""
    return [f"{path} is a symbolic link; candidates may only write regular files" for path in changes
            if (workdir / path).is_symlink()]


def protected_hashes(
    program: Program, workdir: Path, tracked_in: Callable[[Path], set[str] | None] | None = None
) -> dict[str, str]:
    """Returns hashes of program.md and the program folder's committed non-Target files (evaluator, config).

    Files git does not track (a `run.log` the evaluation writes, as upstream's autoresearch does) are
    the evaluation's output, not protected inputs. tracked_in: returns the files tracked under a folder
    (the workspace reads them from its tip's tree); None, or its None, asks `git ls-files`.
    """
    base = workdir / program.base_dir
    paths = [workdir / program.path]
    if program.directory is not None:
        tracked = tracked_in(program.base_dir) if tracked_in is not None else None
        tracked = tracked if tracked is not None else _tracked(workdir, program.base_dir)
        paths += [p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and (tracked is None or p.relative_to(workdir).as_posix() in tracked)]
    hashes = {}
    for path in paths:
        rel = path.relative_to(workdir).as_posix()
        digest = _digest(path)
        if digest is not None and (rel == program.path.as_posix() or not program.target.allows(rel)):
            hashes[rel] = digest
    return hashes


def _tracked(workdir: Path, folder: Path) -> set[str] | None:
    """Returns the files git tracks under folder (repo-relative), or None when workdir is no git checkout."""
    if not (workdir / ".git").exists():
        return None
    # Hardened as every runner git is: no hook or fsmonitor of the checkout's config runs.
    done = subprocess.run(hardened_command(["-C", str(workdir), "ls-files", "-z", "--", folder.as_posix()]),
                          env=git_environment(os.environ), capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        return None
    return {name for name in done.stdout.decode("utf-8", "replace").split("\0") if name}


def protected_changes(guarded: Mapping[str, str], changes: Mapping[str, str | None]) -> list[str]:
    """Returns a reason for every change to a protected file (program.md, the evaluator), even inside the Target."""
    return [f"{path} is protected (program.md or the evaluator); candidates may not change it"
            for path in changes if path in guarded]


def tampered(workdir: Path, before: Mapping[str, str]) -> str:
    """Returns the protected files whose hashes changed since before, comma-separated ('' when none).

    Only the files of `before` are read back: the evaluated code owned workdir, and a `.git` it made
    there would run its own config's commands (core.fsmonitor) in any git the runner started in it.
    """
    changed = sorted(path for path, digest in before.items() if _digest(workdir / path) != digest)
    return ", ".join(changed)


def _digest(path: Path) -> str | None:
    """Returns the sha256 of a file's bytes, or of where a symbolic link points (never read through: it may
    lead to /dev/zero); None when there is no file."""
    if path.is_symlink():
        return hashlib.sha256(b"link:" + os.fsencode(os.readlink(path))).hexdigest()
    if not path.is_file():
        return None
    with path.open("rb") as handle:  # in chunks: a candidate's file may be as large as its disk limit
        return hashlib.file_digest(handle, "sha256").hexdigest()


def duplicate_of(
    runner: StrategyRunner | None,
    state: statefile.StateFile,
    proposal: Proposal,
    files: Mapping[str, str],
    load: Callable[[str], str | None] | None = None,
) -> Candidate | None:
    """Returns the evaluated candidate whose code the proposal repeats, for engines with a `duplicate_of` hook."""
    hook = getattr(runner.engine, "duplicate_of", None) if runner is not None else None
    if hook is None or runner is None:
        return None
    primary = runner.primary
    source = proposal.files.get(primary) or files.get(primary, "")
    return hook(population_of(state, load), evolved_code(source))
