"""Novelty: whether a candidate is worth evaluating, and which lines its lineage deleted recently.

A candidate is a *duplicate* when its source is byte-identical (or identical up to formatting) to an
evaluated one, so that result can be reused; it is *recycled* when most of its added lines are
byte-identical re-introductions of lines its own lineage deleted (the lineage-restricted literal class of
the cycling classifier in autoloop_py/analysis/cycling.py, whose line normalisation it reuses); under
`novelty: embedding` it is *similar* when its vector is closer than `novelty-threshold` to an evaluated
candidate's (similarity.py decides that); else *novel*.
"""

from __future__ import annotations

import ast
import hashlib
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from autoloop_py.analysis import Node, cycling

NOVEL = "novel"
DUPLICATE = "duplicate"
RECYCLED = "recycled"
SIMILAR = "similar"
# The paper (§5.2) finds a median of about 30 % of added lines re-introducing lines the same lineage deleted,
# so some recycling is the normal state of an edit. 0.8 sits far above that level: only an edit made almost
# entirely of re-added lines (four of five and more) is skipped, never the ordinary edit that re-adds a few.
DEFAULT_THRESHOLD = 0.8
# One or two re-added lines (the paper's B.8 `cooling_rate` churn) are too little to judge a whole edit by;
# a candidate that only undoes such a nudge is a duplicate of an evaluated program and caught as one.
DEFAULT_MIN_ADDED = 3
# Under `novelty: embedding`: the local code vector scores a renaming, reformatting or comment change 1.0, but
# one changed number in a 60-line file about 0.996, so only near-repeats lie above this by default.
DEFAULT_SIMILARITY = 0.999
# How many deleted lines the prompt shows: enough for the recent churn, bounded so prompts stay small.
PROMPT_LIMIT = 12
_CANDIDATE = "\0candidate"
_MAX_SHOWN = 160


@dataclass(frozen=True)
class NoveltyConfig:
    """How strict the filter is.

    Attributes:
        threshold: the share of a candidate's added lines that must be literal re-adds for it to be recycled.
        min_added: candidates adding fewer counted lines than this are never recycled.
    """

    threshold: float = DEFAULT_THRESHOLD
    min_added: int = DEFAULT_MIN_ADDED


@dataclass(frozen=True)
class Ancestor:
    """One program on a candidate's lineage (its parent, grandparent, ...).

    Attributes:
        id: the program's trace row id.
        iteration: the iteration that produced it.
        source: its full source.
        status: accepted, rejected or failed.
        metric: its primary score (None when unscored).
        change: the one-line summary of the edit that produced it.
    """

    id: str
    iteration: int
    source: str
    status: str = "accepted"
    metric: float | None = None
    change: str = ""


@dataclass(frozen=True)
class EarlierResult:
    """An evaluated program whose result a duplicate may reuse.

    Attributes:
        id: its trace row id.
        iteration: the iteration that evaluated it.
        metric: its primary score (None when it failed or is unscored: such results are never reused).
        metrics: everything its evaluation printed.
        status: accepted, rejected or failed.
        fingerprint: `fingerprint()` of its source (None when the source was not read).
    """

    id: str
    iteration: int
    metric: float | None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    status: str = "rejected"
    fingerprint: str | None = None


