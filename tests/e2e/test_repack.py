"""End to end: a run that repacks its objects every two iterations, alone and with `--parallel 2`.

The repack (`git repack -d`, whose prune-packed removes emptied object folders) runs beside the next
iterations' object writes; every iteration is still recorded, and the repository holds every object.
benchmarks/repack_race.py runs the same in many runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state.memory import PACK_EVERY_ENV
from tests.e2e.test_publish import _clone, _git, _origin_with_counter, _state


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_run_repacking_every_two_iterations_records_every_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: int
) -> None:
    monkeypatch.setenv(PACK_EVERY_ENV, "2")
    origin = _origin_with_counter(tmp_path)
    work = _clone(origin, tmp_path / "work")
    packs = len(list((work / ".git/objects/pack").glob("*.pack")))
    argv = ["run", "--repo", str(work), "--program", "counter", "--proposer", "tune", "--iterations", "4"]
    assert main([*argv, *(["--parallel", str(parallel)] if parallel > 1 else [])]) == 0
    state = _state(origin)
    assert state.machine.iteration_count == 4
    assert [e.status for e in state.history if e.iteration is not None].count("error") == 0
    assert len(list((work / ".git/objects/pack").glob("*.pack"))) > packs  # the repacks ran
    _git(work, "fsck", "--connectivity-only", "--no-progress")  # every object any ref reaches is there
