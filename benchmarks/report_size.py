"""Prints the size of `autoloop report`'s HTML and how long it takes to build and to draw, at 50, 500 and 5,000 candidates.

What it measures. A synthetic run in the EvoTrace layout: a 60-line program evolved by seeded one-line
edits, each candidate's parent drawn from the ten best so far, a fifth of them failed, islands 0..4.
For each size it builds the report page the way `autoloop report DIR` does (read the trace, diff each
candidate against its parent, render), then opens the file in headless Chromium with `--dump-dom` and
reads the script's own drawing time (`data-render-ms`, from parsing the data to the last node drawn)
and the browser's wall time. Chromium is Debian's `chromium`; without it only the build side is shown.

    python benchmarks/report_size.py [--sizes 50,500,5000] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from autoloop_py.analysis.html_report import ReportSource, render_report, report_payload
from autoloop_py.state import trace
from autoloop_py.state.trace import TraceRow

PROGRAM = "synthetic"
BASE = [f"value_{i} = {i * 0.5:.2f}  # knob {i}\n" for i in range(60)]


def synthetic_run(size: int, rng: random.Random, out: Path) -> Path:
    """Writes a run of `size` candidates in the EvoTrace layout and returns its directory."""
    files: dict[str, str] = {}
    sources: dict[str, list[str]] = {"seed": list(BASE)}
    scores: dict[str, float] = {"seed": 1.0}
    rows = [TraceRow(id="seed", iteration_found=0, parent_id=None, metrics={"score": 1.0}, status="accepted")]
    files.update(trace.row_files(PROGRAM, rows[0], "".join(BASE), {}))
    best = 1.0
    for i in range(1, size):
        top = sorted(scores, key=scores.get, reverse=True)[:10]  # type: ignore[arg-type]
        parent = rng.choice(top)
        lines = list(sources[parent])
        line = rng.randrange(len(lines))
        lines[line] = f"value_{line} = {rng.uniform(-5, 5):.3f}  # knob {line}, edit {i}\n"
        failed = rng.random() < 0.2
        score = None if failed else scores[parent] * rng.lognormvariate(0.0, 0.05)
        status = "failed" if failed else ("accepted" if score > best else "rejected")
        best = max(best, score or best)
        row = TraceRow(
            id=f"it{i}", iteration_found=i, parent_id=parent,
            metrics={"error": "crashed"} if failed else {"score": score}, status=status,
            operator=rng.choice(["mutation", "crossover", "exploration"]), changes=f"set value_{line}",
            extra={"metadata": {"island": i % 5}},
        )
        files.update(trace.row_files(PROGRAM, row, "".join(lines), {}))
        if not failed:
            sources[row.id], scores[row.id] = lines, score  # type: ignore[assignment]
    return trace.export(files.get, sorted(files), PROGRAM, out)


def draw_times(page: Path, chromium: str, repeats: int) -> tuple[list[float], list[float]]:
    """Returns (the page's own drawing times, the browser's wall times) in ms over `repeats` loads."""
    inside, wall = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=300,
        ).stdout
        wall.append((time.perf_counter() - started) * 1000)
        match = re.search(r'data-render-ms="(\d+)"', dom)
        if match:
            inside.append(float(match.group(1)))
    return inside, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,500,5000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    print(f"{'candidates':>10} {'HTML KB':>8} {'build s':>8} {'draw ms (median)':>17} {'browser wall ms':>16}")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="autoloop-report-bench-") as tmp:
            run = synthetic_run(size, random.Random(f"{args.seed}:{size}"), Path(tmp) / "run")
            started = time.perf_counter()
            loaded = trace.load_trace(run)
            source = ReportSource(PROGRAM, str(run), "score", "higher")
            page_text = render_report(report_payload(loaded, source))
            build = time.perf_counter() - started
            page = Path(tmp) / "report.html"
            page.write_text(page_text, encoding="utf-8")
            draw, wall = draw_times(page, chromium, args.repeats) if chromium else ([], [])
            draw_text = f"{statistics.median(draw):.0f}" if draw else "n/a"
            wall_text = f"{statistics.median(wall):.0f}" if wall else "n/a"
            print(f"{size:>10} {len(page_text.encode()) / 1024:>8.0f} {build:>8.2f} {draw_text:>17} {wall_text:>16}")
    if not chromium:
        print("chromium is not installed: drawing times not measured (apt-get install chromium)")


if __name__ == "__main__":
    main()
