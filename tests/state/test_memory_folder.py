"""FolderMemory (gh-aw's repo-memory folder): what it writes keeps to gh-aw's save rules (count, extensions, patch size)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from autoloop_py.errors import StateError
from autoloop_py.state import memory_folder, save_limits
from autoloop_py.state.memory_folder import FolderMemory


def _row(iteration: int) -> str:
    return f"traces/p/rows/{iteration:06d}-c{iteration}.json"


def test_the_oldest_rows_and_their_children_entries_go_first_and_state_files_stay(tmp_path: Path) -> None:
    memory = FolderMemory(tmp_path)
    memory.commit({"p.md": "# state\n", "candidates/p/1.py": "x = 1\n"}, "start")
    for i in range(1, 9):
        memory.commit({_row(i): "{}\n", f"traces/p/children/c{i - 1}/{i:06d}-c{i}.json": "{}\n"}, f"row {i}")
    memory._prune(10)
    left = memory.list()
    assert len(left) <= 10
    assert {"p.md", "candidates/p/1.py"} <= set(left)
    rows = [p for p in left if "/rows/" in p]
    assert rows == [_row(i) for i in range(9 - len(rows), 9)]  # the newest rows, in order
    children = {p.rsplit("/", 1)[1] for p in left if "/children/" in p}
    assert children == {r.rsplit("/", 1)[1] for r in rows}  # no index entry outlives its row


def test_a_folder_under_the_limit_is_left_alone(tmp_path: Path) -> None:
    memory = FolderMemory(tmp_path)
    files = {_row(i): "{}\n" for i in range(1, 4)}
    memory.commit(files, "rows")
    memory._prune(3)
    assert memory.list() == sorted(files)


def test_a_file_gh_aw_would_refuse_is_never_written(tmp_path: Path) -> None:
    memory = FolderMemory(tmp_path)
    with pytest.raises(StateError, match=r"gh-aw refuses to save a memory folder holding 'candidates/p/1\.sh'"):
        memory.commit({"p.md": "# state\n", "candidates/p/1.sh": "echo\n"}, "start")
    assert memory.list() == []  # nothing of the refused write, not even the allowed file


def test_a_write_over_the_patch_size_keeps_its_sources_compressed_and_reads_them_back(tmp_path: Path) -> None:
    memory = FolderMemory(tmp_path)
    rng = random.Random(7)
    big = "".join(f"def f{i}(a):\n    return a * {rng.randint(1, 10**6)}\n" for i in range(2500))  # ~90 KB
    state = "# state\n" + "".join(f"| row {i} |\n" for i in range(2000))  # ~24 KB
    assert len(big.encode()) + len(state.encode()) > memory_folder.PATCH_LIMIT
    memory.commit({"p.md": state, "candidates/p/7.py": big, "candidates/p/8.py": "x = 8\n"}, "iteration 7")
    assert memory.list() == ["candidates/p/7.py" + memory_folder.PACKED, "candidates/p/8.py", "p.md"]
    assert memory.read("candidates/p/7.py") == big and memory.read("candidates/p/8.py") == "x = 8\n"
    added = sum(save_limits.added_bytes(None, (tmp_path / p).read_text()) for p in memory.list())
    assert added <= memory_folder.PATCH_LIMIT
    assert all(save_limits.allowed(p) for p in memory.list())
    memory.commit({"candidates/p/7.py": "x = 7\n"}, "rewritten small")  # one copy of a source, never two
    assert memory.list() == ["candidates/p/7.py", "candidates/p/8.py", "p.md"]


def test_a_small_write_keeps_its_sources_readable(tmp_path: Path) -> None:
    memory = FolderMemory(tmp_path)
    memory.commit({"p.md": "# state\n", "candidates/p/1.py": "x = 1\n" * 3000}, "start")
    assert memory.list() == ["candidates/p/1.py", "p.md"]

