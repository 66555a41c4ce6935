"""Push refusals: why a remote turned a push down, read from git's stderr."""

from __future__ import annotations

import re
from dataclasses import dataclass

RACE = "race"  # the remote branch moved on: another run pushed first
SIZE = "size"  # a file or the pack is over the remote's size limit
ACCESS = "access"  # no permission, or a protected branch
REFUSED = "refused"  # a server-side hook or rule said no, for another reason
NETWORK = "network"  # the remote could not be reached
OTHER = "other"

# A concurrent push can also surface as the remote failing to lock or update the ref.
_RACE_RE = re.compile(r"non-fast-forward|\(fetch first\)|\(stale info\)|tip of your current branch is behind"
                      r"|cannot lock ref|failed to lock|failed to update ref|reference already exists"
                      r"|incorrect old value", re.IGNORECASE)
_SIZE_RE = re.compile(r"exceeds|too large|large files detected|file size limit|maximum allowed size"
                      r"|request entity too large|\bHTTP 413\b", re.IGNORECASE)
# A 403 is a status, not part of a path or a name (a remote at /tmp/pytest-403/origin.git once read as one).
_ACCESS_RE = re.compile(r"permission (?:to .* )?denied|(?<![\w./-])403(?![\w./-])|authentication failed"
                        r"|could not read username"
                        r"|protected branch|not allowed to push|write access .* not granted", re.IGNORECASE)
_REFUSED_RE = re.compile(r"\[remote rejected\]|hook declined|\bdeclined\b|unpacker error|remote unpack failed",
                         re.IGNORECASE)
_NETWORK_RE = re.compile(r"could not resolve host|unable to access|connection (?:refused|reset|timed out)"
                         r"|could not read from remote repository|early eof|the remote end hung up", re.IGNORECASE)
# Anchored loosely: a GitError puts the first stderr line after "failed (exit 1): ".
_REMOTE_LINE_RE = re.compile(r"(?:^|\s)remote:[ \t]*(.*?)[ \t]*$", re.MULTILINE)
_BRACKET_RE = re.compile(r"!\s*\[(?:remote )?rejected\][^(\n]*\(([^)\n]*)\)")
_DETAIL_LIMIT = 300


@dataclass(frozen=True)
class PushRefusal:
    """Why a push failed.

    Attributes:
      kind: RACE, SIZE, ACCESS, REFUSED, NETWORK or OTHER.
      detail: what the remote said, on one line (its `remote:` lines and the bracketed reason).
    """

    kind: str
    detail: str

    @property
    def is_race(self) -> bool:
        """Returns whether another push got there first (so retrying on the fresh tip can succeed)."""
        return self.kind == RACE


def read_refusal(stderr: str) -> PushRefusal:
    """Returns why git's push failed, judged from its stderr (the remote's own words first)."""
    detail = _detail(stderr)
    for kind, pattern in ((SIZE, _SIZE_RE), (ACCESS, _ACCESS_RE), (RACE, _RACE_RE), (REFUSED, _REFUSED_RE),
                          (NETWORK, _NETWORK_RE)):
        if pattern.search(stderr):
            return PushRefusal(kind, detail)
    return PushRefusal(OTHER, detail)


def describe(refusal: PushRefusal, remote: str) -> str:
    """Returns one clause saying why the push failed, for a history note or an error."""
    said = f": {refusal.detail}" if refusal.detail else ""
    return {
        RACE: f"{remote} has newer commits (another run pushed first){said}",
        SIZE: f"{remote} refused it as too large{said}",
        ACCESS: f"{remote} refused it: no permission to push there{said}",
        REFUSED: f"{remote} refused it{said}",
        NETWORK: f"{remote} could not be reached{said}",
    }.get(refusal.kind, f"the push failed{said}")


def _detail(stderr: str) -> str:
    """Returns the bracketed reasons and the remote's messages (the telling ones first) on one line, else the
    first error lines."""
    said = [re.sub(r"^(?:error|fatal):\s*", "", line, flags=re.IGNORECASE)
            for line in _REMOTE_LINE_RE.findall(stderr) if line and not set(line) <= set("-= ")]
    telling = [line for line in said if any(p.search(line) for p in (_SIZE_RE, _ACCESS_RE, _RACE_RE))]
    said = [*_BRACKET_RE.findall(stderr), *telling, *said]
    if not any(said):
        said = [line.strip() for line in stderr.splitlines() if line.strip().lower().startswith(("error", "fatal"))][:2]
    text = "; ".join(dict.fromkeys(" ".join(line.split()) for line in said if line))
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"
