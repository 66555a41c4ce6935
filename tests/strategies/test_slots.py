"""Slots of a tick: parsing `I/K`, the island a slot works, and the seed of its draws."""

from __future__ import annotations

import pytest

from autoloop_py.errors import AutoloopError
from autoloop_py.strategies.slots import MAX_SLOTS, Slot, parse_slot, slot_island, slot_iteration, slot_rng, slot_seed


def test_parse_slot_reads_i_of_k() -> None:
    assert parse_slot("2/4") == Slot(2, 4)
    assert str(parse_slot(" 0/1 ")) == "0/1"


@pytest.mark.parametrize(("text", "message"), [
    ("4/4", "need 0 ≤ slot < count"), ("1/0", "need 0 ≤ slot < count"), (f"0/{MAX_SLOTS + 1}", "need 0 ≤ slot"),
    ("2", "write it I/K"), ("-1/4", "write it I/K"), ("a/b", "write it I/K"),
])
def test_parse_slot_refuses_what_is_not_a_slot(text: str, message: str) -> None:
    with pytest.raises(AutoloopError, match=message):
        parse_slot(text)


def test_slot_i_works_island_i_mod_n_in_index_order() -> None:
    islands = [3, 0, 2, 1, 2]
    assert [slot_island(Slot(i, 6), islands) for i in range(6)] == [0, 1, 2, 3, 0, 1]
    assert slot_island(Slot(3, 4), []) == 0


def test_a_slot_records_the_ticks_first_iteration_plus_its_index() -> None:
    assert [slot_iteration(11, Slot(i, 3)) for i in range(3)] == [11, 12, 13]
    assert slot_iteration(11, None) == 11


def test_a_tick_of_one_keeps_the_plain_iterations_seed() -> None:
    assert slot_seed(7, "prog", 5, Slot(0, 1)) == slot_seed(7, "prog", 5, None) == "7:prog:5"


def test_every_slot_draws_from_its_own_seed_and_replays_it() -> None:
    draws = [slot_rng(7, "prog", 5 + i, Slot(i, 4)).random() for i in range(4)]
    assert len(set(draws)) == 4
    assert draws == [slot_rng(7, "prog", 5 + i, Slot(i, 4)).random() for i in range(4)]
    # The slot is part of the seed: the same iteration number in a tick of another size draws otherwise.
    assert slot_seed(7, "prog", 6, Slot(1, 4)) != slot_seed(7, "prog", 6, Slot(1, 2))


def test_a_slot_without_a_barrier_seeds_from_its_launch_so_a_lane_never_repeats_a_draw() -> None:
    # Lane 0 may run iteration 6 twice (nothing recorded between two of its launches): the launch tells them apart.
    first, again = Slot(0, 2, launch=0), Slot(0, 2, launch=2)
    assert slot_seed(7, "p", 6, first) != slot_seed(7, "p", 6, again)
    assert slot_seed(7, "p", 6, first) == slot_seed(7, "p", 6, Slot(0, 2, launch=0))
    assert slot_seed(7, "p", 6, Slot(0, 2)) == "7:p:6:slot0/2"  # a tick's slot keeps the seed it always had
    with pytest.raises(AutoloopError, match="launch number"):
        Slot(0, 2, launch=-1)