@dataclass(frozen=True)
class NoveltyVerdict:
    """What the filter decided about a candidate.

    Attributes:
        kind: novel, duplicate, recycled or similar.
        of: the earlier candidate a duplicate repeats, or the nearest evaluated one to a similar candidate.
        identical: a duplicate is byte-identical (False: identical up to formatting and comments).
        metric: the reused primary score of a duplicate.
        metrics: the reused metrics of a duplicate.
        added: counted lines the candidate adds to its parent.
        recycled: those that re-add, byte for byte, a line the lineage deleted.
        deleted_in: the iterations whose edits deleted the re-added lines.
        similarity: a similar candidate's cosine similarity to `of`.
        threshold: the `novelty-threshold` it exceeded.
        embedder: what embedded it: `local` (code vectors) or the `role: embedding` model.
        judged: the `role: judge` model's word that it is no different (None: no judge was asked).
    """

    kind: str
    of: str | None = None
    identical: bool = True
    metric: float | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    added: int = 0
    recycled: int = 0
    deleted_in: tuple[int, ...] = ()
    similarity: float | None = None
    threshold: float | None = None
    embedder: str | None = None
    judged: str | None = None

    @property
    def skipped(self) -> bool:
        """Returns whether the candidate should not be evaluated."""
        return self.kind != NOVEL

    @property
    def share(self) -> float:
        """Returns the share of added lines that are literal re-adds (0 when it adds nothing)."""
        return self.recycled / self.added if self.added else 0.0

    def note(self) -> str:
        """Returns the history note of a skipped candidate."""
        if self.kind == DUPLICATE:
            how = "identical" if self.identical else "identical up to formatting and comments"
            reused = f"metric {self.metric:g} reused" if self.metric is not None else "its result stands"
            return f"not evaluated: {how} to candidate {self.of} ({reused})"
        if self.kind == RECYCLED:
            iterations = ", ".join(str(i) for i in self.deleted_in)
            return (f"not evaluated: {self.share:.0%} of its added lines ({self.recycled} of {self.added}) "
                    f"re-add lines deleted in iteration{'s' if len(self.deleted_in) > 1 else ''} {iterations}")
        if self.kind == SIMILAR:
            judged = f"; the judge: {self.judged}" if self.judged else ""
            return (f"not evaluated: similarity {self.similarity:.4f} to candidate {self.of} is above "
                    f"novelty-threshold {self.threshold:g} ({self.embedder} vectors{judged})")
        return "novel"

    def metadata(self) -> dict[str, Any]:
        """Returns what a trace row records about the verdict (`metadata.novelty`)."""
        data: dict[str, Any] = {"verdict": self.kind, "evaluated": not self.skipped}
        if self.kind == DUPLICATE:
            data.update(of=self.of, identical=self.identical)
        if self.kind == RECYCLED:
            data.update(added=self.added, recycled=self.recycled, deleted_in=list(self.deleted_in))
        if self.kind == SIMILAR:
            data.update(of=self.of, similarity=self.similarity, threshold=self.threshold, embedder=self.embedder)
            if self.judged is not None:
                data["judged"] = self.judged
        return data


@dataclass(frozen=True)
class DeletedLine:
    """A line the lineage deleted and has not put back.

    Attributes:
        text: the line as it was written (stripped).
        iteration: the iteration whose edit deleted it.
        by: the program that edit produced.
        status: that program's status.
        metric: that program's score.
        change: that edit's summary.
    """

    text: str
    iteration: int
    by: str
    status: str
    metric: float | None
    change: str

    def describe(self) -> str:
        """Returns the prompt item: the line, then where and why it was deleted."""
        text = self.text if len(self.text) <= _MAX_SHOWN else self.text[: _MAX_SHOWN - 1] + "…"
        outcome = self.status if self.metric is None else f"{self.status}, metric {self.metric:g}"
        change = f"; change: {self.change}" if self.change else ""
        return f"{text}    ← deleted in iteration {self.iteration} by {self.by} ({outcome}{change})"


def check(
    candidate_source: str,
    lineage: Sequence[Ancestor],
    evaluated: Mapping[str, EarlierResult],
    config: NoveltyConfig = NoveltyConfig(),
    language: str = "python",
) -> NoveltyVerdict:
    """Returns the verdict on a candidate; `evaluated` maps the sha256 of each evaluated source to its result."""
    twin = duplicate(candidate_source, evaluated, language)
    return twin if twin is not None else recycling(candidate_source, lineage, config)


def duplicate(source: str, evaluated: Mapping[str, EarlierResult], language: str = "python") -> NoveltyVerdict | None:
    """Returns a duplicate verdict when an evaluated, scored program has the same source (exactly, else normalised)."""
    exact = evaluated.get(sha256_text(source))
    if exact is not None and exact.metric is not None:
        return _reuse(exact, identical=True)
    key = fingerprint(source, language)
    for result in sorted(evaluated.values(), key=lambda r: (r.iteration, r.id)):
        if result.metric is not None and result.fingerprint == key:
            return _reuse(result, identical=False)
    return None


