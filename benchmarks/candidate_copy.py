"""Prints what the standalone candidate directory costs per iteration: copy, snapshot, scratch repo, diff.

The tree is this repository's tracked files (exported with `git archive`), or `--files N` synthetic
files of 2 KB. The agent proposer pays copy + scratch repo + 2 snapshots; every evaluation pays one copy.

    python benchmarks/candidate_copy.py [--repeats 10] [--files N]
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable

from autoloop_py.sandbox import candidate_dir


def _tree(root: Path, files: int) -> Path:
    """Fills root with this repository's tracked tree, or with `files` synthetic files."""
    root.mkdir()
    if files:
        for index in range(files):
            folder = root / f"pkg{index % 50}"
            folder.mkdir(exist_ok=True)
            (folder / f"m{index}.py").write_text(f"# module {index}\n" + "x = 1\n" * 340)
        return root
    here = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=here, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    return root


def _median_ms(step: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--files", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = _tree(Path(tmp) / "source", args.files)
        count = sum(1 for p in source.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in source.rglob("*") if p.is_file())

        def copy() -> None:
            with candidate_dir.copy_of(source):
                pass

        def agent_setup() -> None:
            with candidate_dir.copy_of(source) as tree:
                candidate_dir.init_scratch_repo(tree)
                before = candidate_dir.snapshot(tree)
                (tree / "touched.py").write_text("y = 2\n")
                candidate_dir.changes(before, tree)

        snap = _median_ms(lambda: candidate_dir.snapshot(source), args.repeats)
        copied = _median_ms(copy, args.repeats)
        agent = _median_ms(agent_setup, args.repeats)
    print(f"tree: {count} files, {size / 1e6:.1f} MB")
    print(f"copy + remove (each evaluation):          {copied:8.1f} ms median")
    print(f"snapshot:                                 {snap:8.1f} ms median")
    print(f"agent copy + scratch repo + 2 snapshots:  {agent:8.1f} ms median")
    print(f"per agent iteration (agent + evaluation):  {agent + copied:8.1f} ms median")


if __name__ == "__main__":
    main()
