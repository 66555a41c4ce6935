"""EvoX's `### ⚙️ Strategy State` block: render/parse round trips, a person's edit, and errors at the real line."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.errors import StateError
from autoloop_py.state import population as pop
from autoloop_py.strategies.evox import strategy as evox
from autoloop_py.strategies.evox.config import EvoXConfig
from autoloop_py.strategies.evox.markdown import parse_state_block, render_state_block
from autoloop_py.strategies.evox.strategy import EvoXState, StrategyRecord

INITIAL = '"""Initial."""\n\nclass EvolvedStrategy(StrategyBase):\n    pass\n'
CONFIG = EvoXConfig(switch_interval=4, initial_code=INITIAL)
LOWER = replace(CONFIG, direction="lower")
TRICKY = 'X = """\n### not a heading\n```\n````python\n"""\n\nclass EvolvedStrategy(StrategyBase):\n    pass\n'


def _full_state() -> EvoXState:
    s0 = StrategyRecord(0, INITIAL, "scored", 0.125, 1, 9, -1.5, -1.25, None, "passed", evox.checksum(INITIAL),
                        "the initial strategy")
    s1 = StrategyRecord(1, "import os\n", "failed-validation", parent=0, validation="imports: line 1: no `os`",
                        checksum=evox.checksum("import os\n"), note="tries os")
    s2 = StrategyRecord(2, TRICKY, "active", None, 9, None, -1.25, None, 0, "passed", evox.checksum(TRICKY), "")
    return EvoXState(
        switch_interval=4, stagnant_count=2, last_tracked_best=-1.25, evolve_due=True, window_start_iteration=9,
        window_start_score=-1.25, window_bests=(-1.25, -1.2), active=2, pending=2, fallback=0,
        best_strategy_j=0.125, evolutions=2, meta_failures=1, meta_failures_in_row=1, meta_backoff=1,
        labels="generated",
        diverge_label="## IMPORTANT: go wide\n\n```python\nx = 1\n```\n### Goal", refine_label="## IMPORTANT: polish",
        rng_seed=7, rng_draws=12, strategies=(s0, s1, s2),
    )


def test_the_initial_state_round_trips() -> None:
    state = evox.initial_state(CONFIG)
    text = render_state_block(state, "higher")
    assert text.startswith("### ⚙️ Strategy State\n")
    assert "##### Strategy S0 · J pending · window 1–5 · status active\n" in text
    assert parse_state_block(text, "f.md", 0, CONFIG) == state
    assert parse_state_block("", "f.md", 0, CONFIG) == state


def test_a_full_state_round_trips_with_raw_values_shown() -> None:
    state = _full_state()
    text = render_state_block(state, "lower")
    assert parse_state_block(text, "f.md", 0, LOWER) == state
    assert render_state_block(parse_state_block(text, "f.md", 0, LOWER), "lower") == text
    assert "##### Strategy S0 · J 0.125 · window 1–9 · status scored\n" in text
    assert "##### Strategy S1 · J — · window — · status failed-validation\n" in text
    assert "##### Strategy S2 · J pending · window 9–13 · status active\n" in text
    assert "- **Score change**: 1.5 → 1.25\n" in text
    assert "| window_bests | 1.25, 1.2 |\n" in text
    assert text.index("Strategy S2") < text.index("Strategy S1") < text.index("Strategy S0")


def test_the_block_stays_one_population_block() -> None:
    text = render_state_block(_full_state(), "higher")
    population = pop.with_strategy_state(pop.empty_population("EvoX"), text)
    back = pop.parse_population(pop.render_population(population))
    assert parse_state_block(back.strategy_state, "f.md", 0, CONFIG) == _full_state()


def test_a_hand_edit_of_the_active_code_is_read_and_detected() -> None:
    state = evox.initial_state(CONFIG)
    text = render_state_block(state, "higher").replace("    pass\n", "    EDITED = True\n")
    edited = parse_state_block(text, "f.md", 0, CONFIG)
    assert edited.strategy(0).code.endswith("    EDITED = True\n")
    assert evox.edited(edited) and not evox.edited(state)


