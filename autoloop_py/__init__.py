"""autoloop_py: an LLM-driven improvement loop whose state is markdown on a git branch.

The Python API (autoloop_py.api, docs/api.md), the same code as the `autoloop` command:

- run(program, repo=".", iterations=1, ...) -> RunResult: iterations of a program of a repository.
- evolve(initial_code, evaluate, iterations=10, ...) -> RunResult: evolve code in a scratch repository.
- load(program, repo=".") -> ProgramState: a program's state file, Population and trace, read only.
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["AutoloopError", "IterationOutcome", "ProgramState", "RunResult", "evolve", "load", "run"]


def __getattr__(name: str) -> Any:
    # Imported when first used: the command line (`autoloop --version`) does not pay for the API's imports.
    if name in __all__:
        from autoloop_py import api

        return getattr(api, name)
    raise AttributeError(f"module 'autoloop_py' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
