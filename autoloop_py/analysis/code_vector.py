"""Code vectors: a program as hashed token 3-grams, blind to the names it binds, and the cosine between two.

The offline embedding of `novelty: embedding`: it needs no model and no download. Python sources are
tokenised with `tokenize`, comments, docstrings and blank lines dropped, and each name the program binds (a
variable, parameter, function, class or assigned attribute) replaced by its order of first appearance, so
renaming variables or reformatting leaves the vector unchanged while calling another function does not.
Other languages (or Python that does not parse) are split into words and punctuation as written. Counts of
3-grams, not of single tokens, so that the many `(`, `,` and `=` of any program do not make all programs alike.
A vector (these or a model's) is kept in a trace row as `pack` writes it: its non-zero components as text.
"""

from __future__ import annotations

import ast
import base64
import binascii
import hashlib
import io
import keyword
import math
import re
import struct
import tokenize
import warnings
from typing import Iterable, Mapping, Sequence

DIMENSIONS = 4096
# At most this many non-zero components are packed (a model's 3072 or the local 4096 dimensions fit; 24 KiB before
# base64), so a kept vector stays bounded whatever answered.
MAX_PACKED = 4096
NGRAM = 3
_WORD_RE = re.compile(r"\w+|[^\w\s]")
_SKIPPED = frozenset((tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER, tokenize.TYPE_COMMENT))
_MARKS = {tokenize.NEWLINE: "⏎", tokenize.INDENT: "⇥", tokenize.DEDENT: "⇤"}

Vector = tuple[float, ...]


def tokens(source: str, language: str = "python") -> list[str]:
    """Returns the source's tokens, with the names a Python program binds numbered by first appearance."""
    if language == "python":
        bound = _bound_names(source)
        if bound is not None:
            try:
                return _python_tokens(source, bound)
            except (tokenize.TokenError, SyntaxError):
                pass
    return _WORD_RE.findall(source)


def vector(source: str, language: str = "python", dimensions: int = DIMENSIONS) -> Vector:
    """Returns the unit-length vector of the counts of the source's token 3-grams, hashed (zeros when it has none)."""
    counts = [0.0] * dimensions
    words = tokens(source, language)
    for gram in zip(*(words[i:] for i in range(min(NGRAM, len(words))))):
        digest = hashlib.blake2b("\x1f".join(gram).encode("utf-8"), digest_size=8).digest()
        counts[int.from_bytes(digest, "big") % dimensions] += 1.0
    return unit(counts)


def unit(values: Iterable[float]) -> Vector:
    """Returns the values scaled to length 1 (all zeros stay zeros)."""
    found = tuple(float(v) for v in values)
    norm = math.sqrt(sum(v * v for v in found))
    return tuple(v / norm for v in found) if norm else found


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Returns the cosine similarity of two vectors (0 when either is all zeros or their lengths differ)."""
    if len(a) != len(b):
        return 0.0
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b)) / norms if norms else 0.0


def pack(vector: Sequence[float]) -> str | None:
    """Returns the vector as base64 text of its length and its non-zero (index, float32) components (None: too many)."""
    found = [(i, v) for i, v in enumerate(vector) if v]
    if len(found) > MAX_PACKED or len(vector) > 0xFFFF:
        return None
    data = struct.pack(f"<HH{len(found)}H{len(found)}f", len(vector), len(found), *(i for i, _ in found),
                       *(v for _, v in found))
    return base64.b64encode(data).decode("ascii")


def unpack(text: object) -> Vector | None:
    """Returns the vector pack wrote (None when the text is not one: a row is read, not trusted)."""
    try:
        data = base64.b64decode(text, validate=True) if isinstance(text, str) else b""
        size, count = struct.unpack_from("<HH", data)
        if len(data) != 4 + 6 * count:
            return None
        indices = struct.unpack_from(f"<{count}H", data, 4)
        values = struct.unpack_from(f"<{count}f", data, 4 + 2 * count)
    except (binascii.Error, struct.error):
        return None
    if any(i >= size for i in indices) or not all(math.isfinite(v) for v in values):
        return None
    dense = [0.0] * size
    for i, v in zip(indices, values):
        dense[i] = v
    return tuple(dense)


def nearest(query: Sequence[float], others: Mapping[str, Sequence[float]]) -> tuple[str, float] | None:
    """Returns (id, similarity) of the most similar vector among others (the first on ties; None when empty)."""
    scored = ((name, cosine(query, other)) for name, other in others.items())
    return max(scored, key=lambda pair: pair[1], default=None)


def _bound_names(source: str) -> set[str] | None:
    """Returns the names the program binds (None when it does not parse)."""
    try:
        with warnings.catch_warnings():  # a candidate's bad escapes would print SyntaxWarnings
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            bound.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return {name for name in bound if not keyword.iskeyword(name)}


def _python_tokens(source: str, bound: set[str]) -> list[str]:
    numbered: dict[str, str] = {}
    kept = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in _SKIPPED]
    found = []
    for i, token in enumerate(kept):
        if _is_docstring(kept, i):
            continue
        text = _MARKS.get(token.type, token.string)
        if token.type == tokenize.NAME and text in bound:
            text = numbered.setdefault(text, f"§{len(numbered)}")
        found.append(text)
    return found


def _is_docstring(kept: Sequence[tokenize.TokenInfo], i: int) -> bool:
    """Returns whether token i is a string standing alone as a statement (a docstring: it does nothing)."""
    starts = i == 0 or kept[i - 1].type in _MARKS
    return kept[i].type == tokenize.STRING and starts and i + 1 < len(kept) and kept[i + 1].type == tokenize.NEWLINE
