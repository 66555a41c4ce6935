"""Prints how the runner's cost per iteration grows with the history it carries, and the state file's size by Population.

What it measures.
1. Overhead per iteration (everything but the evaluation) after 10, 100, 1,000 and 5,000 iterations of
   history. For each size, one real iteration of a program with a near-instant evaluation creates the
   state file and trace; then the history is grown to the size in the real formats (records applied with
   `statefile.apply_iteration`, so entries fold under the byte budget exactly as the runner folds them;
   one trace row and its source and prompt blobs per iteration, as `trace.row_files` writes them) and
   written to `memory/autoloop` in one commit (git fast-import) and pushed to the bare origin. Then
   `--iterations` real `tune` iterations run and their wall time minus the evaluation is measured.
2. The state file's bytes once the Population holds 10, 40 and 200 entries, for each strategy: real
   `tune` iterations of a strategy program whose population cap is the size, until it is full.

Target (issue 17): overhead at 5,000 within 1.5x of 10; every state file within its 30,720-byte budget.

    python benchmarks/scaling.py [--history 10,100,1000,5000] [--iterations 3] [--populations 10,40,200]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.program.playbook import marker_spans
from autoloop_py.state import file as statefile
from autoloop_py.state import trace
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.memory import MEMORY_BRANCH, MemoryStore
from autoloop_py.state.trace import TraceRow

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from iteration_overhead import PROGRAM, VALUE, build_repo  # noqa: E402

PROGRAM_PATH = Path(".autoloop/programs/bench/program.md")
EXAMPLE = ROOT / ".autoloop/programs/function_minimization"
START = datetime(2025, 1, 1, tzinfo=timezone.utc)
STRATEGIES = ("alphaevolve", "adaevolve", "funsearch", "evox")


def _git(cwd: Path, *args: str, data: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, input=data, check=True, capture_output=True).stdout.decode()


def fast_import(root: Path, files: dict[str, str], message: str) -> None:
    """Commits files on top of the memory branch in one git fast-import stream, then pushes it."""
    chunks = [f"commit refs/heads/{MEMORY_BRANCH}\ncommitter bench <bench@example.invalid> 0 +0000\n".encode()]
    body = message.encode()
    chunks.append(b"data %d\n%s\n" % (len(body), body))
    chunks.append(f"from refs/heads/{MEMORY_BRANCH}^0\n".encode())
    for path, text in files.items():
        data = text.encode()
        chunks.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
    _git(root, "fast-import", "--quiet", "--force", data=b"".join(chunks))
    _git(root, "push", "-q", "--force", "origin", MEMORY_BRANCH)


def grow_history(root: Path, size: int, rng: random.Random) -> None:
    """Grows the program's recorded history by `size` iterations in the real formats."""
    memory = MemoryStore(root)
    memory.sync()
    state = statefile.parse_state(memory.read("bench.md") or "", "bench.md")
    first = state.machine.iteration_count + 1
    files: dict[str, str] = {}
    best = state.machine.best_metric or -30.0
    for offset in range(size):
        number = first + offset
        a = round(rng.uniform(0.5, 3.0), 4)
        metric = -(a - 2.2) ** 2 - 8.5
        status = "error" if rng.random() < 0.05 else ("accepted" if metric > best else "rejected")
        best = max(best, metric) if status == "accepted" else best
        record = IterationRecord(
            status=status, timestamp=START + timedelta(minutes=number), change=f"tune: a 1.5→{a}",
            metric=None if status == "error" else metric, commit="0" * 40 if status == "accepted" else None,
            notes="evaluation crashed" if status == "error" else "", key=f"bench:{number}:synthetic",
        )
        state = statefile.apply_iteration(state, record, direction="higher", target_metric=None)
        source = VALUE.replace("a = 1.5", f"a = {a}")
        row = TraceRow(
            id=f"it{number}", iteration_found=number, parent_id=f"it{number - 1}" if number > 1 else "seed",
            metrics={"error": "crashed"} if status == "error" else {"score": metric},
            status="failed" if status == "error" else status, changes=record.change,
            timestamp=record.timestamp.isoformat(),
        )
        prompts = {"diff_user": {"system": "", "user": f"improve bench (iteration {number})", "responses": []}}
        files.update(trace.row_files("bench", row, source, prompts))
    files["bench.md"] = statefile.render_state(state)
    fast_import(root, files, f"bench: {size} synthetic iterations")


def overhead(root: Path, iterations: int) -> list[float]:
    """Returns each iteration's wall time minus its evaluation, for `iterations` real tune iterations."""
    program = load_program(root, PROGRAM_PATH)
    out = []
    for _ in range(iterations):
        started = time.perf_counter()
        outcome = run_iteration(root, program, RunOptions(proposer="tune"), datetime.now(timezone.utc))
        wall = time.perf_counter() - started
        out.append(wall - outcome.timings.get("evaluate", 0.0) - outcome.timings.get("evaluate baseline", 0.0))
    return out


