"""Island claims: how a slot of a run without a barrier tells the run which island it works.

A lane's iteration writes the island its strategy decided beside the slot's outcome folder (which must
hold the outcome alone) as soon as it decides; the run reads the claims of the slots still in flight when
it starts the next one (`Slot.busy`), so a strategy with islands can keep the new slot off them. The
folder is the run's, but a claim only steers a pick: one that is not a small whole number is ignored.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterable

log = logging.getLogger(__name__)

SUFFIX = ".island"
_MAX_ISLAND = 10_000


def claim_path(outcome_dir: Path) -> Path:
    """Returns where the slot whose outcome goes to outcome_dir claims its island."""
    return outcome_dir.with_name(outcome_dir.name + SUFFIX)


def claim(outcome_dir: Path, island: int) -> None:
    """Writes the island the slot whose outcome goes to outcome_dir works."""
    claim_path(outcome_dir).write_text(f"{island}\n")


def claimed(outcome_dirs: Iterable[Path]) -> tuple[int, ...]:
    """Returns the islands the slots writing to outcome_dirs claimed, in order (those without a claim left out)."""
    islands: list[int] = []
    for folder in outcome_dirs:
        try:
            with claim_path(folder).open("rb") as handle:
                text = handle.read(20).decode(errors="replace").strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < _MAX_ISLAND:
            islands.append(int(text))
        else:
            log.debug("ignored the island claim %r in %s", text, folder)
    return tuple(dict.fromkeys(islands))
