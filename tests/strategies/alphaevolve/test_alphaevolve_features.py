"""AlphaEvolve's feature dimensions: read as the playbook names them, bucketed by island, lines or a metric's bin."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.errors import ProgramError
from autoloop_py.program.playbook import Playbook
from autoloop_py.state import population as pop
from autoloop_py.strategies.alphaevolve.config import AlphaEvolveConfig, Island, parse_alphaevolve_config
from autoloop_py.strategies.alphaevolve.engine import AlphaEvolveEngine
from autoloop_py.strategies.alphaevolve.features import (
    FeatureDimension,
    FeatureRange,
    bin_of,
    bucket,
    parse_ranges,
    render_ranges,
    updated_ranges,
)
from autoloop_py.strategies.alphaevolve.strategy import AlphaEvolve, cell_for
from autoloop_py.strategies.base import StrategyContext
from tests.strategies.alphaevolve.test_alphaevolve_config import PLAYBOOK

DIR = Path(".autoloop/programs/p")
LINES_BULLET = ("- **Dimension 2 — `tour_length`**: bucket into `small` / `medium` / `large` using a concrete "
                "threshold (<25 / 25–60 / >60 lines of the evolved block).")
ISLANDS = (Island(0, "greedy"), Island(1, "local"), Island(2, "exact"))


def parsed(dimension_2: str, dimension_1: str = "") -> AlphaEvolveConfig:
    text = PLAYBOOK.replace(LINES_BULLET, dimension_2)
    if dimension_1:
        text = text.replace("- **Dimension 1 — `approach_family`**: buckets are the islands above.", dimension_1)
    return parse_alphaevolve_config(Playbook("alphaevolve", DIR / "strategy/alphaevolve.md", text, DIR), {})


def test_a_metric_dimension_is_named_and_binned_as_the_playbook_says() -> None:
    config = parsed("- **Dimension 2 — `runtime_ms`**: bucket into 5 bins over the running min–max.")
    assert config.dimensions == (FeatureDimension("approach_family", "islands"), FeatureDimension("runtime_ms", "metric", 5))
    assert config.feature_dimensions == ("approach_family", "runtime_ms")


def test_bucket_words_give_the_bin_count_and_a_bullet_saying_lines_is_a_line_count() -> None:
    named = parsed("- **Dimension 2 — `memory_mb`**: bucket into `small` / `medium` / `large` using the metric.")
    assert named.dimensions[1] == FeatureDimension("memory_mb", "metric", 3)
    lines = parsed(LINES_BULLET)
    assert lines.dimensions[1].kind == "lines" and lines.complexity_thresholds == (25, 60)
    dim1 = parsed(LINES_BULLET, "- **Dimension 1 — `accuracy`**: 4 bins of the metric.")
    assert dim1.dimensions[0] == FeatureDimension("accuracy", "metric", 4)


def test_a_line_threshold_with_one_number_names_the_fix() -> None:
    with pytest.raises(ProgramError, match="threshold names 1 distinct numbers.*name a metric of the evaluator"):
        parsed("- **Dimension 2 — `code_complexity`**: lines, threshold 40.")


def test_bins_cut_the_running_range_evenly() -> None:
    span = FeatureRange(0.0, 1.0)
    assert [bin_of(v, span, 4) for v in (0.0, 0.24, 0.25, 0.5, 0.99, 1.0)] == [0, 0, 1, 2, 3, 3]
    assert bin_of(7.0, FeatureRange(7.0, 7.0), 4) == 2  # one value seen: the middle bin


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=20), st.integers(1, 10))
def test_every_value_seen_falls_in_a_bin(values: list[float], bins: int) -> None:
    dimension = (FeatureDimension("m", "metric", bins),)
    ranges: dict[str, FeatureRange] = {}
    for value in values:
        ranges = updated_ranges(ranges, dimension, {"m": value})
        assert 0 <= bin_of(value, ranges["m"], bins) < bins
    assert ranges["m"] == FeatureRange(min(values), max(values))
    assert parse_ranges(render_ranges(ranges)) == ranges


def test_a_missing_or_unusable_metric_is_no_bin() -> None:
    dimension = FeatureDimension("m", "metric", 3)
    for metrics in ({}, {"m": True}, {"m": "fast"}, {"m": float("nan")}):
        assert bucket(dimension, "greedy", "", (40, 100), metrics, updated_ranges({}, (dimension,), metrics)) == "n/a"


def test_the_cell_uses_the_metric_and_the_engine_keeps_the_running_range() -> None:
    config = AlphaEvolveConfig(islands=ISLANDS, dimensions=(FeatureDimension("approach_family", "islands"),
                                                             FeatureDimension("speed", "metric", 2)))
    assert cell_for(ISLANDS[1], "x = 1\n", config, {"speed": 3.0}, {"speed": FeatureRange(1.0, 3.0)}) == (
        "local", "speed 2/2")
    engine = AlphaEvolveEngine(config)
    population = pop.empty_population()
    cells = []
    for speed in (5.0, 1.0, 2.0, 4.9):
        child = pop.Candidate(0, 1, speed, 1, "exploration", code="x = 1\n", status="rejected")
        population, recorded = engine.record(population, child, None, {"combined": speed, "speed": speed},
                                             direction="higher", iteration=1, rng=random.Random(0))
        cells.append(recorded.cell)
    assert cells == [("local", "speed 2/2"), ("local", "speed 1/2"), ("local", "speed 1/2"), ("local", "speed 2/2")]
    assert parse_ranges(population.strategy_state) == {"speed": FeatureRange(1.0, 5.0)}


def test_a_program_with_history_seeds_its_population_with_the_current_best() -> None:
    config = AlphaEvolveConfig(islands=ISLANDS)
    history = StrategyContext((), ("accepted",), 0.7, 5, "higher", 1)
    decision = AlphaEvolve(config).decide(history, random.Random(0))
    assert (decision.operator, decision.island, decision.parents, decision.as_is) == ("seed", 0, (), True)
    fresh = AlphaEvolve(config).decide(StrategyContext((), (), None, 1, "higher", 1), random.Random(0))
    assert (fresh.operator, fresh.as_is) == ("exploration", False)


def test_in_a_parallel_tick_only_the_first_slot_seeds() -> None:
    from autoloop_py.strategies.slots import Slot

    config = AlphaEvolveConfig(islands=ISLANDS)
    # A fresh program, its baseline measured: the first slot records the Target as the first member.
    decisions = [AlphaEvolve(config).decide(StrategyContext((), (), 0.7, 1 + k, "higher", 1, Slot(k, 3)),
                                            random.Random(0)) for k in range(3)]
    assert [d.as_is for d in decisions] == [True, False, False]
    unknown = [AlphaEvolve(config).decide(StrategyContext((), (), None, 1 + k, "higher", 1, Slot(k, 3)),
                                          random.Random(0)) for k in range(3)]
    assert [d.as_is for d in unknown] == [False, False, False]  # nothing evaluated yet: nothing to seed with
    later = [AlphaEvolve(config).decide(StrategyContext((), ("accepted",), 0.7, 5 + k, "higher", 1, Slot(k, 3)),
                                        random.Random(0)) for k in range(3)]
    assert [d.as_is for d in later] == [True, False, False]


def test_a_dimension_naming_no_metric_of_the_evaluation_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    config = AlphaEvolveConfig(islands=ISLANDS, dimensions=(FeatureDimension("approach_family", "islands"),
                                                             FeatureDimension("speeed", "metric", 2)))
    child = pop.Candidate(0, 0, 1.0, 1, "exploration", code="x = 1\n", status="rejected")
    with caplog.at_level("WARNING"):
        _, recorded = AlphaEvolveEngine(config).record(pop.empty_population(), child, None, {"speed": 1.0},
                                                       direction="higher", iteration=1, rng=random.Random(0))
    assert recorded.cell == ("greedy", "n/a")
    assert "the feature dimension `speeed` is no numeric metric of this evaluation (it printed speed)" in caplog.text


def test_fixed_thresholds_from_the_playbook_bin_a_metric_without_the_running_range() -> None:
    config = parsed("- **Dimension 2 — `latency_ms`**: thresholds 10, 50 (ms).")
    dimension = config.dimensions[1]
    assert dimension == FeatureDimension("latency_ms", "metric", 3, (10.0, 50.0))
    cells = [bucket(dimension, "greedy", "", (40, 100), {"latency_ms": v}, {}) for v in (0.5, 9.99, 10, 49.9, 50, 900)]
    assert cells == ["latency_ms 1/3", "latency_ms 1/3", "latency_ms 2/3", "latency_ms 2/3", "latency_ms 3/3",
                     "latency_ms 3/3"]
    assert bucket(dimension, "greedy", "", (40, 100), {}, {}) == "n/a"
    ranged = parsed("- **Dimension 2 — `error_rate`**: threshold 0.01–0.1, and -1.5.").dimensions[1]
    assert ranged.thresholds == (-1.5, 0.01, 0.1) and ranged.bins == 4
