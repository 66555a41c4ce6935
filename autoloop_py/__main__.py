"""Entry point for `python -m autoloop_py` and the `autoloop` command.

`autoloop run --proposer llm` starts its model worker here, before the command line's own imports, so that the
worker is ready (and litellm's import, when the run's models need it, begins) as early as it can.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from autoloop_py.proposers.model_worker import ModelWorker


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    worker: ModelWorker | None = None
    if _wants_model_calls(args):  # imported only then: the worker's module costs other commands' start
        from autoloop_py.proposers.model_worker import start_worker

        worker = start_worker(True)
    try:
        from autoloop_py.cli import main as run_command_line

        return run_command_line(args, worker)
    finally:
        if worker is not None:
            worker.close()


def _wants_model_calls(args: list[str]) -> bool:
    """Returns whether the arguments read `run … --proposer llm` (a program's own `proposer: llm` is seen later)."""
    command = next((arg for arg in args if not arg.startswith("-")), None)
    given = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--proposer"]
    given += [arg.split("=", 1)[1] for arg in args if arg.startswith("--proposer=")]
    return command == "run" and given[-1:] == ["llm"]


# Guarded: a tick's slots started with `spawn` import this module again, and must not run the command twice.
if __name__ == "__main__":
    raise SystemExit(main())
