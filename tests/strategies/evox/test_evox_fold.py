"""Folding EvoX strategies: which code stays inline, which moves to the memory branch, and reading it back."""

from __future__ import annotations

from dataclasses import replace

from autoloop_py.strategies.evox import fold as evox_fold
from autoloop_py.strategies.evox.config import EvoXConfig
from autoloop_py.strategies.evox.markdown import parse_state_block, render_state_block
from autoloop_py.strategies.evox.strategy import EvoXState, StrategyRecord

CONFIG = EvoXConfig(switch_interval=3, initial_code="class EvolvedStrategy(StrategyBase):\n    pass\n")


def _path(strategy_id: int) -> str:
    return evox_fold.strategy_path("fm", strategy_id)


def _state() -> EvoXState:
    """S0 scored best, S1 scored, S2 failed, S3 rolled back, S4 the fallback, S5 active and pending."""
    codes = [f"S{k} = {k}  # {'x' * 200}\n" for k in range(6)]
    statuses = ("scored", "scored", "failed-validation", "rolled-back", "scored", "active")
    js = (0.9, 0.2, None, 0.95, 0.4, None)
    records = tuple(StrategyRecord(k, codes[k], statuses[k], js[k]) for k in range(6))
    return EvoXState(switch_interval=3, active=5, pending=5, fallback=4, best_strategy_j=0.95, strategies=records)


def test_only_the_strategies_that_may_run_stay_inline() -> None:
    state = _state()
    # S0 is the best usable by J (S3 scored higher but was rolled back).
    assert evox_fold.kept_inline(state) == {0, 4, 5}
    folded, sources = evox_fold.fold(state, _path)
    assert sources == {_path(k): state.strategy(k).code for k in (1, 2, 3)}
    for k in (1, 2, 3):
        assert folded.strategy(k) == replace(state.strategy(k), code="", code_ref=f"strategies/fm/S{k}.py")
    assert [folded.strategy(k) for k in (0, 4, 5)] == [state.strategy(k) for k in (0, 4, 5)]
    text = render_state_block(folded, "higher")
    assert "- **Code**: strategies/fm/S2.py on memory/autoloop\n" in text and text.count("<details><summary>Code") == 3
    assert parse_state_block(text, "f.md", 0, CONFIG) == folded
    assert len(text.encode()) < len(render_state_block(state, "higher").encode()) - 3 * 200


def test_code_read_back_folds_again_without_writing_it_twice() -> None:
    state = _state()
    folded, sources = evox_fold.fold(state, _path)
    loaded, missing = evox_fold.unfold(folded, sources.get)
    assert missing == () and [s.code for s in loaded.strategies] == [s.code for s in state.strategies]
    assert loaded.strategy(1).code_ref == _path(1)
    assert evox_fold.fold(loaded, _path) == (folded, {})


def test_a_folded_strategy_that_runs_again_comes_back_inline() -> None:
    folded, sources = evox_fold.fold(_state(), _path)
    loaded, _ = evox_fold.unfold(folded, sources.get)
    # A rollback made S1 the active strategy: its code returns to the block; S4 and S5 fold now.
    rolled = replace(loaded, active=1, pending=None, fallback=None, strategies=tuple(
        replace(s, status={5: "rolled-back", 1: "active"}.get(s.id, s.status)) for s in loaded.strategies))
    again, new_sources = evox_fold.fold(rolled, _path)
    assert again.strategy(1) == replace(_state().strategy(1), status="active")
    assert new_sources == {_path(k): _state().strategy(k).code for k in (4, 5)}
    assert again.strategy(5).code_ref == _path(5) and again.strategy(5).code == ""


def test_a_missing_source_stays_a_reference() -> None:
    folded, sources = evox_fold.fold(_state(), _path)
    partial = {path: code for path, code in sources.items() if path != _path(1)}
    loaded, missing = evox_fold.unfold(folded, partial.get)
    assert missing == (_path(1),) and evox_fold.is_folded(loaded.strategy(1))
    # Even kept inline, an unreadable source keeps its reference rather than becoming empty code.
    kept = replace(loaded, active=1, strategies=tuple(
        replace(s, status="active") if s.id == 1 else s for s in loaded.strategies))
    again, new_sources = evox_fold.fold(kept, _path)
    assert again.strategy(1).code_ref == _path(1) and _path(1) not in new_sources
