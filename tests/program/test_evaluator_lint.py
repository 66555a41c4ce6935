"""Tests for evaluator_lint: where an evaluator loads a Target module into its own process."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.program.evaluator_lint import in_process_imports, in_process_warnings
from autoloop_py.program.model import load_program
from tests.programs import program_md

ROOT = Path(__file__).resolve().parents[2]
TARGETS = [".autoloop/programs/p/code/search.py"]


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("import json\nimport search\n", 2),
        ("from search import search_algorithm\n", 1),
        ("from code import search\n", 1),
        ("import importlib\nm = importlib.import_module('search')\n", 2),
        ("m = __import__('search')\n", 1),
        ("import importlib.util\nspec = importlib.util.spec_from_file_location('x', 'code/search.py')\n", 2),
        ("P = 'search.py'\n\n\ndef load(path):\n    return spec_from_file_location('module', path)\n", 5),
        ("exec(open('search.py').read(), {})\n", 1),
        ("import runpy\nrunpy.run_path(HERE / 'search.py')\n", 2),
    ],
)  # fmt: skip
def test_each_way_of_loading_the_candidate_is_found_at_its_line(source: str, line: int) -> None:
    assert [(found.line, found.module) for found in in_process_imports(source, TARGETS)] == [(line, "search")]


@pytest.mark.parametrize(
    "source",
    [
        "from autoloop_py.candidate import call\ncall('code/search.py', 'search_algorithm', (1,))\n",
        "import json, math, numpy\nimport importlib\nimportlib.import_module('numpy')\n",
        "import searchlight\nspec_from_file_location('helper', 'helper.py')\n",
        "def broken(:\n",
    ],
)
def test_calling_the_candidate_apart_or_loading_other_modules_is_not_flagged(source: str) -> None:
    assert in_process_imports(source, TARGETS) == []


def test_the_converted_shipped_examples_are_clean() -> None:
    flagged = {}
    for folder in sorted((ROOT / ".autoloop/programs").iterdir()):
        path = folder / "program.md" if folder.is_dir() else folder
        flagged[folder.name] = in_process_warnings(load_program(ROOT, path.relative_to(ROOT)), ROOT)
    for name in ("function_minimization", "circle_packing", "sqrt_tradeoff", "docstring_coverage.md"):
        assert flagged[name] == [], flagged[name]


def test_check_warns_at_the_line_and_says_how_to_switch(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = git_repo / ".autoloop/programs/demo"
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(program_md("Demo", "Grow x."))
    (folder / "code/value.py").write_text("x = 1\n\n\ndef f():\n    return x\n")
    (folder / "code/evaluate.py").write_text("import json\nimport value\nprint(json.dumps({'score': value.x}))\n")
    assert main(["check", "--repo", str(git_repo)]) == 0  # a warning, not a problem
    out = capsys.readouterr().out
    assert (".autoloop/programs/demo/code/evaluate.py:2: the evaluator imports the Target module `value` into its own "
            "process, so the candidate can set its own metric; call it in a process of its own instead: "
            "`from autoloop_py.candidate import call`") in " ".join(out.split())  # fmt: skip
    scorer = "import json\nfrom autoloop_py.candidate import call\nprint(json.dumps({'score': call('code/value.py', 'f')}))"
    (folder / "code/evaluate.py").write_text(scorer)
    assert main(["check", "--repo", str(git_repo)]) == 0
    assert "imports the Target module" not in capsys.readouterr().out
