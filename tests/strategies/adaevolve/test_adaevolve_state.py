"""Tests for strategies/adaevolve_state.py and adaevolve_markdown.py: the state block's round trip and hand edits."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoloop_py.errors import StateError
from autoloop_py.state.population import empty_population, parse_population, render_population, with_strategy_state
from autoloop_py.strategies.adaevolve.config import AdaEvolveConfig
from autoloop_py.strategies.adaevolve.markdown import parse_state_block, render_state_block
from autoloop_py.strategies.adaevolve.paradigms import active_paradigm
from autoloop_py.strategies.adaevolve.state import (
    AdaEvolveState,
    IslandState,
    Paradigm,
    TriedParadigm,
    initial_state,
    raw_value,
)
from autoloop_py.strategies.adaevolve.strategy import decide

CONFIG = AdaEvolveConfig()
LOWER = replace(CONFIG, direction="lower")
STATE = AdaEvolveState(
    islands=(
        IslandState(g=0.0939999999, best=1.2, improvements=2, evaluations=3, visits=3, decayed_visits=2.71,
                    decayed_reward=0.81),
        IslandState(g=0.1, best=1.0),
        IslandState(preset="quality"),
    ),
    iteration=12, current_island=1, global_best=1.2, best_program_id=7, ucb_normaliser=1.2, last_spawn=10,
    rng_seed=42, rng_draws=31, window=(1, 0, 0, 1), current_paradigm=1, best_at_gen=1.0, best_during=1.2,
    paradigms=(
        Paradigm("Replace the grid with a hex lattice — then relax", "Seed the points on a lattice. Relax them.",
                 "numpy.meshgrid", "score", "keep the boundary fixed", uses=2),
        Paradigm("Anneal the positions", "Random moves with a cooling schedule.", "scipy.optimize.dual_annealing",
                 uses=1),
        Paradigm("Retired idea", "No longer useful.", "math.fsum", retired=True),
    ),
    tried=(TriedParadigm("Greedy insertion", "heapq.heappush", "SUCCESS", 0.0123),
           TriedParadigm("Brute force", "itertools.product", "FAILED", 0.0)),
    guide_failed_at=9, guide_failures=2,
)


def block(state: AdaEvolveState = STATE, config: AdaEvolveConfig = CONFIG) -> str:
    return render_state_block(state, config)


def error_of(text: str, config: AdaEvolveConfig = CONFIG) -> str:
    with pytest.raises(StateError) as caught:
        parse_state_block(text, "memory/p.md", 40, config)
    return str(caught.value)


# --- round trip -----------------------------------------------------------------------------------


def test_the_block_reads_back_as_the_same_state() -> None:
    text = block()
    assert parse_state_block(text, "memory/p.md", 40, CONFIG) == STATE
    assert render_state_block(parse_state_block(text, "p.md", 0, CONFIG), CONFIG) == text


def test_the_block_shows_the_spec_tables() -> None:
    text = block()
    assert text.startswith("### ⚙️ Strategy State\n")
    assert "| iteration | 12 |\n| current_island | 1 |\n| global_best | 1.2 |\n| best_program_id | 7 |\n" in text
    assert ("| Island | Preset | G | Best | Improvements | Evaluations | Visits | Decayed visits | Decayed reward "
            "| Intensity* | UCB* | Members* |") in text
    assert "| 0 | balanced | 0.0939999999 | 1.2 | 2 | 3 | 3 | 2.71 | 0.81 | 0.4179 | 1.6027 | 0 |" in text
    assert "| 2 | quality | 0 | — | 0 | 0 | 0 | 0 | 0 | 0.5000 | — | 0 |" in text
    assert "| window | 1,0,0,1 |\n| cur | 1 |" in text
    assert "1. [uses 2/2] Replace the grid with a hex lattice — then relax — numpy.meshgrid\n" in text
    assert "3. [uses 0/2 · retired] Retired idea — math.fsum\n" in text
    assert "- SUCCESS: heapq.heappush — Greedy insertion (+0.0123)\n" in text
    assert "- FAILED: itertools.product — Brute force (+0.0000)\n" in text


def test_empty_text_is_the_initial_state_and_renders_without_ideas() -> None:
    state = parse_state_block("", "p.md", 0, CONFIG)
    assert state == initial_state(CONFIG)
    assert (len(state.islands), state.last_spawn, state.global_best) == (2, -30, -math.inf)
    text = block(state)
    assert "Active ideas: none.\n\nTried ideas: none.\n" in text
    assert "| global_best | — |" in text and "| window | — |" in text
    assert parse_state_block(text, "p.md", 0, CONFIG) == state


def test_members_count_each_islands_archive() -> None:
    from test_adaevolve import ARCHIVE  # the decision-engine tests' archive: four on island 0, one on 1

    text = render_state_block(STATE, CONFIG, ARCHIVE)
    assert "| 1.6027 | 4 |" in text and "| 1 | balanced | 0.1 | 1 | 0 | 0 | 0 | 0 | 0 | 0.4159 | — | 1 |" in text


def test_lower_is_better_shows_raw_metrics() -> None:
    state = replace(STATE, global_best=-9.5, islands=(IslandState(best=-9.5), IslandState()), best_at_gen=0.0,
                    best_during=-0.0, current_island=0)
    text = block(state, LOWER)
    assert "| global_best | 9.5 |" in text and "| best_at_gen | 0 |" in text and "| best_during | 0 |" in text
    assert parse_state_block(text, "p.md", 0, LOWER) == state
    assert raw_value(0.0, "lower") == 0.0 and str(raw_value(0.0, "lower")) == "0.0"


def test_the_block_survives_the_population_section() -> None:
    population = with_strategy_state(empty_population("AdaEvolve"), block())
    again = parse_population(render_population(population))
    assert again.strategy_state == block()


_finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
_positive = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
_best = st.one_of(st.just(-math.inf), _finite)
_words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")),
                 min_size=1, max_size=30).map(lambda s: " ".join(s.split())).filter(bool)
_tool = st.from_regex(r"[a-z]{1,8}(\.[a-z_]{1,8}){0,2}", fullmatch=True)
_islands = st.builds(IslandState, preset=st.sampled_from(["balanced", "quality", "diversity"]), g=_positive,
                     best=_best, improvements=st.integers(0, 999), evaluations=st.integers(0, 999),
                     visits=st.integers(0, 999), decayed_visits=_positive, decayed_reward=_positive)
_paradigms = st.builds(Paradigm, idea=_words, description=_words, approach_type=_tool, what_to_optimize=_words,
                       cautions=st.one_of(st.just(""), _words), uses=st.integers(0, 9), retired=st.booleans())
_tried = st.builds(TriedParadigm, idea=_words, approach_type=_tool, outcome=st.sampled_from(["SUCCESS", "FAILED"]),
                   gain=st.floats(min_value=0, max_value=1e3).map(lambda g: round(g, 4)))


@st.composite
def states(draw: st.DrawFn) -> AdaEvolveState:
    islands = tuple(draw(st.lists(_islands, min_size=1, max_size=5)))
    ideas = tuple(draw(st.lists(_paradigms, max_size=3)))
    return AdaEvolveState(
        islands=islands, iteration=draw(st.integers(0, 10**6)), current_island=draw(st.integers(0, len(islands) - 1)),
        global_best=draw(_best), best_program_id=draw(st.one_of(st.none(), st.integers(1, 10**6))),
        ucb_normaliser=draw(_best), last_spawn=draw(st.integers(-100, 10**6)), rng_seed=draw(st.integers(-99, 10**9)),
        rng_draws=draw(st.integers(0, 10**6)), window=tuple(draw(st.lists(st.sampled_from([0, 1]), max_size=10))),
        paradigms=ideas, current_paradigm=draw(st.integers(0, len(ideas) - 1)) if ideas else 0,
        best_at_gen=draw(_best), best_during=draw(_best), tried=tuple(draw(st.lists(_tried, max_size=3))),
        guide_failed_at=draw(st.one_of(st.none(), st.integers(0, 10**6))), guide_failures=draw(st.integers(0, 99)),
    )


@settings(max_examples=60, deadline=None)
@given(states(), st.sampled_from(["higher", "lower"]))
def test_hypothesis_round_trip(state: AdaEvolveState, direction: str) -> None:
    config = replace(CONFIG, direction=direction, presets=CONFIG.presets)
    text = render_state_block(state, config)
    back = parse_state_block(text, "p.md", 0, config)
    assert back == state
    assert render_state_block(back, config) == text


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_junk_raises_only_state_errors(text: str) -> None:
    try:
        state = parse_state_block("### ⚙️ Strategy State\n\n" + text, "p.md", 0, CONFIG)
    except StateError as error:
        assert error.path is not None and error.line is not None
        return
    assert state.islands and 0 <= state.current_island < len(state.islands)


# --- hand edits ---------------------------------------------------------------------------------------------


def test_an_edited_g_is_what_the_next_decision_uses() -> None:
    text = block(initial_state(CONFIG)).replace("| 0 | balanced | 0 |", "| 0 | balanced | 4 |")
    state = parse_state_block(text, "p.md", 0, CONFIG)
    assert state.islands[0].g == 4.0
    assert round(decide(state, (), CONFIG, iter([]).__next__).intensity, 10) == 0.2666666666  # type: ignore[arg-type]


def test_retiring_an_idea_by_hand_skips_it() -> None:
    text = block().replace("2. [uses 1/2] Anneal", "2. [uses 1/2 · retired] Anneal")
    state = parse_state_block(text, "p.md", 0, CONFIG)
    assert state.paradigms[1].retired and active_paradigm(state, CONFIG) is None
    assert parse_state_block(block().replace("[uses 1/2]", "[retired]"), "p.md", 0, CONFIG).paradigms[1] == replace(
        STATE.paradigms[1], uses=0, retired=True)


def test_derived_columns_are_ignored_and_reordered_columns_still_read() -> None:
    text = block().replace("| 0.4179 | 1.6027 | 0 |", "| 9 | nonsense | 77 |")
    assert parse_state_block(text, "p.md", 0, CONFIG) == STATE


def test_unknown_fields_are_ignored_and_a_long_window_is_trimmed() -> None:
    text = block().replace("| rng_draws | 31 |", "| rng_draws | 31 |\n| note | hello |")
    text = text.replace("| window | 1,0,0,1 |", "| window | " + ",".join(["0"] * 12) + " |")
    state = parse_state_block(text, "p.md", 0, CONFIG)
    assert state.window == (0,) * 10 and state.rng_draws == 31


# --- errors name the line ------------------------------------------------------------------------------------


def line_of(text: str, needle: str) -> int:
    """Returns the file line (block at 0-based line 40) of the first line containing needle."""
    return next(i for i, line in enumerate(text.splitlines()) if needle in line) + 41


def test_a_non_numeric_g_names_its_line() -> None:
    text = block().replace("| 1 | balanced | 0.1 |", "| 1 | balanced | lots |")
    assert error_of(text) == (f"memory/p.md:{line_of(text, 'lots')}: island 1's G 'lots' is not a number >= 0; "
                              "fix the value")


@pytest.mark.parametrize(("old", "new", "message"), [
    ("| 1 | balanced | 0.1 |", "| 1 | balanced | nan |", "island 1's G 'nan' is not a number >= 0"),
    ("| 1 | balanced | 0.1 |", "| 1 | balanced | -1 |", "island 1's G '-1' is not a number >= 0"),
    ("| 2 | quality |", "| 5 | quality |", "island '5' is out of place: rows are numbered 0..K-1, so this one should be 2"),
    ("| 2 | quality |", "| 2 | chaos |", "island 2's preset 'chaos' is not in the playbook's presets"),
    ("| current_island | 1 |", "| current_island | 3 |", "current_island 3 is not an island (0–2)"),
    ("| window | 1,0,0,1 |", "| window | 1,2 |", "window '1,2' must list 0s and 1s"),
    ("| cur | 1 |", "| cur | 5 |", "cur 5 is not an active idea (0–2)"),
    ("| best_program_id | 7 |", "| best_program_id | seven |", "best_program_id 'seven' is not a whole number >= 0 (or —)"),
    ("[uses 2/2]", "[used twice]", "idea tag [used twice] must read `[uses N/M]`"),
    ("(+0.0123)", "(+0.01.23)", "the gain '+0.01.23' is not a finite number"),
])
def test_bad_values_name_their_line(old: str, new: str, message: str) -> None:
    text = block().replace(old, new)
    found = error_of(text)
    assert found.startswith(f"memory/p.md:{line_of(text, new)}: {message}")


def test_a_missing_islands_table_or_column_is_an_error() -> None:
    without = block().split("#### Islands")[0]
    assert error_of(without) == "memory/p.md:41: the strategy state has no `#### Islands` table; restore it from git history"
    text = block().replace("| Decayed reward |", "| Reward |")
    assert "the islands table has no `decayed reward` column" in error_of(text)


def test_a_repeated_field_is_an_error() -> None:
    text = block().replace("| rng_draws | 31 |", "| rng_draws | 31 |\n| rng_draws | 32 |")
    assert "field rng_draws appears twice" in error_of(text)