def history_scaling(sizes: list[int], iterations: int) -> None:
    print(f"{'history':>8} {'overhead s/iteration (median)':>30} {'min':>7} {'max':>7} {'state file bytes':>17}")
    base_line = None
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="autoloop-scaling-") as tmp:
            root = build_repo(Path(tmp))
            overhead(root, 1)
            grow_history(root, size - 1, random.Random(size))
            times = overhead(root, iterations)
            state_bytes = len((MemoryStore(root).read("bench.md") or "").encode())
        median = statistics.median(times)
        base_line = base_line or median
        print(f"{size:>8} {median:>30.3f} {min(times):>7.3f} {max(times):>7.3f} {state_bytes:>17}"
              f"   ({median / base_line:.2f}x the first size)", flush=True)


def strategy_program(root: Path, strategy: str, size: int) -> Path:
    """Returns the program.md of a function_minimization copy running `strategy` with a Population cap of `size`."""
    folder = root / ".autoloop/programs" / f"bench_{strategy}"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "autoloop_py", "new", f"bench_{strategy}_scaffold", "--strategy", strategy,
         "--repo", str(root)], check=True, capture_output=True,
    )
    scaffold = root / ".autoloop/programs" / f"bench_{strategy}_scaffold"
    shutil.copytree(scaffold / "strategy", folder / "strategy")
    shutil.rmtree(scaffold)
    for path in (folder / "strategy").rglob("*.md"):
        path.write_text(_answered(path.read_text(), folder.name, size))
    playbook = next((folder / "strategy").glob(f"{strategy}*.md"))
    text = (folder / "program.md").read_text()
    text = text[: text.index("## Evolution Strategy")] if "## Evolution Strategy" in text else text
    pointer = (f"\n## Evolution Strategy\n\nThis program uses the strategy in `strategy/{playbook.name}`; "
               "follow it literally.\n")
    (folder / "program.md").write_text(text + pointer)
    cap = {"alphaevolve": f"population_size: {size}\narchive_size: {max(2, size // 4)}\n",
           "adaevolve": f"population_size: {size}\n", "funsearch": f"max_population: {size}\n",
           "evox": f"population_size: {size}\n"}[strategy]
    (folder / "code/config.yaml").write_text(cap)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", f"{strategy} bench program")
    _git(root, "push", "-q", "origin", "main")
    return folder / "program.md"


def _answered(text: str, name: str, size: int) -> str:
    """Returns a playbook with every `<CUSTOMIZE: …>` marker answered for function_minimization."""
    out, cursor = [], 0
    for start, end in marker_spans(text):
        hint = text[start:end].lower()
        if "function name" in hint:
            answer = "search_algorithm"
        elif "program-name" in hint:
            answer = name
        elif "population_size" in hint:
            answer = str(size)
        elif "archive_size" in hint:
            answer = str(max(2, size // 4))
        else:
            answer = "minimise a two-dimensional multimodal function by improving the search's moves and constants"
        out.append(text[cursor:start] + answer)
        cursor = end
    return "".join(out) + text[cursor:]


def population_bytes(sizes: list[int]) -> None:
    print()
    print(f"{'strategy':>12} " + " ".join(f"{'Population ' + str(s):>16}" for s in sizes) + "   (state file bytes; budget 30720)")
    for strategy in STRATEGIES:
        cells = []
        for size in sizes:
            with tempfile.TemporaryDirectory(prefix="autoloop-popbytes-") as tmp:
                root = build_repo(Path(tmp))
                try:
                    path = strategy_program(root, strategy, size)
                    program = load_program(root, path.relative_to(root))
                    for _ in range(size + 2):
                        run_iteration(root, program, RunOptions(proposer="tune"), datetime.now(timezone.utc))
                    cells.append(str(len((MemoryStore(root).read(f"{program.name}.md") or "").encode())))
                except Exception as err:  # noqa: BLE001 - one strategy's failure is reported, the rest go on
                    cells.append(f"failed: {type(err).__name__}")
                    print(f"  {strategy} at {size}: {err}", file=sys.stderr)
        print(f"{strategy:>12} " + " ".join(f"{c:>16}" for c in cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", default="10,100,1000,5000", help="history sizes ('' to skip)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--populations", default="10,40,200", help="Population sizes ('' to skip)")
    args = parser.parse_args()
    print(f"history: a program with a near-instant evaluation; {args.iterations} measured iterations per size")
    if args.history:
        history_scaling([int(s) for s in args.history.split(",")], args.iterations)
    if args.populations:
        population_bytes([int(s) for s in args.populations.split(",")])


if __name__ == "__main__":
    main()
