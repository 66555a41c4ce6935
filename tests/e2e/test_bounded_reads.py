"""An iteration starts the same number of git processes and asks for the same number of objects, whatever the trace's length."""

from __future__ import annotations

import subprocess
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pytest

from autoloop_py.git.objects import ObjectReader
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.state import trace
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.trace import TraceRow
from tests.programs import program_md

EVALUATE = "import runpy\nprint('{\"score\": %f}' % runpy.run_path('code/value.py')['a'])\n"


def _repo(root: Path, run_git: Callable[..., str]) -> Path:
    folder = root / ".autoloop/programs/bench"
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(program_md("Bench", "Maximise a."))
    (folder / "code/value.py").write_text("# EVOLVE-BLOCK-START\na = 1.5\n# EVOLVE-BLOCK-END\n")
    (folder / "code/evaluate.py").write_text(EVALUATE)
    run_git(root, "add", "-A")
    run_git(root, "commit", "-qm", "bench program")
    return root


def _grow(root: Path, rows: int) -> None:
    """Adds `rows` earlier candidates to the program's trace, in the recorder's format."""
    files: dict[str, str] = {}
    for number in range(rows):
        row = TraceRow(f"old{number}", 1, None, {"score": -1.0}, "rejected")
        files.update(trace.row_files("bench", row, f"# old candidate {number}\na = -1\n", {}))
    MemoryStore(root).commit(files, f"{rows} earlier rows")


def _subcommand(args: list[str]) -> str:
    """Returns the git subcommand of an argument list (skipping `-c key=value` and `-C path`)."""
    at = 0
    while at < len(args) and args[at].startswith("-"):
        at += 2 if args[at] in ("-c", "-C") else 1
    return args[at] if at < len(args) else "?"


def _counted_iteration(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], int]:
    """Runs one tune iteration; returns the git processes it started (by subcommand) and the objects it asked for."""
    processes: Counter[str] = Counter()
    requests = [0]
    real_popen, real_get = subprocess.Popen.__init__, ObjectReader.get

    def popen(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        if isinstance(args, (list, tuple)) and args and Path(str(args[0])).name == "git":
            processes[_subcommand([str(a) for a in args[1:]])] += 1
        real_popen(self, args, *rest, **kwargs)

    def get(self: ObjectReader, spec: str) -> Any:
        requests[0] += 1
        return real_get(self, spec)

    program = load_program(root, Path(".autoloop/programs/bench/program.md"))
    with monkeypatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", popen)
        patch.setattr(ObjectReader, "get", get)
        run_iteration(root, program, RunOptions(proposer="tune"), datetime(2025, 1, 2, tzinfo=timezone.utc))
    return processes, requests[0]


def test_git_work_per_iteration_does_not_grow_with_the_trace(
    tmp_path: Path, run_git: Callable[..., str], isolated_git_config: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = []
    for rows in (20, 400):  # both longer than the newest rows the filter reads
        root = tmp_path / f"history-{rows}"
        run_git(tmp_path, "init", "-q", "-b", "main", str(root))
        run_git(root, "config", "user.name", "Test User")
        run_git(root, "config", "user.email", "test@example.invalid")
        _repo(root, run_git)
        _grow(root, rows)
        program = load_program(root, Path(".autoloop/programs/bench/program.md"))
        run_iteration(root, program, RunOptions(proposer="tune"), datetime(2025, 1, 1, tzinfo=timezone.utc))
        counts.append(_counted_iteration(root, monkeypatch))
    (few_processes, few_requests), (many_processes, many_requests) = counts
    assert many_processes == few_processes
    # The memory commit reads the trees on the changed paths; a longer trace may already hold the
    # `blobs/<xx>` and `sources/<xx>` shard folders a new row goes to (at most 256 of each), not more.
    assert few_requests <= many_requests <= few_requests + 4
    # One long-lived `cat-file --batch` serves every object read of the iteration.
    assert many_processes["cat-file"] <= 1 and "ls-tree" not in many_processes
    assert many_processes["hash-object"] <= 2  # the blobs, then the trees on the changed paths
    assert "read-tree" not in many_processes and "write-tree" not in many_processes
