"""Tuning knobs: the numeric literals of a candidate that BO may vary, and their search ranges.

The deterministic finder reads the module with `ast` and keeps literals that look like parameters
(budgets, step sizes, rates, thresholds) under the knob rules of the paper's BO baseline (B.9):
no problem constants, identities, shapes, indices, seeds or booleans, no literal that occurs more
than once, at most eight knobs, and ranges taken from the paper's table by parameter family.
This module is the front of the tuning analysis: it also re-exports the PARAMS rewrite
(`parametrize`, `with_values`, from tuning_source.py) and the optional LLM selection
(`knob_prompt`, `parse_knob_reply`, from tuning_llm.py).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from collections import Counter
from typing import Callable, Mapping, Sequence

from autoloop_py.analysis.tuning_llm import knob_prompt, parse_knob_reply
from autoloop_py.analysis.tuning_source import (
    MAX_KNOBS,
    PARAMS_NAME,
    SCALES,
    Knob,
    Literal,
    ancestors,
    format_value,
    free_name,
    number_of,
    numeric_literals,
    parametrize,
    params_entries,
    parents_of,
    pinned_lines,
    prelude_lines,
    snake_case,
    split_lines,
    with_values,
)
from autoloop_py.program.regions import evolve_regions

_SPAN = math.sqrt(10.0)  # the fallback range spans one order of magnitude around the default
# The paper's range table by parameter family: the stems its names start with, its scale, its range around value v.
_FAMILIES: dict[str, tuple[tuple[str, ...], str, Callable[[float], tuple[float, float]]]] = {
    "cooling factor": (("cool", "decay", "anneal", "shrink", "gamma", "momentum", "damp"), "linear",
                       lambda v: (0.5, 0.99999)),
    "acceptance probability": (("prob", "accept", "crossover", "mutation", "ratio", "frac", "fraction", "p"), "linear",
                               lambda v: (0.0, 1.0)),
    "step size": (("lr", "learning", "step", "stride", "delta", "eta", "sigma", "perturb", "radius", "jump", "scale"),
                  "log", lambda v: (v / 100, v * 100)),
    "temperature": (("temp", "temperature", "amplitude", "amp", "noise", "jitter"), "log",
                    lambda v: (v / 100, v * 100)),
    "tolerance": (("tol", "eps", "epsilon", "thresh", "threshold", "atol", "rtol", "margin"), "log",
                  lambda v: (v / 1000, v * 1000)),
    "penalty weight": (("weight", "penalty", "penal", "reward", "coef", "lambda", "lam", "mu", "bonus", "alpha",
                        "beta"), "log", lambda v: (v / 100, v * 100)),
    "restart count": (("restart", "restarts", "pop", "population", "elite", "island", "tries", "attempt", "particle"),
                      "log", lambda v: (max(1.0, v / 10), v * 10)),
    "iteration budget": (("iter", "iters", "iteration", "iterations", "epoch", "epochs", "round", "rounds", "budget",
                          "steps", "generation", "generations", "gen", "gens", "loop", "loops", "evals", "patience"),
                         "log", lambda v: (v / 5, v * 5)),
    "sample count": (("sample", "samples", "batch", "count", "candidates", "neighbors", "neighbours", "trials"), "log",
                     lambda v: (max(1.0, v / 10), v * 10)),
}  # fmt: skip
_PROBLEM_NAMES = frozenset({"n", "m", "d", "dim", "dims", "ndim", "dimension", "dimensions", "size"})
_PROBLEM_PARTS = ("grid", "circle", "width", "height", "shape", "timeout", "seed", "version", "bound", "target")
_PARAMS_BLOCK = re.compile(r"PARAMS(?:_\d+)?$")
# Calls whose arguments, however nested, are never knobs: shapes, seeds, output, process control.
_SKIP_CALLS = frozenset(
    {"zeros", "ones", "empty", "full", "reshape", "Random", "seed", "default_rng", "RandomState", "print", "exit",
     "sleep", "setrecursionlimit", "info", "debug", "warning", "error"}
)  # fmt: skip
# Calls whose direct arguments are identities or precisions (sqrt(2), log(10), pow(x, 2), round(x, 3)).
_IDENTITY_CALLS = frozenset({"sqrt", "cbrt", "log", "log2", "log10", "exp", "pow", "round", "radians", "degrees"})
_SKIP_KEYWORDS = frozenset(
    {"axis", "dtype", "shape", "size", "seed", "random_state", "ndim", "n_jobs", "verbose", "decimals", "ndigits",
     "base", "maxsize", "timeout", "flush", "indent", "level"}
)  # fmt: skip


def find_knobs(source: str, max_knobs: int = MAX_KNOBS) -> list[Knob]:
    """Returns the plausible knobs of a Python module, in source order (inside the EVOLVE-BLOCK when it has one)."""
    tree, parents, literals, tunable = _tunable(source)
    # The paper skips a literal written more than once: it is ambiguous, and often one shared constant.
    counts = Counter(_unsigned(literal) for literal in literals)
    first, blocks = prelude_lines(source, tree) + 1, _params_blocks(tree)
    kept = [
        literal for literal in tunable
        if literal.line >= first and not _in_regions(literal.line, blocks, False) and counts[_unsigned(literal)] == 1
    ]  # fmt: skip
    knobs = _unique_names([_knob(literal, _context_name(literal.node, parents), parents) for literal in kept])
    ranked = sorted(knobs, key=lambda k: (k.family == "default", k.name.startswith("literal_l")))
    return sorted(ranked[:max_knobs], key=lambda k: (k.line, k.col))


def tunable_literals(source: str) -> list[tuple[Literal, str | None]]:
    """Returns (literal, its name or None) for each literal the knob rules let vary, in source order.

    The structural rules of `find_knobs` without its BO-specific ones (one occurrence, the PARAMS block,
    at most eight): the tune proposer perturbs exactly these, so it never touches an index, a slice, a
    shape, a range offset such as `range(n - 1)`, a seed, an exponent or a `# autoloop: fixed` line.
    """
    _, parents, _, kept = _tunable(source)
    named = ((literal, _context_name(literal.node, parents)) for literal in kept)
    return [(literal, None if name.startswith("literal_l") else name) for literal, name in named]


def _tunable(source: str) -> tuple[ast.Module, Mapping[ast.AST, ast.AST], list[Literal], list[Literal]]:
    """Returns (tree, parents, all numeric literals, the tunable ones in source order) of a module (none unparsable).

    Tunable: inside the EVOLVE-BLOCK (anywhere without one), off pinned lines, passing the knob rules.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ast.Module(body=[], type_ignores=[]), {}, [], []
    parents = parents_of(tree)
    literals = list(numeric_literals(tree, source, parents))
    regions, pinned = evolve_regions(source), pinned_lines(source)
    tunable = [
        literal for literal in literals
        if _in_regions(literal.line, regions) and literal.line not in pinned and _plausible(literal, parents)
    ]  # fmt: skip
    return tree, parents, literals, sorted(tunable, key=lambda literal: (literal.line, literal.col))


