"""Code vectors: a program as hashed token 3-grams, blind to the names it binds, and the cosine between two.

The offline embedding of `novelty: embedding`: it needs no model and no download. Python sources are
tokenised with `tokenize`, comments, docstrings and blank lines dropped, and each name the program binds (a
variable, parameter, function, class or assigned attribute) replaced by its order of first appearance, so
renaming variables or reformatting leaves the vector unchanged while calling another function does not.
Other languages (or Python that does not parse) are split into words and punctuation as written. Counts of
3-grams, not of single tokens, so that the many `(`, `,` and `=` of any program do not make all programs alike.
"""

from __future__ import annotations

import ast
import hashlib
import io
import keyword
import math
import re
import tokenize
import warnings
from typing import Iterable, Mapping, Sequence

DIMENSIONS = 4096
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


def nearest(query: Sequence[float], others: Mapping[str, Sequence[float]]) -> tuple[str, float] | None:
    """Returns (id, similarity) of the most similar vector among others (the first on ties; None when empty)."""
    best: tuple[str, float] | None = None
    for name, other in others.items():
        similarity = cosine(query, other)
        if best is None or similarity > best[1]:
            best = (name, similarity)
    return best


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