def _line_of(text: str, needle: str) -> int:
    return text.splitlines().index(next(line for line in text.splitlines() if needle in line))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("| stagnant_count | 2 |", "| stagnant_count | two |", "stagnant_count 'two' is not a whole number >= 0"),
        ("| active | S2 |", "| active | S9 |", "active S9 is not a listed strategy"),
        ("| labels | generated |", "| labels | maybe |", "labels 'maybe' is not pending, default"),
        ("| rng_draws | 12 |", "| rng_draws | 12 |\n| colour | blue |", "unknown field 'colour'"),
        ("status scored", "status retired", "status 'retired' must be one of"),
        ("- **Score change**: 1.5 → 1.25", "- **Score change**: 1.5 to 1.25", "score change '1.5 to 1.25'"),
        ("##### Strategy S1 ·", "##### Strategy S0 ·", "strategy S0 appears twice"),
        ("· J 0.125 ·", "· J big ·", "J 'big' is not a finite number"),
    ],
)
def test_errors_name_the_real_line(old: str, new: str, message: str) -> None:
    text = render_state_block(_full_state(), "lower")
    assert old in text
    broken = text.replace(old, new, 1)
    with pytest.raises(StateError) as raised:
        parse_state_block(broken, "prog.md", 40, LOWER)
    assert message in raised.value.message
    last = new.splitlines()[-1]
    if "appears twice" in message:
        last = "##### Strategy S0 · J 0.125"
    if "not a listed strategy" in message:
        last = "| active | S9 |"
    assert raised.value.line == 40 + _line_of(broken, last) + 1
    assert str(raised.value.path) == "prog.md"


def test_a_folded_entry_shows_its_reference_instead_of_its_code() -> None:
    state = _full_state()
    folded = replace(state, strategies=(replace(state.strategies[0], code="", code_ref="strategies/fm/S0.py"),
                                        *state.strategies[1:]))
    text = render_state_block(folded, "higher")
    entry = text[text.index("##### Strategy S0"):]
    assert "- **Code**: strategies/fm/S0.py on memory/autoloop\n" in entry and "<details>" not in entry
    assert parse_state_block(text, "f.md", 0, CONFIG) == folded
    # Read back, the entry shows the code and keeps its reference.
    loaded = replace(folded, strategies=(replace(folded.strategies[0], code=INITIAL), *folded.strategies[1:]))
    both = render_state_block(loaded, "higher")
    assert "- **Code**: strategies/fm/S0.py on memory/autoloop\n" in both and both.count("<details><summary>Code") == 3
    assert parse_state_block(both, "f.md", 0, CONFIG) == loaded
    quoted = text.replace("strategies/fm/S0.py on memory/autoloop", "`strategies/fm/S0.py` on `memory/autoloop`")
    assert parse_state_block(quoted, "f.md", 0, CONFIG) == folded


def test_a_folded_entry_needs_a_readable_reference() -> None:
    state = _full_state()
    folded = replace(state, strategies=(replace(state.strategies[0], code="", code_ref="strategies/fm/S0.py"),
                                        *state.strategies[1:]))
    text = render_state_block(folded, "higher")
    with pytest.raises(StateError, match="Code 'strategies/fm/S0.py' is not `<path> on memory/autoloop`"):
        parse_state_block(text.replace(" on memory/autoloop", ""), "f.md", 0, CONFIG)
    with pytest.raises(StateError, match="strategy S0 has no code"):
        parse_state_block(text.replace("- **Code**: strategies/fm/S0.py on memory/autoloop\n", ""), "f.md", 0, CONFIG)


def test_a_block_without_strategies_is_refused() -> None:
    text = render_state_block(_full_state(), "higher")
    cut = text[: text.index("#### Search strategies")]
    with pytest.raises(StateError, match="no `#### Search strategies` section"):
        parse_state_block(cut, "f.md", 0, CONFIG)


# ---------------------------------------------------------------- hypothesis

