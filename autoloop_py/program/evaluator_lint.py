"""Finds where an evaluator loads a Target module into its own process, where the candidate can set its own metric.

Candidate code imported by the evaluator runs beside the code that writes the report: it can replace
`json.dump` or `os._exit`, register an `atexit` report, or rewrite $AUTOLOOP_RESULT. `autoloop check`
warns at each such line and says how to call the candidate through autoloop_py.candidate instead.
"""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from autoloop_py.program.model import Program
from autoloop_py.program.target import target_files

# Calls that load a module from a name (their own string arguments say which).
_BY_NAME = frozenset({"import_module", "__import__", "run_module"})
# Calls that load a module from a path, often built elsewhere in the file (`Path(__file__).parent / "x.py"`).
_BY_PATH = frozenset({"spec_from_file_location", "SourceFileLoader", "run_path", "load_source", "exec"})
SWITCH = (
    "call it in a process of its own instead: `from autoloop_py.candidate import call` then "
    "`call(path, \"function\", args)` returns what the function returned (docs/configuration.md, \"The scorer and "
    "the candidate\")"
)


@dataclass(frozen=True)
class InProcessImport:
    """One place where an evaluator loads candidate code into its own process.

    Attributes:
      line: the 1-based line of the import or the loading call.
      module: the Target module it loads (its file's stem).
    """

    line: int
    module: str


def in_process_imports(source: str, targets: list[str]) -> list[InProcessImport]:
    """Returns where the evaluator `source` loads one of the Target files `targets` (repo-relative .py paths).

    Import statements of a Target module count, and calls that load a module (importlib, runpy, exec) whose
    string arguments name a Target module or file; a path-loading call without such an argument counts when
    the file names a Target file elsewhere. An unparsable source has none.
    """
    names = _target_names(targets)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    named_anywhere = next((m for node in ast.walk(tree) if (m := _literal_module(node, names))), None)
    found: list[InProcessImport] = []
    for node in ast.walk(tree):
        module = None
        if isinstance(node, ast.Import):
            module = next((m for alias in node.names if (m := _dotted_module(alias.name, names))), None)
        elif isinstance(node, ast.ImportFrom):
            module = _dotted_module(node.module or "", names) or next(
                (m for alias in node.names if (m := _dotted_module(f"{node.module}.{alias.name}", names))), None
            )
        elif isinstance(node, ast.Call) and (called := _called_name(node.func)) in _BY_NAME | _BY_PATH:
            own = next((m for arg in ast.walk(node) if (m := _literal_module(arg, names))), None)
            module = own or (named_anywhere if called in _BY_PATH else None)
        if module is not None:
            found.append(InProcessImport(node.lineno, module))
    return sorted(set(found), key=lambda item: item.line)


def in_process_warnings(program: Program, root: Path) -> list[str]:
    """Returns one warning (file:line) for each place the program's evaluator files load a Target module."""
    if program.evaluation is None:
        return []
    targets = [path for path in target_files(program.target, root) if path.endswith(".py")]
    if not targets:
        return []
    warnings = []
    for path in evaluator_files(program.evaluation.command, root, root / program.base_dir):
        if path.relative_to(root).as_posix() in targets:
            continue
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for found in in_process_imports(source, targets):
            warnings.append(
                f"{path.relative_to(root)}:{found.line}: the evaluator imports the Target module `{found.module}` "
                f"into its own process, so the candidate can set its own metric; {SWITCH}"
            )
    return warnings


def evaluator_files(command: str, root: Path, folder: Path) -> list[Path]:
    """Returns the Python files under root that the evaluation command names (from root or the program folder)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return []
    found: list[Path] = []
    for word in words:
        for variable, value in (("AUTOLOOP_PROGRAM_DIR", folder), ("AUTOLOOP_REPO_ROOT", root)):
            word = word.replace(f"${{{variable}}}", str(value)).replace(f"${variable}", str(value))
        if not word.endswith(".py") or "$" in word:
            continue
        for base in (root, folder):
            path = (base / word).resolve()
            if path.is_file() and root.resolve() in path.parents and path not in found:
                found.append(path)
    return [root / path.relative_to(root.resolve()) for path in found]


def _target_names(targets: list[str]) -> dict[str, str]:
    """Returns each name that refers to a Target module (its stem, file name, dotted path) -> its stem."""
    names: dict[str, str] = {}
    for target in targets:
        path = PurePosixPath(target)
        names[path.stem] = names[path.name] = names[".".join(path.with_suffix("").parts)] = path.stem
    return names


def _dotted_module(name: str, names: dict[str, str]) -> str | None:
    """Returns the Target module an imported dotted name is (whole or by its last part), else None.

    autoloop_py's own modules (the scorer's autoloop_py.candidate) are never candidate code.
    """
    if not name or name.split(".")[0] == "autoloop_py":
        return None
    return names.get(name) or names.get(name.rsplit(".", 1)[-1])


def _literal_module(node: ast.AST, names: dict[str, str]) -> str | None:
    """Returns the Target module a string literal names (`search`, `search.py`, `code/search.py`), else None."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or len(node.value) > 1024:
        return None
    text = node.value
    return names.get(text) or (names.get(PurePosixPath(text).name) if text.endswith(".py") else None)


def _called_name(func: ast.expr) -> str:
    """Returns the name a call uses (`f` of `f()` and of `a.b.f()`)."""
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""
