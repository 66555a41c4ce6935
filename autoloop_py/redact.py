"""Secret redaction: the values of secret-like variables are replaced by `***` in everything autoloop writes."""

from __future__ import annotations

import fnmatch
import functools
import json
import logging
from dataclasses import dataclass
from typing import Any, Mapping

# Names whose values are secrets (matched upper-cased); AUTOLOOP_SECRET_NAMES adds exact names.
SECRET_PATTERNS = ("*_TOKEN", "*_KEY", "*_SECRET", "*_SECRET_*", "*PASSWORD*", "*_API_KEY*")
NAMES_VAR = "AUTOLOOP_SECRET_NAMES"
MASK = "***"
# Shorter values would mask ordinary words ("main", "true") everywhere; no real credential is this short.
MIN_LENGTH = 6


@functools.lru_cache(maxsize=4096)  # each git command and evaluation asks again about the same names
def looks_secret(name: str) -> bool:
    """Returns whether a variable called name holds a secret by its name alone."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_PATTERNS)


@dataclass(frozen=True)
class Redactor:
    """Replaces known secret values by MASK.

    Attributes:
      values: the secret values, longest first (so a secret that contains another is masked whole).
    """

    values: tuple[str, ...] = ()

    def text(self, text: str) -> str:
        """Returns text with every secret value masked."""
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def data(self, data: bytes) -> bytes:
        """Returns bytes with every secret value (UTF-8) masked."""
        for value in self.values:
            encoded = value.encode("utf-8")
            if encoded in data:
                data = data.replace(encoded, MASK.encode())
        return data

    def found_in(self, text: str) -> bool:
        """Returns whether text holds a secret value."""
        return any(value in text for value in self.values)

    def structure(self, value: Any) -> Any:
        """Returns a JSON-like value (dicts, lists, strings) with every string masked, keys included."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)) if isinstance(k, str) else k: self.structure(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.structure(v) for v in value)
        return value


def secret_names(environ: Mapping[str, str]) -> list[str]:
    """Returns the names in environ whose values are secrets: secret-like names and AUTOLOOP_SECRET_NAMES."""
    listed = {name.strip() for name in environ.get(NAMES_VAR, "").split(",") if name.strip()}
    return sorted(name for name in environ if name in listed or (looks_secret(name) and name != NAMES_VAR))


def from_environment(environ: Mapping[str, str]) -> Redactor:
    """Returns the redactor of the secret values held in environ (each value, and each of its lines)."""
    values: set[str] = set()
    for name in secret_names(environ):
        value = environ[name]
        for piece in (value, value.strip(), *value.splitlines()):
            piece = piece.strip()
            if len(piece) >= MIN_LENGTH:
                # Also as it appears inside JSON (trace rows), where quotes and backslashes are escaped.
                values.update({piece, json.dumps(piece)[1:-1]})
    return Redactor(tuple(sorted(values, key=lambda v: (-len(v), v))))


class RedactingFilter(logging.Filter):
    """A logging filter that masks secret values in each record's final message."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Masks the record's message (its arguments merged in); always keeps the record."""
        if self.redactor.values:
            message = record.getMessage()
            masked = self.redactor.text(message)
            if masked != message:
                record.msg, record.args = masked, None
            if record.exc_text:
                record.exc_text = self.redactor.text(record.exc_text)
        return True


class RedactingStream:
    """A text stream wrapper that masks secret values in what is written (the console's output)."""

    def __init__(self, stream: Any, redactor: Redactor) -> None:
        self._stream = stream
        self._redactor = redactor

    def write(self, text: str) -> int:
        """Writes text with its secrets masked; returns the length of the text given."""
        self._stream.write(self._redactor.text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
