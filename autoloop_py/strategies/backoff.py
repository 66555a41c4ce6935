"""Back-off from a guide model whose reply was unusable: wait longer after each such reply in a row, up to a cap.

AdaEvolve's paradigm guide and EvoX's meta LLM are advisory; asking again at once spends a call per iteration on
a model that cannot answer the question. Both record their count in their state tables, which a person may edit.
"""

from __future__ import annotations

MAX_DOUBLINGS = 3  # the wait stops growing at 8 times the first


def backoff_wait(failures: int, first: int) -> int:
    """Returns the wait after `failures` unusable replies in a row: 0 after none, then first, 2·first, … ≤ 8·first."""
    if failures <= 0:
        return 0
    return first * 2 ** min(failures - 1, MAX_DOUBLINGS)
