"""The gain policy: due programs ordered by recent improvement per cost, with exploration (a UCB1 bandit)."""

from __future__ import annotations

import random
from collections import Counter

from autoloop_py.loop.tick.gain import order_by_gain
from autoloop_py.state.schedule_table import Arm, observe, observed_table, parse_schedule_table


def _simulate(ticks: int, gains: dict[str, list[float]], seed: int = 7) -> Counter[str]:
    """Runs ticks of one program each among the due ones, recording the scripted gain of each pick in schedule.md."""
    table: str | None = None
    picks: Counter[str] = Counter()
    rng = random.Random(seed)
    for _ in range(ticks):
        arms = parse_schedule_table(table) if table else {}
        [chosen, *_] = order_by_gain(sorted(gains), arms, rng)
        gain = gains[chosen][picks[chosen] % len(gains[chosen])]
        picks[chosen] += 1
        table = observed_table(table, chosen, gain, 1.0, 0.0)
    return picks


def test_a_program_that_gains_nothing_is_picked_less_than_one_that_keeps_improving() -> None:
    picks = _simulate(60, {"stuck": [0.0], "climbing": [0.1]})
    assert picks["stuck"] + picks["climbing"] == 60
    # Exploration keeps trying the stuck program now and then, but the improving one gets most of the ticks.
    assert 1 <= picks["stuck"] < picks["climbing"] / 2, picks


def test_after_twenty_iterations_without_gain_the_plan_prefers_the_improving_program() -> None:
    stuck, climbing = Arm("stuck"), Arm("climbing")
    for _ in range(20):
        stuck = observe(stuck, 0.0, 1.0, 0.0)
        climbing = observe(climbing, 0.05, 1.0, 0.0)
    order = order_by_gain(["stuck", "climbing"], {"stuck": stuck, "climbing": climbing}, random.Random(0))
    assert order == ["climbing", "stuck"]


def test_cost_counts_minutes_and_dollars() -> None:
    cheap, dear = Arm("cheap", 10, 1.0, 10, 0.0), Arm("dear", 10, 1.0, 10, 1.0)  # one dollar = 125 runner minutes
    assert order_by_gain(["dear", "cheap"], {"cheap": cheap, "dear": dear}, random.Random(0), exploration=0) == [
        "cheap", "dear"]


def test_a_hand_edit_of_the_table_is_honoured() -> None:
    table = observed_table(observed_table(None, "a", 1.0, 1.0, 0.0), "b", 0.0, 1.0, 0.0)
    arms = parse_schedule_table(table)
    assert order_by_gain(["a", "b"], arms, random.Random(0), exploration=0) == ["a", "b"]
    edited = table.replace("| b | 1 | 0 | 1 | 0 |", "| b | 1 | 50 | 1 | 0 |")
    assert edited != table
    assert order_by_gain(["a", "b"], parse_schedule_table(edited), random.Random(0), exploration=0) == ["b", "a"]


def test_a_program_never_tried_comes_first_and_ties_follow_the_seeded_rng() -> None:
    arms = {"old": Arm("old", 5, 5.0, 5, 0)}
    assert order_by_gain(["old", "new"], arms, random.Random(0))[0] == "new"
    orders = {tuple(order_by_gain(["x", "y", "z"], {}, random.Random(seed))) for seed in range(20)}
    assert len(orders) > 1
    assert order_by_gain(["x", "y", "z"], {}, random.Random(3)) == order_by_gain(["x", "y", "z"], {}, random.Random(3))
