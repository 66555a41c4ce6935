"""Command-line front end: `autoloop <command>`; one handler maps errors to exit codes."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from autoloop_py import __version__
from autoloop_py.commands import COMMANDS
from autoloop_py.errors import AutoloopError
from autoloop_py.redact import RedactingFilter, RedactingStream, Redactor, from_environment
from autoloop_py.sandbox.runner import Terminated
from autoloop_py.state.untrusted_text import PlainLogFilter

if TYPE_CHECKING:
    from autoloop_py.proposers.model_worker import ModelWorker

EXIT_ERROR = 1
EXIT_CRASH = 3
EXIT_INTERRUPT = 130
EXIT_TERMINATED = 143

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
        return EXIT_ERROR
    # Secret values held in the environment are masked in everything printed or logged.
    redactor = from_environment(os.environ)
    console = _console(redactor=redactor)
    err_console = _console(stderr=True, redactor=redactor)
    _setup_logging(getattr(args, "verbose", False) or args.global_verbose, err_console, redactor)
    return _handle(lambda: _flushed(args.handler(args, console)), err_console, redactor)


def _flushed(status: int) -> int:
    """Returns status once stdout is flushed, so that a reader that stopped early is noticed here."""
    sys.stdout.flush()
    return status


class _Console(Console):
    """A rich Console for which a reader that stopped early (`autoloop status | head -1`) is no error."""

    def on_broken_pipe(self) -> None:
        # rich exits with 1 here; the command instead goes on with its output dropped and keeps its status.
        self.quiet = True
        _stdout_to_devnull()


def _console(stderr: bool = False, redactor: Redactor | None = None) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if redactor is not None and redactor.values:
        stream = RedactingStream(stream, redactor)
    console = _Console(file=stream, highlight=False, soft_wrap=True)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped output (CI logs, files) has no width; 80 columns would squeeze the tables.
        console.width = 200
    return console


def _handle(command: Callable[[], int], err_console: Console, redactor: Redactor | None = None) -> int:
    try:
        return command()
    except AutoloopError as err:
        err_console.print(f"[bold red]error:[/] {escape(str(err))}", markup=True, highlight=False)
        return EXIT_ERROR
    except Terminated:
        err_console.print("terminated (SIGTERM); the running evaluation was stopped")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return EXIT_INTERRUPT
    except BrokenPipeError:
        # `autoloop status | head -1`: the reader has all it wanted; that is no error.
        _stdout_to_devnull()
        return 0
    except Exception as err:  # noqa: BLE001 - the one place that turns crashes into a report
        log_path = _crash_log()
        log_path.write_text((redactor or Redactor()).text(traceback.format_exc()), encoding="utf-8")
        err_console.print(f"[bold red]An unexpected error occurred:[/] {type(err).__name__}: {escape(str(err))}")
        err_console.print(f"The traceback was written to {log_path}; please include it in a bug report.")
        return EXIT_CRASH


def _stdout_to_devnull() -> None:
    """Points stdout at /dev/null so that Python's final flush does not fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _crash_log() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autoloop"
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        base = Path(os.environ.get("TMPDIR", "/tmp"))
    return base / "autoloop.log"


def _setup_logging(verbose: bool, console: Console, redactor: Redactor) -> None:
    root = logging.getLogger("autoloop_py")
    root.handlers.clear()
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    handler = RichHandler(console=console, show_time=False, show_path=False, markup=False)
    handler.addFilter(RedactingFilter(redactor))
    handler.addFilter(PlainLogFilter())
    root.addHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