_WORD = st.text(alphabet="abcdefghij klmnop:;,.!?()'\"`#*_-=+<>/0123456789", min_size=0, max_size=30)
_ONE_LINE = _WORD.map(lambda s: " ".join(s.split())).filter(lambda s: s != "—")
_CODE_LINE = st.text(alphabet="abc def#`'\"()=:_-<>|~ 0123456789", max_size=25)
_CODE = st.lists(_CODE_LINE, max_size=8).map(lambda lines: "".join(line.rstrip() + "\n" for line in lines))
_LABEL = st.lists(_CODE_LINE, max_size=5).map(lambda lines: "\n".join(line.rstrip() for line in lines).strip("\n"))
_SCORE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
_J = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
_REF = st.from_regex(r"strategies/[a-z]([a-z_ ]{0,6}[a-z])?/S[0-9]{1,3}\.py", fullmatch=True)


@st.composite
def _records(draw: st.DrawFn, count: int) -> tuple[StrategyRecord, ...]:
    out = []
    for k in range(count):
        status = draw(st.sampled_from(evox.STATUSES))
        ran = draw(st.booleans())
        scored = ran and draw(st.booleans())
        start = draw(st.integers(0, 10_000)) if ran else None
        # A folded entry holds no code, or the code read back from its file.
        code_ref = draw(st.none() | _REF)
        code = draw(st.just("") | _CODE) if code_ref is not None else draw(_CODE)
        out.append(StrategyRecord(
            id=k, code=code, code_ref=code_ref, status=status, j=draw(_J) if scored else None, window_start=start,
            window_end=(start or 0) + draw(st.integers(0, 50)) if scored else None,
            start_score=draw(st.none() | _SCORE), end_score=draw(_SCORE) if scored else None,
            parent=draw(st.none() | st.integers(0, max(0, k - 1))) if k else None,
            validation=draw(_ONE_LINE), checksum=draw(st.text("0123456789abcdef", max_size=12)), note=draw(_ONE_LINE),
        ))
    return tuple(out)


@st.composite
def _states(draw: st.DrawFn) -> EvoXState:
    strategies = draw(st.integers(1, 4).flatmap(_records))
    ids = st.sampled_from([s.id for s in strategies])
    return EvoXState(
        switch_interval=draw(st.integers(1, 50)), stagnant_count=draw(st.integers(0, 50)),
        last_tracked_best=draw(st.none() | _SCORE), evolve_due=draw(st.booleans()),
        window_start_iteration=draw(st.integers(0, 10_000)), window_start_score=draw(st.none() | _SCORE),
        window_bests=tuple(draw(st.lists(_SCORE, max_size=6))), active=draw(ids), pending=draw(st.none() | ids),
        fallback=draw(st.none() | ids), best_strategy_j=draw(st.none() | _J), evolutions=draw(st.integers(0, 99)),
        meta_failures=draw(st.integers(0, 99)), meta_failures_in_row=draw(st.integers(0, 99)),
        meta_backoff=draw(st.integers(0, 8)), labels=draw(st.sampled_from(evox.LABEL_STATES)),
        diverge_label=draw(_LABEL), refine_label=draw(_LABEL), rng_seed=draw(st.integers(0, 2**31)),
        rng_draws=draw(st.integers(0, 10_000)), strategies=strategies,
    )


@settings(max_examples=60, deadline=None)
@given(_states(), st.sampled_from(["higher", "lower"]))
def test_parse_inverts_render(state: EvoXState, direction: str) -> None:
    config = replace(CONFIG, direction=direction)
    text = render_state_block(state, direction)
    assert parse_state_block(text, "f.md", 0, config) == state


@settings(max_examples=60, deadline=None)
@given(_states(), st.integers(0, 2000), st.integers(0, 400), st.text(max_size=6))
def test_damaged_blocks_raise_only_state_errors(state: EvoXState, at: int, length: int, junk: str) -> None:
    text = render_state_block(state, "higher")
    at = at % len(text)
    try:
        parse_state_block(text[:at] + junk + text[at + length:], "f.md", 0, CONFIG)
    except StateError:
        pass