def _unsigned(literal: Literal) -> str:
    """Returns a literal's text without its sign, as it occurs in the source."""
    return literal.text.lstrip("+-").strip()


def bounds(value: int | float, kind: str, family: str) -> tuple[int | float, int | float, str]:
    """Returns (low, high, scale) for a default value under the paper's range table (and its hard rules)."""
    if value < 0:
        low, high, scale = bounds(-value, kind, family)
        return -high, -low, "linear"
    if family in _FAMILIES:
        low, high = _FAMILIES[family][2](float(value))
    elif kind == "int" and value <= 10:
        low, high = 1.0, max(value * 5, 20.0)
    else:
        low, high = value / _SPAN, value * _SPAN
    low, high = min(low, value), max(high, value)
    if kind == "int":
        low, high = max(1, math.floor(low)) if value >= 1 else math.floor(low), math.ceil(high)
        high = max(high, low + 1)
    if low > 0 and high / low >= 100:
        scale = "log"
    elif family in _FAMILIES:
        scale = _FAMILIES[family][1]
    else:  # no family: log for a positive non-integer below 1 or above 100
        scale = "log" if kind == "float" and value > 0 and (value < 1 or value > 100) else "linear"
    return low, high, scale if low > 0 else "linear"


def family_of(name: str, value: int | float, kind: str) -> str:
    """Returns the parameter family a knob's name suggests ("default" when none does)."""
    words = [w for w in re.split(r"[^a-z0-9]+", snake_case(name)) if w]
    for family, (stems, _, _) in _FAMILIES.items():
        if family == "cooling factor" and not (kind == "float" and 0 < value < 1):
            continue
        if family == "acceptance probability" and not (kind == "float" and 0 <= value <= 1):
            continue
        if any(word == stem or (len(stem) >= 4 and word.startswith(stem)) for word in words for stem in stems):
            return family
    return "default"


