"""The environment a sandboxed command sees: an allow-list, never anything that looks like a secret."""

from __future__ import annotations

import fnmatch
import functools
import logging
from typing import Iterable, Mapping

from autoloop_py.redact import SECRET_PATTERNS, secret_names

logger = logging.getLogger(__name__)

SAFE_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ",
    "TMPDIR", "TMP", "TEMP", "PWD", "PYTHONPATH", "PYTHONUSERBASE", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
    "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_*", "CI", "SYSTEMROOT",
)  # fmt: skip
SECRET_ENV = ("ACTIONS_*", "*SECRET*", *SECRET_PATTERNS)
EXTRA_ENV_VAR = "AUTOLOOP_EVAL_ENV"


def scrub_environment(environ: Mapping[str, str], allow: Iterable[str] = ()) -> dict[str, str]:
    """Returns the allow-listed variables of environ, without anything that looks like a secret."""
    explicit = tuple(allow)
    extra = tuple(name.strip() for name in environ.get(EXTRA_ENV_VAR, "").split(",") if name.strip())
    patterns = SAFE_ENV + explicit + extra
    named = set(secret_names(environ))
    kept: dict[str, str] = {}
    for name, value in environ.items():
        if not _matches(name, patterns):
            continue
        if (_matches(name.upper(), SECRET_ENV) or name in named) and name not in explicit:
            logger.debug("not passing %s to the evaluation: it looks like a secret", name)
            continue
        kept[name] = value
    return kept


@functools.lru_cache(maxsize=4096)  # each evaluation scrubs the same environment again
def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    """Returns whether name matches one of the fnmatch patterns (case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
