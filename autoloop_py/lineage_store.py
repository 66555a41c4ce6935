"""Lineage store: a candidate's ancestors and earlier results, read from its program's trace on the memory branch.

Reads are bounded for speed: the lineage stops after LINEAGE_DEPTH ancestors, normalised duplicates are
looked for among the lineage and the RECENT_ROWS newest rows only, and a byte-identical duplicate anywhere in
the run is found through the blob names (a blob is named by the sha256 of the source it holds). Files are
read in batches (one `git cat-file --batch` for all rows, one per group of sources), because one process per
file cost a third of a second per iteration on a 30-iteration run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path, PurePosixPath
from typing import Iterable, Mapping, Protocol, Sequence

from autoloop_py import novelty, trace
from autoloop_py.gitutil import call, failure, open_repo, rev_parse, tree_paths
from autoloop_py.machine_state import is_improvement
from autoloop_py.novelty import Ancestor, EarlierResult, NoveltyConfig, NoveltyVerdict
from autoloop_py.program import Program
from autoloop_py.strategies.runner import language_of

log = logging.getLogger(__name__)

LINEAGE_DEPTH = 12
RECENT_ROWS = 8


class TraceFiles(Protocol):
    """What the store reads the trace through (MemoryStore satisfies it)."""

    def read_many(self, paths: Sequence[str]) -> dict[str, str | None]:
        """Returns the text of each file (None when absent)."""
        ...

    def list(self, prefix: str = "") -> list[str]:
        """Returns the sorted paths starting with prefix."""
        ...


class BranchFiles:
    """The files of a branch as its tip was when this was made, read many at a time."""

    def __init__(self, root: Path, branch: str) -> None:
        self._repo = open_repo(root)
        self._tip = rev_parse(self._repo, f"refs/heads/{branch}")

    def list(self, prefix: str = "") -> list[str]:
        """Returns the sorted paths starting with prefix (none when the branch is absent)."""
        return [] if self._tip is None else tree_paths(self._repo, self._tip, prefix)

    def read_many(self, paths: Sequence[str]) -> dict[str, str | None]:
        """Returns the text of each file through one `git cat-file --batch` (None when absent or not UTF-8)."""
        if self._tip is None or not paths:
            return {path: None for path in paths}
        request = "".join(f"{self._tip}:{path}\n" for path in paths).encode("utf-8", "surrogateescape")
        result = call(self._repo, "cat-file", "--batch", stdin=request)
        if not result.ok:
            raise failure(result, self._repo, "the repository may be corrupt; run `git fsck`")
        return dict(zip(paths, _batch_contents(result.stdout)))


class TraceReader:
    """One program's trace rows and sources, each file read at most once."""

    def __init__(self, files: TraceFiles, program: str, metric: str | None = None) -> None:
        self._files = files
        self._metric = metric
        self._base = trace.trace_dir(program) + "/"
        paths = files.list(self._base)
        # Row files are `<iteration:06d>-<id>.json`, so sorting by path sorts by iteration.
        self._rows = sorted(p for p in paths if p.startswith(self._base + "rows/"))
        self._by_name: dict[str, str] = {}
        for path in self._rows:
            self._by_name.setdefault(PurePosixPath(path).name[7:-5], path)
        blobs = (PurePosixPath(p) for p in paths if p.startswith(self._base + "blobs/") and p.endswith(".txt"))
        self._solutions = {blob.stem for blob in blobs}
        self._texts: dict[str, str | None] = files.read_many(self._rows)

    def row(self, row_id: str) -> trace.TraceRow | None:
        """Returns the row with this id (None when the trace has none)."""
        path = self._by_name.get(_file_id(row_id))
        return self._row_at(path) if path is not None else None

    def source(self, row: trace.TraceRow) -> str | None:
        """Returns the full source a row recorded (None when its blob is missing)."""
        if not row.solution_sha256:
            return None
        return self._read(self._base + trace.blob_path(row.solution_sha256, ".txt"))

    def lineage(self, parent_id: str | None, depth: int = LINEAGE_DEPTH) -> tuple[Ancestor, ...]:
        """Returns the parent and its ancestors (at most depth), nearest first, stopping at a missing row or source."""
        rows: list[trace.TraceRow] = []
        current = parent_id
        while current is not None and len(rows) < depth and all(r.id != current for r in rows):
            row = self.row(current)
            if row is None:
                break
            rows.append(row)
            current = row.parent_id
        self._prefetch_sources(rows)
        chain: list[Ancestor] = []
        for row in rows:
            source = self.source(row)
            if source is None:
                break
            chain.append(Ancestor(row.id, row.iteration_found, source, row.status, self._score(row), row.changes))
        return tuple(chain)

    def evaluated(
        self, source: str, lineage: Sequence[Ancestor], language: str = "python", recent: int = RECENT_ROWS
    ) -> dict[str, EarlierResult]:
        """Returns the results a candidate may repeat: the lineage, the newest rows, and any row with its exact source."""
        results: dict[str, EarlierResult] = {}
        rows = [self.row(a.id) for a in lineage] + [self._row_at(p) for p in reversed(self._rows[-recent:])]
        self._prefetch_sources(row for row in rows if row is not None)
        for row in rows:
            if row is not None:
                self._add(results, row, language)
        sha = novelty.sha256_text(source)
        if sha in self._solutions and sha not in results:
            for path in reversed(self._rows):
                row = self._row_at(path)
                if row is not None and row.solution_sha256 == sha and self._add(results, row, language):
                    break
        return results

    def _add(self, results: dict[str, EarlierResult], row: trace.TraceRow, language: str) -> bool:
        """Adds an evaluated, scored row to results; returns whether it did."""
        score = self._score(row)
        source = self.source(row)
        if score is None or source is None or not _was_evaluated(row) or not row.solution_sha256:
            return False
        if row.solution_sha256 not in results:
            results[row.solution_sha256] = EarlierResult(
                row.id, row.iteration_found, score, dict(row.metrics), row.status,
                novelty.fingerprint(source, row.language or language),
            )
        return True

    def _score(self, row: trace.TraceRow) -> float | None:
        return trace.valid_score(row, self._metric)

    def _row_at(self, path: str) -> trace.TraceRow | None:
        text = self._read(path)
        if not text or not text.strip():
            return None
        try:
            return trace.row_from_json(json.loads(text))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            log.warning("%s: unreadable trace row (%s); the novelty filter ignores it", path, err)
            return None

    def _read(self, path: str) -> str | None:
        if path not in self._texts:
            self._texts.update(self._files.read_many([path]))
        return self._texts[path]

    def _prefetch_sources(self, rows: Iterable[trace.TraceRow]) -> None:
        """Reads the sources of rows not read yet, in one batch."""
        paths = [self._base + trace.blob_path(row.solution_sha256, ".txt") for row in rows if row.solution_sha256]
        missing = [path for path in dict.fromkeys(paths) if path not in self._texts]
        if missing:
            self._texts.update(self._files.read_many(missing))


