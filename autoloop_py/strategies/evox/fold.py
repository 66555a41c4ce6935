"""Folding EvoX strategies: only the code that may run stays in the state file, the rest lives on the memory branch.

Like a Population's folded candidates (runner._fit, code_path), a folded strategy's entry keeps
everything but its source, which moves to `strategies/<program>/S<k>.py` on the memory branch and is
read back (through the same loader as candidate code) whenever the engine may need it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from autoloop_py.strategies.evox.state import EvoXState, StrategyRecord
from autoloop_py.strategies.evox.strategy import strategy_parent

STRATEGIES_DIR = "strategies"


def strategy_path(program: str, strategy_id: int) -> str:
    """Returns where the source of S<strategy_id> is kept on the memory branch."""
    return f"{STRATEGIES_DIR}/{program}/S{strategy_id}.py"


def kept_inline(state: EvoXState) -> frozenset[int]:
    """Returns the strategies whose code stays in the block: active, pending, fallback and the best by J."""
    ids = (state.active, state.pending, state.fallback, strategy_parent(state))
    return frozenset(i for i in ids if i is not None)


def is_folded(record: StrategyRecord) -> bool:
    """Returns whether the entry holds a reference instead of its code (not loaded back)."""
    return record.code_ref is not None and not record.code


def fold(state: EvoXState, path_for: Callable[[int], str]) -> tuple[EvoXState, dict[str, str]]:
    """Returns the state with every other strategy's code folded to a reference, and the sources newly folded."""
    keep = kept_inline(state)
    sources: dict[str, str] = {}
    records = []
    for record in state.strategies:
        if record.id in keep:
            # A source that could not be read back stays a reference rather than becoming empty code.
            record = record if is_folded(record) else replace(record, code_ref=None)
        elif record.code_ref is None:
            path = path_for(record.id)
            sources[path] = record.code
            record = replace(record, code="", code_ref=path)
        else:
            record = replace(record, code="")
        records.append(record)
    return replace(state, strategies=tuple(records)), sources


def unfold(state: EvoXState, load: Callable[[str], str | None]) -> tuple[EvoXState, tuple[str, ...]]:
    """Returns the state with every folded strategy's code read back (references kept), and the paths not found."""
    missing: list[str] = []
    records = []
    for record in state.strategies:
        if is_folded(record) and record.code_ref is not None:
            code = load(record.code_ref)
            if code is None:
                missing.append(record.code_ref)
            else:
                record = replace(record, code=code)
        records.append(record)
    return replace(state, strategies=tuple(records)), tuple(missing)
