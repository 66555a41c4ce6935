"""Lanes: k long-lived slot processes; one that dies loses only its own iteration and the lane starts anew."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autoloop_py.errors import AutoloopError
from autoloop_py.loop.iteration.iteration import IterationOutcome
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.slots import lanes
from autoloop_py.loop.slots.lanes import Lanes
from autoloop_py.strategies.slots import Slot


def _iteration(root: Path, program: object, options: RunOptions) -> IterationOutcome:
    """A stand-in for run_iteration in the lane's process: the slot's launch decides what it does."""
    assert options.slot is not None and options.slot.launch is not None
    launch = options.slot.launch
    if launch == 1:
        os._exit(9)  # the process dies mid-iteration
    if launch == 2:
        raise AutoloopError("no model is set")
    if launch == 3:
        raise RuntimeError("a bug")
    return IterationOutcome("prog", launch, "rejected", f"pid {os.getpid()}", 1.0, 2.0)


def _start(group: Lanes, lane: int, launch: int) -> None:
    group.start(lane, Path("."), None, RunOptions(slot=Slot(lane, 2, launch)))  # type: ignore[arg-type]


def _wait_all(group: Lanes) -> dict[int, lanes.Finished]:
    ended: dict[int, lanes.Finished] = {}
    while group.busy:
        ended.update((f.lane, f) for f in group.wait())
    return ended


@pytest.fixture
def group(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(lanes, "run_iteration", _iteration)
    with Lanes(2, lambda: "fork") as made:  # forked lanes run the stand-in
        yield made


def test_each_lane_reports_its_own_end_and_a_dead_lane_loses_only_its_iteration(group: Lanes) -> None:
    _start(group, 0, 0)
    _start(group, 1, 1)
    assert group.free() is None
    ended = _wait_all(group)
    assert ended[0].account is not None and ended[0].account.iteration == 0 and ended[0].failure is None
    assert ended[1].account is None and ended[1].failure == "the slot's process died (exit code 9)"
    assert not ended[1].setting
    first_pid = ended[0].account.summary
    # The dead lane takes a new process; the live one keeps its own.
    _start(group, 0, 4)
    _start(group, 1, 5)
    again = _wait_all(group)
    assert again[0].account is not None and again[0].account.summary == first_pid
    assert again[1].account is not None and again[1].account.iteration == 5


def test_a_setting_and_a_bug_come_back_as_failures_the_run_tells_apart(group: Lanes) -> None:
    _start(group, 0, 2)
    _start(group, 1, 3)
    ended = _wait_all(group)
    assert (ended[0].setting, ended[0].failure) == (True, "no model is set")
    assert (ended[1].setting, ended[1].failure) == (False, "RuntimeError: a bug")
    assert group.free() == 0


def test_abandoning_terminates_the_busy_lanes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gate = tmp_path / "never"

    def hangs(root: Path, program: object, options: RunOptions) -> IterationOutcome:
        while not gate.exists():  # a slot still in flight: only the run's abandon ends it
            time.sleep(0.01)
        raise AssertionError("the gate never opens")

    monkeypatch.setattr(lanes, "run_iteration", hangs)
    with Lanes(2, lambda: "fork") as group:
        _start(group, 0, 0)
        _start(group, 1, 1)
        processes = [p for p in group._processes if p is not None]
        assert group.abandon() == [0, 1]
        assert not group.busy and all(p.exitcode is not None for p in processes)
