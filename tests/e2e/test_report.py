"""`autoloop report` and `autoloop status --mermaid` as a person sees them: the page in headless Chromium, clicked."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from autoloop_py.cli import main
from tests.browser import Browser, Page
from tests.mermaid_grammar import check, mermaid_blocks
from tests.programs import example_repo, install_strategy_program
from tests.trace_samples import write_run

POINTER = """## Evolution Strategy

This program uses the **AdaEvolve** strategy. On every iteration, read `strategy/adaevolve.md` and follow it literally.

Support files:
- `strategy/prompts/solution.md`
- `strategy/prompts/paradigm.md`
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A repository where `autoloop run` ran 4 tune iterations of function_minimization."""
    with example_repo(tmp_path_factory.mktemp("report")) as root:
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "program")
        assert main(["run", "--repo", str(root), "--program", "function_minimization", "--iterations", "4"]) == 0
        yield root


def _rows(root: Path, out: Path) -> list[dict]:
    assert main(["trace", "export", "function_minimization", str(out), "--repo", str(root)]) == 0
    return [json.loads(line) for line in (out / "programs.jsonl").read_text().splitlines()]


def _ready(page: Page, path: Path, fragment: str = "") -> None:
    page.open(path.as_uri() + fragment, "document.body && document.body.dataset.ready === '1'")


def _click_node(page: Page, node_id: str) -> None:
    box = page.evaluate(
        f"(() => {{ const r = document.querySelector('circle.node[data-id=\"{node_id}\"]').getBoundingClientRect();"
        " window.scrollTo(0, 0); return [r.left + r.width / 2, r.top + r.height / 2]; })()"
    )
    page.click(*box)


def test_a_tune_run_reports_its_tree_curve_and_diffs(tuned: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", "function_minimization", "--repo", str(tuned), "--out", str(out)]) == 0
    rows = _rows(tuned, tmp_path / "trace")
    child = next(r for r in rows if r["parent_id"] and r["status"] != "failed")
    with Browser() as browser:
        page = browser.page()
        _ready(page, out)
        assert page.evaluate("document.querySelectorAll('#tree circle.node').length") == len(rows)
        evaluated = sum(1 for r in rows if r["status"] != "failed")
        assert page.evaluate("document.querySelectorAll('#curve circle.dot').length") == evaluated
        assert page.evaluate("document.querySelector('#curve path.bestline') !== null")
        _click_node(page, child["id"])
        assert page.evaluate("document.querySelector('#detail h3').textContent") == f"Candidate {child['id']}"
        diff = page.evaluate("document.getElementById('diff').textContent")
        assert "--- parent" in diff and "+++ candidate" in diff
        assert page.evaluate("document.querySelectorAll('#diff span.add').length") >= 1
        shot = page.screenshot(tmp_path / "report.png")
    assert shot.stat().st_size > 20_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_status_mermaid_prints_valid_charts(tuned: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "function_minimization", "--mermaid", "--repo", str(tuned)]) == 0
    blocks = mermaid_blocks(capsys.readouterr().out)
    assert len(blocks) == 2 and [check(b) for b in blocks] == [[], []]
    assert blocks[0].startswith("xychart-beta") and blocks[1].startswith("flowchart LR")


def test_another_frameworks_trace_directory_gets_the_same_report(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    out = tmp_path / "run.html"
    assert main(["report", str(run), "--out", str(out)]) == 0
    with Browser() as browser:
        page = browser.page()
        _ready(page, out)
        assert page.evaluate("document.querySelectorAll('#tree circle.node').length") == 6
        # D is the best: its lineage is drawn as such, and a click shows D's change against C.
        assert page.evaluate("[...document.querySelectorAll('circle.node.best')].map(c => c.dataset.id).join()") == "A,B,C,D"
        _click_node(page, "D")
        diff = page.evaluate("document.getElementById('diff').textContent")
        assert "+value = helper(x)" in diff and "-value = fallback(x)" in diff
        # The parent link walks up the lineage.
        page.evaluate("document.querySelector('#detail a.parent').click()")
        assert page.evaluate("document.querySelector('#detail h3').textContent") == "Candidate C"


def test_a_strategy_run_shows_islands_and_its_population(git_repo: Path, run_git, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    install_strategy_program(git_repo, run_git, ".autoloop/programs/function_minimization", "adaevolve", POINTER,
                             "num_islands: 3\npopulation_size: 10\n")
    assert main(["run", "--repo", str(git_repo), "--program", "function_minimization", "--iterations", "5"]) == 0
    out = tmp_path / "ada.html"
    assert main(["report", "function_minimization", "--repo", str(git_repo), "--out", str(out)]) == 0
    with Browser() as browser:
        page = browser.page()
        _ready(page, out)
        population = page.evaluate("[...document.querySelectorAll('#population tbody tr')].map(tr => tr.children[0].textContent)")
        assert population
        # Every Population entry is a node, copies included, and every parent it names is drawn with an edge.
        nodes = set(page.evaluate("[...document.querySelectorAll('#tree circle.node')].map(c => c.dataset.id)"))
        assert set(population) <= nodes
        data = page.evaluate("JSON.parse(document.getElementById('run-data').textContent).nodes")
        linked = [n for n in data if n["p"] is not None]
        assert all(n["p"] in nodes for n in linked)
        assert page.evaluate("document.querySelectorAll('#tree line.edge').length") == len(linked)
        islands = page.evaluate("[...new Set([...document.querySelectorAll('#population tbody tr')].map(tr => tr.children[1].textContent))].length")
        assert islands >= 1
        page.evaluate("(() => { const s = document.getElementById('layout'); s.value = 'island'; s.dispatchEvent(new Event('change')); })()")
        assert page.evaluate("document.querySelectorAll('#tree .lane-label').length") >= 2
        page.screenshot(tmp_path / "islands.png")