def _plausible(literal: Literal, parents: Mapping[ast.AST, ast.AST]) -> bool:
    """Returns whether a literal passes the knob rules (not zero, an index, an increment, a shape, a seed...)."""
    node, value = literal.node, literal.value
    if value == 0 or (isinstance(value, float) and not math.isfinite(value)):
        return False
    parent = parents.get(node)
    if abs(value) == 1 and not _whole_value(node, parent):
        return False
    if _in_skipped_context(node, parents) or _identity_operand(node, parent, value):
        return False
    if isinstance(parent, (ast.List, ast.Tuple, ast.Set)) and all(number_of(e) is not None for e in parent.elts):
        return False  # data and shapes: coordinates, vertices, bounds
    target = _assigned_name(node, parents)
    return target is None or not _problem_constant(target)


def _whole_value(node: ast.AST, parent: ast.AST | None) -> bool:
    """Returns whether the literal is the entire value of an assignment, keyword argument or parameter default."""
    if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.keyword)):
        return parent.value is node
    return isinstance(parent, ast.arguments)


def _in_skipped_context(node: ast.AST, parents: Mapping[ast.AST, ast.AST]) -> bool:
    """Returns whether the literal sits in a subscript, an assert, a decorator or a call whose arguments are
    no knobs."""
    child = node
    for ancestor in ancestors(node, parents):
        if isinstance(ancestor, ast.Subscript) and child is ancestor.slice:
            return True  # indices, slices and annotations such as Literal[3]
        if isinstance(ancestor, (ast.Assert, ast.Raise)):
            return True
        if isinstance(ancestor, ast.keyword) and ancestor.arg in _SKIP_KEYWORDS:
            return True
        if isinstance(ancestor, ast.Call) and _skipped_call(ancestor, child, direct=child is node):
            return True
        decorated = isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        if decorated and child in ancestor.decorator_list:
            return True
        if isinstance(ancestor, ast.stmt):
            return False
        child = ancestor
    return False


def _skipped_call(call: ast.Call, child: ast.AST, direct: bool) -> bool:
    """Returns whether this argument of the call is no knob: shapes, seeds, identities, or a range start or step."""
    name = _call_name(call)
    if name in _SKIP_CALLS:
        return True
    if name == "range" and not direct:
        return True  # an offset or factor of a bound (`range(n - 2)`, `range(2 * k)`): structure, not a budget
    if not direct or child not in call.args:
        return False
    if name in _IDENTITY_CALLS:
        return True
    return name == "range" and len(call.args) >= 2 and call.args.index(child) != 1  # type: ignore[arg-type]


def _identity_operand(node: ast.AST, parent: ast.AST | None, value: int | float) -> bool:
    """Returns whether the literal is an exponent, or a 2 that halves, doubles or tests parity."""
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Pow) and parent.right is node:
        return True
    halving = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
    return value == 2 and isinstance(value, int) and isinstance(parent, ast.BinOp) and isinstance(parent.op, halving)


def _problem_constant(name: str) -> bool:
    """Returns whether an assigned name reads as a problem constant (n, dim, grid size, n_circles, timeout...)."""
    lowered = snake_case(name)
    words = lowered.split("_")
    if lowered in _PROBLEM_NAMES or any(word.startswith(part) for word in words for part in _PROBLEM_PARTS):
        return True
    for prefix in ("n_", "num_"):
        if lowered.startswith(prefix):
            return family_of(lowered[len(prefix):], 2, "int") == "default"
    return False


def _context_name(node: ast.AST, parents: Mapping[ast.AST, ast.AST]) -> str:
    """Returns a name for the knob: its assignment target, keyword, parameter or compared operand."""
    named = _assigned_name(node, parents, guess=True)
    return named if named is not None else f"literal_l{getattr(node, 'lineno', 0)}"