def recycling(source: str, lineage: Sequence[Ancestor], config: NoveltyConfig = NoveltyConfig()) -> NoveltyVerdict:
    """Returns recycled when enough of the candidate's added lines literally re-add lines its lineage deleted."""
    nodes = _nodes(source, lineage)
    edits = cycling.edits_of(nodes)
    own = next((edit for edit in edits if edit.child_id == _CANDIDATE), None)
    added = len(own.added_counted()) if own is not None else 0
    if added < max(config.min_added, 1):
        return NoveltyVerdict(NOVEL, added=added)
    events = [e for e in cycling.classify_lineage(edits, nodes) if e.child_id == _CANDIDATE and e.kind == "literal"]
    verdict = NoveltyVerdict(
        NOVEL, added=added, recycled=len(events), deleted_in=tuple(sorted({e.iteration - e.span for e in events}))
    )
    if verdict.recycled and verdict.share >= config.threshold:
        return NoveltyVerdict(RECYCLED, added=added, recycled=verdict.recycled, deleted_in=verdict.deleted_in)
    return verdict


def recently_deleted(lineage: Sequence[Ancestor], limit: int = PROMPT_LIMIT) -> list[DeletedLine]:
    """Returns the code lines the lineage deleted and the parent (lineage[0]) lacks, most recent first."""
    if not lineage:
        return []
    present = {cycling.normalize(line) for line in lineage[0].source.splitlines()}
    found: list[DeletedLine] = []
    seen: set[str] = set()
    for child, parent in zip(lineage, lineage[1:]):
        removed, _ = cycling.diff_lines(parent.source, child.source)
        for raw in removed:
            line = cycling.normalize(raw)
            # Comments and one-token lines carry no idea worth warning about (the filter still counts comments).
            short = len(line) < cycling.MIN_LENGTH or cycling.is_noise(line) or cycling.is_comment(line)
            if short or line in present or line in seen:
                continue
            seen.add(line)
            found.append(DeletedLine(raw.strip(), child.iteration, child.id, child.status, child.metric, child.change))
            if len(found) >= limit:
                return found
    return found


def fingerprint(source: str, language: str = "python") -> str:
    """Returns a hash of the source that ignores layout and comments (Python) or trailing blanks (other languages)."""
    return sha256_text(_normalized(source, language))


def sha256_text(text: str) -> str:
    """Returns the sha256 hex digest of text encoded as UTF-8 (the trace's solution hash)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _normalized(source: str, language: str) -> str:
    """Returns the source in a form two programs share exactly when they behave the same."""
    if language == "python":
        try:
            # A candidate's invalid escape sequences would otherwise print SyntaxWarnings into the run's output.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return "ast:" + ast.dump(ast.parse(source))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    # Layout matters in some languages (Makefiles, YAML), so only trailing blanks and line endings are dropped.
    return "text:" + "\n".join(line.rstrip() for line in source.splitlines()).strip("\n")


def _reuse(result: EarlierResult, identical: bool) -> NoveltyVerdict:
    return NoveltyVerdict(DUPLICATE, of=result.id, identical=identical, metric=result.metric,
                          metrics=dict(result.metrics))


def _nodes(source: str, lineage: Sequence[Ancestor]) -> list[Node]:
    """Returns the lineage (root first, cut at a repeated id) and the candidate as analysis nodes."""
    chain: list[Ancestor] = []
    for ancestor in lineage:
        if any(a.id == ancestor.id for a in chain) or ancestor.id == _CANDIDATE:
            break
        chain.append(ancestor)
    nodes = [Node(a.id, chain[i + 1].id if i + 1 < len(chain) else None, a.iteration, a.metric, a.status, a.source)
             for i, a in enumerate(chain)]
    top = max((a.iteration for a in chain), default=0) + 1
    parent = chain[0].id if chain else None
    return [*reversed(nodes), Node(_CANDIDATE, parent, top, None, "rejected", source)]
