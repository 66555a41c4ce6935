"""The command line's terminal: its consoles, logging to stderr, and the one handler mapping errors to exit codes."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from autoloop_py.errors import AutoloopError
from autoloop_py.redact import RedactingFilter, RedactingStream, Redactor, from_environment
from autoloop_py.sandbox.runner import Terminated
from autoloop_py.state.untrusted_text import PlainLogFilter

EXIT_ERROR = 1
EXIT_CRASH = 3
EXIT_INTERRUPT = 130
EXIT_TERMINATED = 143


def run_handler(args: argparse.Namespace) -> int:
    """Runs the parsed command's handler with the consoles and logging set up; returns the exit status."""
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
