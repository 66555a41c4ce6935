"""Three-way text merge: one side's change since a common base, applied onto the other side (`git merge-file`)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from autoloop_py import tempdirs
from autoloop_py.errors import GitError
from autoloop_py.git.command import git_environment, hardened_command


@dataclass(frozen=True)
class Merged:
    """The outcome of a three-way merge.

    Attributes:
      text: the merged text (with conflict markers when conflicts > 0).
      conflicts: how many hunks both sides changed differently.
    """

    text: str
    conflicts: int

    @property
    def clean(self) -> bool:
        """Returns whether the merge needed no decision."""
        return self.conflicts == 0


def merge3(base: str, ours: str, theirs: str, labels: tuple[str, str, str] = ("ours", "base", "theirs")) -> Merged:
    """Returns theirs with ours' change since base applied (identical changes on both sides are no conflict)."""
    if ours == base or ours == theirs:
        return Merged(theirs, 0)
    if theirs == base:
        return Merged(ours, 0)
    with tempdirs.temporary("autoloop-merge-") as tmp:
        paths = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp) / name
            path.write_bytes(text.encode("utf-8"))
            paths.append(str(path))
        flags = [arg for label in labels for arg in ("-L", label)]
        # In the temporary folder, with the runner's environment: no repository's config is read.
        env = {**git_environment(os.environ), "GIT_CEILING_DIRECTORIES": str(Path(tmp).parent)}
        command = hardened_command(["merge-file", "-p", *flags, *paths])
        done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, check=False)
    if done.returncode < 0 or done.returncode > 127:
        raise GitError(f"git merge-file failed: {done.stderr.decode('utf-8', 'replace').strip()}")
    return Merged(done.stdout.decode("utf-8"), done.returncode)
