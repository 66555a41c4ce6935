"""The strategies that can run, by name: each is a package whose `engine` module has `build(program, playbook, root)`.

The registry names modules instead of importing them, so nothing here imports a strategy back and only the
strategy a program uses is ever loaded.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from autoloop_py.program.model import Program
from autoloop_py.program.playbook import Playbook
from autoloop_py.strategies.engine import Engine

ENGINE_MODULES: dict[str, str] = {
    "alphaevolve": "autoloop_py.strategies.alphaevolve.engine",
    "adaevolve": "autoloop_py.strategies.adaevolve.engine",
    "funsearch": "autoloop_py.strategies.funsearch.engine",
    "evox": "autoloop_py.strategies.evox.engine",
}

# How each strategy's name is written for people (the Population's intro line, the hand-off's notes).
DISPLAY_NAMES: dict[str, str] = {
    "alphaevolve": "AlphaEvolve", "adaevolve": "AdaEvolve", "funsearch": "FunSearch", "evox": "EvoX",
}


def display_name(name: str) -> str:
    """Returns a strategy's name as written for people (AdaEvolve for adaevolve; an unknown name as given)."""
    return DISPLAY_NAMES.get(name, name)


def names() -> list[str]:
    """Returns the names of the strategies that can run, sorted."""
    return sorted(ENGINE_MODULES)


def build_engine(name: str, program: Program, playbook: Playbook, root: Path) -> Engine | None:
    """Returns the named strategy's engine for the program, or None when no strategy has that name."""
    module = ENGINE_MODULES.get(name)
    if module is None:
        return None
    engine: Engine = importlib.import_module(module).build(program, playbook, root)
    return engine