def _assigned_name(node: ast.AST, parents: Mapping[ast.AST, ast.AST], guess: bool = False) -> str | None:
    """Returns the name the literal's expression is assigned to, passed as, or defaults, if any.

    guess: else name it after the operand it is compared with (`x_threshold`) or the call it is an argument of.
    """
    child = node
    for ancestor in ancestors(node, parents):
        named = _name_at(ancestor, child)
        if named is not None:
            return named
        if guess and isinstance(ancestor, ast.Compare):
            other = ancestor.left if child is not ancestor.left else ancestor.comparators[0]
            label = _expr_name(other)
            if label:
                return f"{label}_threshold"
        if guess and isinstance(ancestor, ast.Call) and child in ancestor.args and _call_name(ancestor):
            return f"{_call_name(ancestor)}_arg{ancestor.args.index(child)}"  # type: ignore[arg-type]
        if isinstance(ancestor, ast.stmt):
            return None
        child = ancestor
    return None


def _name_at(ancestor: ast.AST, child: ast.AST) -> str | None:
    """Returns the name an assignment, keyword, dict entry or parameter default gives to `child`, if any."""
    if isinstance(ancestor, ast.Assign) and ancestor.value is child:
        return _expr_name(ancestor.targets[-1])
    if isinstance(ancestor, (ast.AnnAssign, ast.AugAssign)) and ancestor.value is child:
        return _expr_name(ancestor.target)
    if isinstance(ancestor, ast.keyword):
        return ancestor.arg
    if isinstance(ancestor, ast.Dict) and child in ancestor.values:
        key = ancestor.keys[ancestor.values.index(child)]  # type: ignore[arg-type]
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    if isinstance(ancestor, ast.arguments):
        return _parameter_of(ancestor, child)
    return None


def _parameter_of(arguments: ast.arguments, default: ast.AST) -> str | None:
    """Returns the parameter whose default is `default`."""
    positional = arguments.posonlyargs + arguments.args
    for arg, value in zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults):
        if value is default:
            return arg.arg
    for arg, kw_value in zip(arguments.kwonlyargs, arguments.kw_defaults):
        if kw_value is default:
            return arg.arg
    return None


def _expr_name(node: ast.AST) -> str | None:
    """Returns the identifier an expression names (x, self.x, d["x"]), if any."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, (ast.Tuple, ast.List)) and node.elts:
        return None
    if isinstance(node, ast.Call):
        return _call_name(node)
    return None


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _knob(literal: Literal, name: str, parents: Mapping[ast.AST, ast.AST]) -> Knob:
    """Returns the knob of a literal, its range taken from the family its name (or `x *= 0.97`) suggests."""
    kind = "int" if isinstance(literal.value, int) else "float"
    family = family_of(name, abs(literal.value), kind)
    parent = parents.get(literal.node)
    if isinstance(parent, ast.AugAssign) and isinstance(parent.op, ast.Mult) and 0 < literal.value < 1:
        family = "cooling factor"  # a geometric decay, whatever the variable is called
    low, high, scale = bounds(literal.value, kind, family)
    return Knob(
        snake_case(name) or f"literal_l{literal.line}", literal.line, literal.col, literal.end_col, literal.text,
        literal.value, kind, low, high, scale, family,
    )


def _unique_names(knobs: Sequence[Knob]) -> list[Knob]:
    """Returns the knobs with repeated names numbered (`step`, `step_2`, ...)."""
    used: set[str] = set()
    unique: list[Knob] = []
    for knob in knobs:
        name, number = knob.name, 1
        while name in used:
            number += 1
            name = f"{knob.name}_{number}"
        used.add(name)
        unique.append(knob if name == knob.name else dataclasses.replace(knob, name=name))
    return unique


def _in_regions(line: int, regions: Sequence[tuple[int, int]], empty: bool = True) -> bool:
    """Returns whether a 1-based line lies in one of the 0-based [start, end) regions (`empty` when there are none)."""
    return any(start <= line - 1 < end for start, end in regions) if regions else empty


def _params_blocks(tree: ast.Module) -> list[tuple[int, int]]:
    """Returns the 0-based line ranges of top-level `PARAMS = ...` statements (an earlier tuning's block)."""
    return [
        (statement.lineno - 1, statement.end_lineno or statement.lineno) for statement in tree.body
        if any(_PARAMS_BLOCK.match(name) for name in _names_assigned(statement))
    ]  # fmt: skip


def _names_assigned(statement: ast.stmt) -> list[str]:
    targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
    return [t.id for t in targets if isinstance(t, ast.Name)]
