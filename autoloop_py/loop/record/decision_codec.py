"""A strategy's decision as JSON, for an outcome: encoded from its dataclasses, rebuilt only as allowed dataclasses.

The publishing job needs the decision a strategy made in the proposing job to book the iteration in
its Population. The reader builds nothing but frozen dataclasses defined in autoloop's strategy and
population modules, from plain JSON values; an unknown type is an error, never an import of it.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from typing import Any

from autoloop_py.errors import AutoloopError

ALLOWED_MODULES = ("autoloop_py.state.population_model", "autoloop_py.state.population", "autoloop_py.strategies.")
_MAX_DEPTH = 40


class DecisionCodecError(AutoloopError):
    """A decision that cannot be written as JSON, or JSON that is not a decision autoloop wrote."""


def encode(value: Any, depth: int = 0) -> Any:
    """Returns value as JSON values, dataclasses, tuples and non-string-keyed mappings tagged."""
    if depth > _MAX_DEPTH:
        raise DecisionCodecError("the decision is nested too deeply to carry")
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        if not _allowed(kind.__module__):
            raise DecisionCodecError(f"{kind.__module__}.{kind.__qualname__} is not a type a decision may hold")
        fields = {f.name: encode(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value) if f.init}
        return {"$dataclass": f"{kind.__module__}:{kind.__qualname__}", "fields": fields}
    if isinstance(value, tuple):
        return {"$tuple": [encode(item, depth + 1) for item in value]}
    if isinstance(value, list):
        return [encode(item, depth + 1) for item in value]
    if isinstance(value, dict) or hasattr(value, "items"):
        return {"$map": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise DecisionCodecError(f"a {type(value).__name__} cannot be carried in an outcome")


def decode(value: Any, depth: int = 0) -> Any:
    """Returns the value `encode` wrote; raises DecisionCodecError on anything else."""
    if depth > _MAX_DEPTH:
        raise DecisionCodecError("the decision is nested too deeply")
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, list):
        return [decode(item, depth + 1) for item in value]
    if not isinstance(value, dict) or len(value) not in (1, 2):
        raise DecisionCodecError(f"unexpected value in a decision: {str(value)[:80]}")
    if set(value) == {"$tuple"} and isinstance(value["$tuple"], list):
        return tuple(decode(item, depth + 1) for item in value["$tuple"])
    if set(value) == {"$map"} and isinstance(value["$map"], list):
        pairs = [_pair(pair, depth) for pair in value["$map"]]
        return dict(pairs)
    if set(value) == {"$float"} and value["$float"] in ("inf", "-inf", "nan"):
        return float(value["$float"])
    if set(value) == {"$dataclass", "fields"} and isinstance(value["fields"], dict):
        return _dataclass(value["$dataclass"], value["fields"], depth)
    raise DecisionCodecError(f"unexpected value in a decision: {str(value)[:80]}")


def _pair(pair: Any, depth: int) -> tuple[Any, Any]:
    if not isinstance(pair, list) or len(pair) != 2:
        raise DecisionCodecError("a mapping entry of a decision is not a [key, value] pair")
    key = decode(pair[0], depth + 1)
    try:
        hash(key)
    except TypeError:
        raise DecisionCodecError("a mapping key of a decision is not hashable") from None
    return key, decode(pair[1], depth + 1)


def _dataclass(name: Any, fields: dict[str, Any], depth: int) -> Any:
    """Builds an allowed dataclass from its fields (its own checks run); never imports anything else."""
    if not isinstance(name, str) or ":" not in name:
        raise DecisionCodecError(f"not a dataclass name: {str(name)[:80]}")
    module_name, qualname = name.split(":", 1)
    if not _allowed(module_name) or "." in qualname or qualname.startswith("_"):
        raise DecisionCodecError(f"{name} is not a type a decision may hold")
    try:
        kind = getattr(importlib.import_module(module_name), qualname)
    except (ImportError, AttributeError):
        raise DecisionCodecError(f"{name} is not a type a decision may hold") from None
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
        raise DecisionCodecError(f"{name} is not a dataclass")
    known = {f.name for f in dataclasses.fields(kind) if f.init}
    if not set(fields) <= known:
        raise DecisionCodecError(f"{name} has no fields {sorted(set(fields) - known)}")
    try:
        return kind(**{key: decode(item, depth + 1) for key, item in fields.items()})
    except (TypeError, ValueError, AutoloopError) as err:
        raise DecisionCodecError(f"{name}: {err}") from None


def _allowed(module: str) -> bool:
    """A population module, or a module of the strategies package or of one strategy's package."""
    return module in ALLOWED_MODULES or (module.startswith(ALLOWED_MODULES[-1]) and module.count(".") in (2, 3))
