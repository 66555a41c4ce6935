"""schedule.md: the gain scheduler's rows, decayed per iteration, rendered and read back; a bad row names its line."""

from __future__ import annotations

import pytest

from autoloop_py.errors import StateError
from autoloop_py.state.schedule_table import (
    WINDOW,
    Arm,
    improvement,
    observe,
    observed_table,
    parse_schedule_table,
    render_schedule_table,
)


def test_rows_round_trip_through_the_markdown_table() -> None:
    arms = {"b": Arm("b", 3.0, 0.25, 3.0, 0.02), "a": Arm("a", 1.0, 0.0, 1.0, 0.0)}
    text = render_schedule_table(arms)
    assert text.startswith("# Schedule\n") and "| a | 1 | 0 | 1 | 0 |" in text
    assert parse_schedule_table(text) == arms


def test_an_iteration_decays_the_older_ones_so_a_window_counts() -> None:
    arm = Arm("a")
    for _ in range(200):
        arm = observe(arm, 1.0, 2.0, 0.01)
    # A steady yield converges to WINDOW iterations' worth.
    assert arm.iterations == pytest.approx(WINDOW, rel=1e-3) and arm.gain == pytest.approx(WINDOW, rel=1e-3)
    assert arm.minutes == pytest.approx(2 * WINDOW, rel=1e-3)
    for _ in range(3 * WINDOW):
        arm = observe(arm, 0.0, 2.0, 0.0)
    assert arm.gain < 0.1 * WINDOW  # an old gain fades once nothing more comes
    assert observe(Arm("a"), -5.0, 1.0, 0.0).gain == 0.0


def test_improvement_follows_the_direction() -> None:
    assert improvement(1.0, 1.5, "higher") == 0.5 and improvement(1.0, 0.5, "lower") == 0.5
    assert improvement(1.0, 1.0, "higher") == 0.0 and improvement(None, 2.0, "higher") == 0.0


def test_a_hand_edited_table_is_kept_as_written_beside_the_updated_row() -> None:
    text = render_schedule_table({"a": Arm("a", 5, 0.0, 5, 0)})
    text = text.replace("| a | 5 | 0 | 5 | 0 |", "| a | 5 | 9 | 5 | 0 |")
    arms = parse_schedule_table(observed_table(text, "b", 1.0, 1.0, 0.0))
    assert arms["a"] == Arm("a", 5, 9, 5, 0) and arms["b"] == Arm("b", 1, 1, 1, 0)


def test_an_unreadable_row_is_an_error_naming_its_line() -> None:
    text = render_schedule_table({"a": Arm("a", 1, 1, 1, 0)})
    text = text.replace("| a | 1 | 1 | 1 | 0 |", "| a | 1 | lots | 1 | 0 |")
    line = text.splitlines().index("| a | 1 | lots | 1 | 0 |") + 1
    with pytest.raises(StateError, match=rf"schedule.md:{line}: .*four numbers"):
        parse_schedule_table(text)
