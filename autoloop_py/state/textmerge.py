"""Three-way text merge: one side's change since a common base, applied onto the other side (`git merge-file`)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from autoloop_py import tempdirs
from autoloop_py.errors import GitError


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
        done = subprocess.run(["git", "merge-file", "-p", *flags, *paths], capture_output=True, check=False)
    if done.returncode < 0 or done.returncode > 127:
        raise GitError(f"git merge-file failed: {done.stderr.decode('utf-8', 'replace').strip()}")
    return Merged(done.stdout.decode("utf-8"), done.returncode)
