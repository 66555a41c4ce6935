"""Tests for autoloop_py.loop.record.island_claims: the islands the slots in flight of a run without a barrier work."""

from __future__ import annotations

from pathlib import Path

from autoloop_py.loop.record import island_claims
from autoloop_py.loop.record.outcome import idle_outcome, read_outcome, write_outcome


def test_the_claims_of_the_slots_in_flight_are_read_back_in_order(tmp_path: Path) -> None:
    launches = [tmp_path / f"launch-{n}" for n in range(4)]
    island_claims.claim(launches[2], 3)
    island_claims.claim(launches[0], 1)
    island_claims.claim(launches[3], 1)
    assert island_claims.claimed(launches) == (1, 3)  # launch-1 has not decided yet


def test_a_claim_that_is_not_a_small_whole_number_is_ignored(tmp_path: Path) -> None:
    launches = [tmp_path / f"launch-{n}" for n in range(3)]
    island_claims.claim_path(launches[0]).write_text("-1\n")
    island_claims.claim_path(launches[1]).write_text("99999999999999999999\n")
    island_claims.claim_path(launches[2]).write_bytes(b"\xff" * 1_000_000)
    assert island_claims.claimed(launches) == ()


def test_a_claim_leaves_the_slots_outcome_folder_to_the_outcome_alone(tmp_path: Path) -> None:
    folder = tmp_path / "launch-0"
    island_claims.claim(folder, 2)
    write_outcome(folder, idle_outcome("demo", "no iteration ran"))  # refused in a folder that holds anything else
    assert read_outcome(folder).record is None
