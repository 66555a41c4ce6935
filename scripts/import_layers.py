#!/usr/bin/env python3
"""Checks that autoloop_py's packages form a hierarchy: no import runs up a layer, no module cycle.

Prints each offending import as `file:line: a -> b` and exits 1 when there is one.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "autoloop_py"
# Lowest first: a package may import its own modules and any package listed before it.
LAYERS = (
    "root", "git", "program", "sandbox", "state", "strategies", "analysis", "proposers", "loop", "loop.checkout",
    "loop.evaluation", "loop.record", "loop.iteration", "loop.tick", "loop.slots", "studies", "github", "commands",
    "cli",
)
ROOT_MODULES = {"__init__", "errors", "markdown", "render", "redact", "tempdirs", "faults", "candidate"}
ENTRY_MODULES = {"cli", "__main__", "api", "terminal"}
# Standard library only (copied into gh-aw workflows): any layer may use its rules rather than keep a twin.
STANDALONE = {"autoloop_py.github.agentic_scheduler"}
# The package's face re-exports the API (lazily, in a module __getattr__).
ALLOWED = {("autoloop_py", "autoloop_py.api")}


@dataclass(frozen=True)
class Import:
    """One import of an autoloop_py module by another."""

    source: str
    target: str
    path: Path
    line: int


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Returns every module of the package (templates excluded) by dotted name."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if "templates" in parts:
            continue
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(known: dict[str, Path]) -> list[Import]:
    """Returns every import between modules of the package, resolved to the module imported."""
    found = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            for target in targets:
                module = _longest_known(target, known)
                if module and module != name and module.startswith(PACKAGE):
                    found.append(Import(name, module, path, node.lineno))
    return found


def layer_of(module: str) -> str:
    """Returns the layer a module belongs to: its top-level package (loop's subpackage), `root` or `cli`."""
    parts = module.split(".")[1:]
    if not parts or module in STANDALONE:
        return "root"
    if parts[0] in ENTRY_MODULES:
        return "cli"
    if parts[0] == "loop" and len(parts) > 2:
        return f"loop.{parts[1]}"
    return "root" if len(parts) == 1 and parts[0] in ROOT_MODULES else parts[0]


def upward(found: list[Import]) -> list[Import]:
    """Returns the imports whose target stands in a higher layer than their source (or in none)."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return [
        imp for imp in found
        if rank.get(layer_of(imp.target), len(LAYERS)) > rank.get(layer_of(imp.source), -1)
        and (imp.source, imp.target) not in ALLOWED
    ]


def cycles(found: list[Import]) -> list[list[str]]:
    """Returns the module-level import cycles (strongly connected components of two or more modules)."""
    graph: dict[str, set[str]] = {}
    for imp in (imp for imp in found if (imp.source, imp.target) not in ALLOWED):
        graph.setdefault(imp.source, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def stray_root_modules(known: dict[str, Path]) -> list[str]:
    """Returns modules at the package root that are neither an entry point nor a shared helper."""
    return sorted(
        name for name in known
        if name.count(".") == 1 and name.split(".")[1] not in ROOT_MODULES | ENTRY_MODULES
        and not (known[name].name == "__init__.py")
    )


def _longest_known(name: str, known: dict[str, Path]) -> str | None:
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def main() -> int:
    known = modules()
    found = imports(known)
    problems = [
        f"{imp.path.relative_to(ROOT)}:{imp.line}: {layer_of(imp.source)} imports {layer_of(imp.target)} "
        f"({imp.source} -> {imp.target})"
        for imp in upward(found)
    ]
    problems += [f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(found)]
    problems += [f"{known[name].relative_to(ROOT)}: a module at the package root that belongs in a package"
                 for name in stray_root_modules(known)]
    for problem in problems:
        print(problem)
    print(f"{len(known)} modules, {len(found)} imports, layers {' < '.join(LAYERS)}: "
          + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
