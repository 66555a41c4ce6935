"""The one error family of autoloop: every failure a user can act on is an AutoloopError."""

from __future__ import annotations

from pathlib import Path


def error_line(error: object, limit: int | None = 300) -> str:
    """Returns the first non-empty line of an error's text, shortened to `limit` characters (None: not shortened)."""
    text = str(error).strip()
    line = next((part.strip() for part in text.splitlines() if part.strip()), type(error).__name__)
    return line if limit is None or len(line) <= limit else line[: limit - 3] + "..."


class AutoloopError(Exception):
    """An error the user can fix; the message names the place and the next step."""

    def __init__(self, message: str, path: Path | str | None = None, line: int | None = None) -> None:
        self.message = message
        self.path = Path(path) if path is not None else None
        self.line = line
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        where = str(self.path) if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


class ProgramError(AutoloopError):
    """A program.md (or its Target/Evaluation) is malformed."""


class StateError(AutoloopError):
    """A state file on the memory branch cannot be understood."""


class EditError(AutoloopError):
    """A proposed change cannot be parsed or applied."""


class GitError(AutoloopError):
    """A git command failed; the message shows the command and its stderr."""


class EvaluationError(AutoloopError):
    """The evaluation command could not be run at all (not a failing candidate)."""


class SandboxError(AutoloopError):
    """The requested isolation cannot be provided on this machine (e.g. `isolation: bwrap` without bubblewrap)."""


class ConfigurationError(AutoloopError):
    """A setting keeps every iteration from running (no model, an unknown provider, a missing key, a model the
    server does not know, a server that refuses connections): the run stops before it records an iteration, and
    no pause counts it."""
