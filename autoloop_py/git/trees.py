"""Tree overlay: the git trees of a commit with some files written over it, computed without an index.

Building the memory commit through a temporary index read and rewrote every entry of the branch
(tens of thousands after a long run); overlaying touches only the trees on the changed paths.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Mapping

TREE_MODE = b"40000"
FILE_MODE = b"100644"

Entry = tuple[bytes, bytes, bytes]  # (mode, name, 20-byte id)


def parse_tree(data: bytes, id_size: int = 20) -> list[Entry]:
    """Returns the entries of a raw tree object in their stored order (ids of id_size bytes: 20 SHA-1, 32 SHA-256)."""
    entries, at = [], 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        entries.append((data[at:space], data[space + 1:nul], data[nul + 1:nul + 1 + id_size]))
        at = nul + 1 + id_size
    return entries


def render_tree(entries: Mapping[bytes, tuple[bytes, bytes]]) -> bytes:
    """Returns the raw tree object of {name: (mode, id)}, in git's order (a tree sorts as `name/`)."""
    def key(name: bytes) -> bytes:
        return name + b"/" if entries[name][0] == TREE_MODE else name

    return b"".join(entries[name][0] + b" " + name + b"\0" + entries[name][1] for name in sorted(entries, key=key))


def object_id(kind: str, data: bytes, algorithm: str = "sha1") -> str:
    """Returns the object id git gives `data` stored as `kind` in a repository of this object format."""
    return hashlib.new(algorithm, b"%s %d\0" % (kind.encode(), len(data)) + data).hexdigest()


def overlay(
    read_tree: Callable[[str], bytes | None], root: str | None, files: Mapping[str, str], algorithm: str = "sha1"
) -> tuple[str, dict[str, bytes]]:
    """Returns (the new root tree id, {id: raw tree} of every tree made) for `files` (path → blob id) over tree `root`.

    read_tree returns a tree object's raw data by id. A file written where a folder was replaces it,
    and the other way round, as `update-index --replace` does.
    """
    made: dict[str, bytes] = {}
    size = hashlib.new(algorithm).digest_size

    def build(tree: str | None, changes: dict[bytes, str]) -> str:
        raw = read_tree(tree) if tree else None
        entries = {name: (mode, oid) for mode, name, oid in parse_tree(raw or b"", size)}
        below: dict[bytes, dict[bytes, str]] = {}
        for path, blob in changes.items():
            head, slash, rest = path.partition(b"/")
            if slash:
                below.setdefault(head, {})[rest] = blob
            else:
                entries[head] = (FILE_MODE, bytes.fromhex(blob))
        for name, inner in below.items():
            mode, oid = entries.get(name, (b"", b""))
            entries[name] = (TREE_MODE, bytes.fromhex(build(oid.hex() if mode == TREE_MODE else None, inner)))
        data = render_tree(entries)
        sha = object_id("tree", data, algorithm)
        made[sha] = data
        return sha

    encoded = {path.encode("utf-8", "surrogateescape"): blob for path, blob in files.items()}
    return build(root, encoded), made
