"""Acceptance under many objectives: the kept set read from the state file, and the verdict's history bullets.

A program whose frontmatter declares `objectives:` keeps a candidate when no candidate kept so far dominates it
(or, with `objective-scalarisation:`, when its weighted sum beats theirs); strategies/pareto.py decides. The kept
set is the accepted detailed entries of the Iteration History that carry an `- **Objectives**:` bullet, so a
history folded into ranges forgets the older ones (their front still shows in the Population).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from autoloop_py.program.model import Program
from autoloop_py.state import file as statefile
from autoloop_py.strategies import pareto

KEPT_BY = "Kept by"
_BULLET_RE = re.compile(r"^\s*[-*]\s+\*\*Objectives\*\*:\s*(.+?)\s*$", re.MULTILINE)


def kept_metrics(state: statefile.StateFile) -> list[dict[str, float]]:
    """Returns the objective values of every accepted detailed history entry that records them."""
    kept = []
    for entry in state.history:
        if entry.is_detailed and entry.status == "accepted":
            found = _BULLET_RE.search(entry.text)
            if found:
                kept.append(pareto.parse_values(found.group(1)))
    return kept


def judge(program: Program, metrics: Mapping[str, Any], state: statefile.StateFile) -> pareto.Verdict | None:
    """Returns the many-objective verdict on a candidate's metrics (None when the program declares no objectives)."""
    config = program.config
    if not config.objectives:
        return None
    return pareto.keep(metrics, kept_metrics(state), config.objectives, config.objective_scalarisation,
                       config.min_delta)


def bullets(program: Program, metrics: Mapping[str, Any], verdict: pareto.Verdict | None) -> tuple[tuple[str, str], ...]:
    """Returns the history bullets that record the objectives and the rule that kept (or did not keep) it."""
    if verdict is None:
        return ()
    return (("Objectives", pareto.objectives_text(metrics, program.config.objectives)), (KEPT_BY, verdict.rule))
