"""Tests for autoloop_py/commands/status.py: one snapshot of the memory branch, even while a run records."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from tests.programs import small_program


def _recorded(memory: MemoryStore, name: str, iterations: int, message_key: bool = True) -> str:
    """Commits `name`'s state file after `iterations` keyed records; the message carries the newest key."""
    state = statefile.new_state(name, "Grow x.", "score", "higher", None)
    for i in range(1, iterations + 1):
        record = statefile.IterationRecord(
            "accepted", datetime(2026, 11, 1, i, tzinfo=timezone.utc), f"change {i}", float(i), key=f"{name}:{i}:t"
        )
        state = statefile.apply_iteration(state, record, direction="higher", target_metric=None)
    trailer = f"\n\nAutoloop-Key: {name}:{iterations}:t" if message_key else ""
    return memory.commit({f"{name}.md": statefile.render_state(state)}, f"[Autoloop: {name}] {iterations}{trailer}")


def _rows(out: str) -> dict[str, str]:
    """Returns the overview's first line of each program, by name."""
    return {cells[0].strip(): line for line in out.splitlines() if len(cells := line.split("│")) > 3}


def test_status_reads_every_program_and_the_newest_record_at_one_commit(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run records iteration 2 of both programs just after status read alpha's file: the whole table stays at
    the commit status started from (alpha not blocked by a record newer than the file it read, beta not ahead)."""
    for name in ("alpha", "beta"):
        small_program(git_repo, name)
    memory = MemoryStore(git_repo)
    _recorded(memory, "alpha", 1)
    before = _recorded(memory, "beta", 1)
    read_at = MemoryStore._read_at
    landed: list[str] = []

    def racing(self: MemoryStore, commit: str | None, path: str) -> str | None:
        text = read_at(self, commit, path)
        if path == "alpha.md" and not landed:  # a parallel run's records land between two reads of status
            landed.append(_recorded(MemoryStore(git_repo), "beta", 2, message_key=False))
            landed.append(_recorded(MemoryStore(git_repo), "alpha", 2))
        return text

    monkeypatch.setattr(MemoryStore, "_read_at", racing)
    assert main(["status", "--repo", str(git_repo)]) == 0
    out = capsys.readouterr().out
    assert landed and MemoryStore(git_repo).tip() == landed[-1] != before  # the branch did move mid-read
    rows = _rows(out)
    assert "🛑" not in out and "records the runner wrote are missing" not in " ".join(out.split())
    assert "🟢 active" in rows["alpha"] and "🟢 active" in rows["beta"]
    assert [rows[name].split("│")[3].strip() for name in ("alpha", "beta")] == ["1", "1"]  # iter. column

    # Read again on the quiet branch, status shows the records that landed.
    monkeypatch.setattr(MemoryStore, "_read_at", read_at)
    assert main(["status", "--repo", str(git_repo)]) == 0
    rows = _rows(capsys.readouterr().out)
    assert [rows[name].split("│")[3].strip() for name in ("alpha", "beta")] == ["2", "2"]