def reader_for(root: Path, branch: str, program: Program) -> TraceReader | None:
    """Returns the reader of the program's trace on branch, or None when its `novelty_filter` is off."""
    if not program.config.novelty_filter:
        return None
    metric = program.evaluation.metric if program.evaluation else None
    return TraceReader(BranchFiles(root, branch), program.name, metric)


def deleted_items(reader: TraceReader | None, parent_id: str | None) -> tuple[str, ...]:
    """Returns the prompt items of the lines the parent's lineage recently deleted (none without a reader)."""
    if reader is None:
        return ()
    return tuple(line.describe() for line in novelty.recently_deleted(reader.lineage(parent_id)))


def screen(
    reader: TraceReader,
    program: Program,
    primary: str | None,
    files: Mapping[str, str],
    changes: Mapping[str, str | None],
    parent_id: str | None,
    best: float | None,
) -> NoveltyVerdict | None:
    """Returns the verdict on a candidate that should not be evaluated, else None.

    Only a candidate of a single-file Target is judged: a trace keeps the primary file's source alone, so
    with more files two equal primary sources may still be different programs. A duplicate whose reused
    result would now be accepted is evaluated anyway.
    """
    source = changes.get(primary) if primary is not None else None
    if source is None or set(files) | set(changes) != {primary}:
        return None
    language = language_of(primary or "")
    lineage = reader.lineage(parent_id)
    config = NoveltyConfig(threshold=program.config.novelty_threshold)
    verdict = novelty.check(source, lineage, reader.evaluated(source, lineage, language), config, language)
    if not verdict.skipped:
        return None
    if verdict.metric is not None and is_improvement(verdict.metric, best, program.direction, program.config.min_delta):
        log.info("%s: repeats candidate %s, whose result would now be accepted; evaluating it", program.name, verdict.of)
        return None
    return verdict


def _batch_contents(output: bytes) -> list[str | None]:
    """Returns the objects of `git cat-file --batch` output in order (None for a missing or non-UTF-8 one)."""
    contents: list[str | None] = []
    at = 0
    while at < len(output):
        end = output.index(b"\n", at)
        header = output[at:end]
        at = end + 1
        if header.endswith((b" missing", b" ambiguous")):
            contents.append(None)
            continue
        _, kind, size_text = header.rsplit(b" ", 2)
        size = int(size_text)
        if kind != b"blob":
            contents.append(None)
            at += size + 1
            continue
        try:
            contents.append(output[at:at + size].decode("utf-8"))
        except UnicodeDecodeError:
            contents.append(None)
        at += size + 1
    return contents


def _file_id(row_id: str) -> str:
    """Returns the id as a row's file name spells it (unsafe characters replaced, as trace.row_file_name does)."""
    return trace.row_file_name(trace.TraceRow(row_id, 0, None, {}, "accepted"))[7:-5]


def _was_evaluated(row: trace.TraceRow) -> bool:
    """Returns whether the row's metrics come from its own evaluation (not reused by the novelty filter)."""
    metadata = row.extra.get("metadata")
    verdict = metadata.get("novelty") if isinstance(metadata, dict) else None
    return not (isinstance(verdict, dict) and verdict.get("evaluated") is False)
