"""Command-line front end: `autoloop <command>`, parsed here and run through terminal.py's one error handler."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TYPE_CHECKING, Sequence

from autoloop_py import __version__
from autoloop_py.commands import COMMANDS

if TYPE_CHECKING:
    from autoloop_py.proposers.model_worker import ModelWorker

_DESCRIPTION = """\
Run an LLM-driven improvement loop over the programs in .autoloop/programs/.
State lives as markdown on branch memory/autoloop; accepted candidates on autoloop/<program>.

examples:
  autoloop check                                   validate every program
  autoloop run --program function_minimization --iterations 10
  autoloop status                                  one line per program
  autoloop state function_minimization             print its state file
  autoloop edit function_minimization              edit its state file in $EDITOR, validated
  autoloop analyze function_minimization           cycling, lineage and best-so-far of its trace
  autoloop report function_minimization            an HTML page: metric curve, evolution tree, diffs
  autoloop tune function_minimization              the tuning gap of its best candidate
  autoloop strategy add alphaevolve --program function_minimization --answers answers.yaml

`autoloop COMMAND --help` shows a command's options and an example.
"""


def build_parser(command: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """Returns the argument parser with one sub-parser per command.

    lazy: register only `command`'s arguments (importing its module); every other command is named with its
    one-line help alone. Not lazy: every command's module is imported and registers its arguments.
    """
    parser = argparse.ArgumentParser(
        prog="autoloop", description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"autoloop {__version__}")
    # Accepted before the command too (`autoloop -v status`); each command also takes it after its name.
    parser.add_argument("-v", "--verbose", dest="global_verbose", action="store_true", help="show log messages")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = COMMANDS[command][0] if command in COMMANDS else None
    registered: set[str] = set()
    for name, (module, summary) in COMMANDS.items():
        if lazy and module != wanted:
            commands.add_parser(name, help=summary)
        elif module not in registered:  # `pause` registers `resume` too
            registered.add(module)
            importlib.import_module(f"autoloop_py.commands.{module}").add_parser(commands)
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    """Returns the command named in argv: its first word that is not an option (the global ones take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None, model_worker: ModelWorker | None = None) -> int:
    """Runs the command line; returns the exit status.

    model_worker: the model worker already started for `run` (see __main__.py), None: the command starts one if needed.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_in(words), lazy=True)
    args = parser.parse_args(words)
    args.model_worker = model_worker
    if not getattr(args, "handler", None):
        parser.print_help()
        return 1
    # Only now: `autoloop --version` and `--help` start without rich and the consoles (issue 39).
    from autoloop_py.terminal import run_handler

    return run_handler(args)


if __name__ == "__main__":
    sys.exit(main())
