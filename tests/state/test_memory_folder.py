"""FolderMemory (gh-aw's repo-memory folder): the trace's oldest rows go before the folder outgrows gh-aw's file count."""

from __future__ import annotations

from pathlib import Path

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
