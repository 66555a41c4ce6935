"""Tests for scripts/import_layers.py: the package tree stays a hierarchy, and the check catches a breach."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("import_layers", REPO / "scripts" / "import_layers.py")
assert _spec is not None and _spec.loader is not None
layers = importlib.util.module_from_spec(_spec)
sys.modules["import_layers"] = layers  # dataclasses look their module up there
_spec.loader.exec_module(layers)


def test_the_package_graph_is_a_hierarchy_without_cycles() -> None:
    known = layers.modules()
    found = layers.imports(known)
    assert len(found) > 500, "the scan should see the package's imports"
    assert [f"{i.source} -> {i.target}" for i in layers.upward(found)] == []
    assert layers.cycles(found) == []
    assert layers.stray_root_modules(known) == []


def test_every_strategy_package_has_the_same_role_modules() -> None:
    strategies = REPO / "autoloop_py" / "strategies"
    for folder in (p for p in strategies.iterdir() if (p / "__init__.py").is_file()):
        names = {p.stem for p in folder.glob("*.py")}
        assert {"strategy", "config", "engine", "prompt"} <= names, folder.name


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / "autoloop_py" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_an_upward_import_a_cycle_and_a_stray_root_module_are_reported(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "__init__.py": "",
        "errors.py": "",
        "stray.py": "",
        "state/__init__.py": "",
        "state/file.py": "from autoloop_py.loop.iteration import iteration\n",
        "loop/__init__.py": "",
        "loop/iteration/iteration.py": "from autoloop_py.loop.iteration.attempt import x\n",
        "loop/iteration/attempt.py": "import autoloop_py.loop.iteration.iteration\nx = 1\n",
        "loop/evaluation/checks.py": "from autoloop_py.loop.iteration.attempt import x\n",
    })
    known = layers.modules(tmp_path)
    found = layers.imports(known)
    assert sorted((i.source, i.target, i.line) for i in layers.upward(found)) == [
        ("autoloop_py.loop.evaluation.checks", "autoloop_py.loop.iteration.attempt", 1),
        ("autoloop_py.state.file", "autoloop_py.loop.iteration.iteration", 1),
    ]
    assert layers.cycles(found) == [["autoloop_py.loop.iteration.attempt", "autoloop_py.loop.iteration.iteration"]]
    assert layers.stray_root_modules(known) == ["autoloop_py.stray"]
