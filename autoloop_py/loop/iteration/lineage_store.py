"""Lineage store: a candidate's ancestors and earlier results, read from its program's trace on the memory branch.

Reads are bounded, so an iteration costs the same after 10 or 10,000 iterations: the row folder's names
come from one tree object, the lineage stops after LINEAGE_DEPTH ancestors, normalised duplicates are
looked for among the lineage and the RECENT_ROWS newest rows only, and a byte-identical duplicate anywhere
in the run is found through the source index (`sources/<sha[:2]>/<sha>/<row file>`, written with each row)
rather than by reading every row. Objects come through the run's one `git cat-file --batch` process.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Protocol, Sequence

from autoloop_py.git.command import open_repo
from autoloop_py.git.objects import ObjectReader
from autoloop_py.loop.iteration import novelty
from autoloop_py.loop.iteration.novelty import Ancestor, EarlierResult, NoveltyConfig, NoveltyVerdict
from autoloop_py.program.model import Program
from autoloop_py.redact import Redactor
from autoloop_py.state import feedback, trace
from autoloop_py.state.file import StateFile
from autoloop_py.state.machine import is_improvement
from autoloop_py.state.memory_folder import FolderMemory, Memory
from autoloop_py.state.population import Population, population_of
from autoloop_py.strategies.runner import language_of

log = logging.getLogger(__name__)

LINEAGE_DEPTH = 12
RECENT_ROWS = 8
# The parent's latest attempts that were not kept whose feedback a prompt shows.
FEEDBACK_ATTEMPTS = 3
# Rows read at a time when a trace written before the source index is searched for an exact source.
SCAN_CHUNK = 64


class TraceFiles(Protocol):
    """What the store reads the trace through (BranchFiles on the memory branch; a dict in tests)."""

    def read_many(self, paths: Sequence[str]) -> dict[str, str | None]:
        """Returns the text of each file (None when absent)."""
        ...

    def names(self, folder: str) -> list[str]:
        """Returns the sorted names of the entries directly inside folder ([] when absent)."""
        ...


class BranchFiles:
    """The files of a branch as its tip was when this was made, read through one `git cat-file --batch`, and those of
    a record not committed yet over them (`unwritten`: path → content, MemoryStore.unwritten)."""

    def __init__(self, root: Path, branch: str, objects: ObjectReader | None = None,
                 unwritten: Mapping[str, str | bytes] | None = None) -> None:
        self.objects = objects if objects is not None else ObjectReader(open_repo(root))
        self._tip = self.objects.commit_sha(f"refs/heads/{branch}")
        self._unwritten = dict(unwritten or {})

    def names(self, folder: str) -> list[str]:
        """Returns the sorted entry names of folder at the tip ([] when the branch or folder is absent)."""
        found = [] if self._tip is None else self.objects.names(f"{self._tip}:{folder}")
        inside = {path[len(folder) + 1:].split("/", 1)[0] for path in self._unwritten if path.startswith(folder + "/")}
        return sorted(inside.union(found)) if inside else found

    def read_many(self, paths: Sequence[str]) -> dict[str, str | None]:
        """Returns the text of each file at the tip (None when absent, not a file or not UTF-8).

        Each file is read by its blob's id, which the object reader keeps: a row that every later iteration
        reads again (the newest rows, the lineage) is read from git once per run, however often the tip moved.
        """
        tree = self.objects.tree_of(self._tip) if self._tip is not None else None
        found = {path: self._text(tree, path) if tree is not None else None for path in paths}
        return found | {path: _decoded(self._unwritten[path]) for path in paths if path in self._unwritten}

    def _text(self, tree: str, path: str) -> str | None:
        found = self.objects.entry(tree, path)
        return self.objects.text(found[1]) if found is not None and found[0] != b"40000" else None


def _decoded(content: str | bytes) -> str | None:
    try:
        return content if isinstance(content, str) else content.decode("utf-8")
    except UnicodeDecodeError:
        return None


class FolderFiles:
    """The files of a memory folder (gh-aw's repo-memory clone, state/memory_folder.py)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def names(self, folder: str) -> list[str]:
        """Returns the sorted entry names of folder ([] when absent)."""
        where = self.folder / folder
        return sorted(entry.name for entry in where.iterdir()) if where.is_dir() else []

    def read_many(self, paths: Sequence[str]) -> dict[str, str | None]:
        """Returns the text of each file (None when absent, not a file or not UTF-8)."""
        return {path: self._text(path) for path in paths}

    def _text(self, path: str) -> str | None:
        file = self.folder / path
        try:
            return file.read_bytes().decode("utf-8") if file.is_file() and not file.is_symlink() else None
        except (OSError, UnicodeDecodeError):
            return None


class TraceReader:
    """One program's trace rows and sources, each file read at most once and only when needed."""

    def __init__(self, files: TraceFiles, program: str, metric: str | None = None) -> None:
        self._files = files
        self._metric = metric
        self._base = trace.trace_dir(program) + "/"
        # Row files are `<iteration:06d>-<id>.json`, so sorting by name sorts by iteration.
        rows = self._base + "rows"
        self._rows = [f"{rows}/{name}" for name in files.names(rows) if name.endswith(".json")]
        # An id's first row file, should two names spell it alike (reversed: the first one written over them wins).
        self._by_name = {path.rsplit("/", 1)[1][7:-5]: path for path in reversed(self._rows)}
        self._texts: dict[str, str | None] = {}
        self._known = frozenset(self._rows)

    def row(self, row_id: str) -> trace.TraceRow | None:
        """Returns the row with this id (None when the trace has none)."""
        # The id as its file name spells it (unsafe characters replaced).
        path = self._by_name.get(trace.row_file_name(trace.TraceRow(row_id, 0, None, {}, "accepted"))[7:-5])
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
        """Returns the results a candidate may repeat: the lineage, the newest rows, and any row with its exact
        source."""
        results: dict[str, EarlierResult] = {}
        rows = [self.row(a.id) for a in lineage] + self.recent_rows(recent)
        self._prefetch_sources(row for row in rows if row is not None)
        for row in rows:
            if row is not None:
                self._add(results, row, language)
        sha = novelty.sha256_text(source)
        if sha not in results:
            for path in self._rows_with_source(sha):
                row = self._row_at(path)
                if row is not None and row.solution_sha256 == sha and self._add(results, row, language):
                    break
        return results

    def evaluated_sources(self, lineage: Sequence[Ancestor], recent: int = RECENT_ROWS) -> dict[str, str]:
        """Returns {id: source} of the lineage and the `recent` newest rows that were evaluated and scored."""
        rows = [self.row(a.id) for a in lineage] + self.recent_rows(recent)
        self._prefetch_sources(row for row in rows if row is not None)
        found = {}
        for row in rows:
            source = self.source(row) if row is not None and _was_evaluated(row) else None
            if row is not None and source is not None and self._score(row) is not None:
                found.setdefault(row.id, source)
        return found

    def recent_rows(self, recent: int = RECENT_ROWS) -> list[trace.TraceRow]:
        """Returns the `recent` newest rows, newest first (unreadable ones left out)."""
        newest = list(reversed(self._rows[-recent:])) if recent > 0 else []
        self._prefetch(newest)
        return [row for row in (self._row_at(path) for path in newest) if row is not None]

    def recent_children(self, parent_id: str, recent: int = RECENT_ROWS) -> list[trace.TraceRow]:
        """Returns the `recent` newest rows derived from parent_id, newest first.

        They are found through the children index (`children/<parent id>/<row file>`, written with each row),
        however far back they are, and among the `recent` newest rows (a trace written before the index).
        """
        if recent <= 0:
            return []
        indexed = self._files.names(self._base + trace.children_index_dir(parent_id))
        paths = [path for name in indexed[-recent:] if (path := self._base + "rows/" + name) in self._known]
        newest = sorted(set(paths) | set(self._rows[-recent:]), reverse=True)
        self._prefetch(newest)
        rows = [row for row in (self._row_at(path) for path in newest) if row is not None]
        return [row for row in rows if row.parent_id == parent_id][:recent]

    def _rows_with_source(self, sha: str) -> Iterator[str]:
        """Yields the paths of the rows that may have recorded source `sha`, newest first."""
        if f"{sha}.txt" not in self._files.names(self._base + f"blobs/{sha[:2]}"):
            return
        indexed = self._files.names(self._base + trace.source_index_dir(sha))
        yield from (path for name in reversed(indexed) if (path := self._base + "rows/" + name) in self._known)
        if indexed:
            return
        # A trace recorded before the source index: every row, newest first, read a chunk at a time.
        for end in range(len(self._rows), 0, -SCAN_CHUNK):
            chunk = self._rows[max(0, end - SCAN_CHUNK):end]
            self._prefetch(chunk)
            yield from reversed(chunk)

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
        self._prefetch(
            [self._base + trace.blob_path(row.solution_sha256, ".txt") for row in rows if row.solution_sha256]
        )

    def _prefetch(self, paths: Sequence[str]) -> None:
        """Reads the files not read yet, in one batch."""
        missing = [path for path in dict.fromkeys(paths) if path not in self._texts]
        if missing:
            self._texts.update(self._files.read_many(missing))


def trace_reader(root: Path, branch: str, program: Program, objects: ObjectReader | None = None,
                 unwritten: Mapping[str, str | bytes] | None = None) -> TraceReader:
    """Returns the reader of the program's trace on branch (its rows are listed now, read when asked), with the files
    of a record not committed yet (`unwritten`) over it."""
    return TraceReader(BranchFiles(root, branch, objects, unwritten), program.name, program.metric)


def memory_reader(root: Path, memory: Memory, program: Program) -> TraceReader:
    """Returns the reader of the program's trace in memory: the memory branch, or the memory folder."""
    if isinstance(memory, FolderMemory):
        return TraceReader(FolderFiles(memory.folder), program.name, program.metric)
    return trace_reader(root, memory.config.branch, program, memory.session.objects)


def _artifacts(row: trace.TraceRow) -> Mapping[str, Any]:
    artifacts = row.extra.get("artifacts")
    return artifacts if isinstance(artifacts, Mapping) else {}


def feedback_items(
    reader: TraceReader | None, parent_id: str | None, program: Program, pending: trace.TraceRow | None = None,
    origins: Mapping[str, str] | None = None, attempts: int = FEEDBACK_ATTEMPTS,
) -> tuple[str, ...]:
    """Returns the prompt items of what evaluations said of the parent and of its latest attempts that were not kept.

    Each item is one candidate's feedback cut to the program's `feedback-bytes` (none without a reader).
    pending: the parent's row when this iteration made it and has not recorded it yet (the baseline's seed).
    origins: each copied candidate's source id (copy_origins): a parent with no row of its own (an AdaEvolve
    migrant or island copy) shows the feedback of the row it was copied from.
    attempts: how many of its latest attempts not kept are shown (0: the parent's own feedback only).
    """
    if reader is None or parent_id is None or program.config.feedback_bytes <= 0:
        return ()
    metric = program.metric
    shown: list[tuple[str, trace.TraceRow]] = []
    parent = _own_row(reader, parent_id, origins or {})
    if parent is None and pending is not None and pending.id == parent_id:
        parent = pending
    if parent is not None:
        copied = f", a copy of {parent.id}" if parent.id != parent_id else ""
        shown.append((f"The parent ({parent_id}{copied})", parent))
    children = reader.recent_children(parent_id) if attempts else []
    earlier = [row for row in children if row.status != "accepted"][:attempts]
    shown += [(f"An earlier attempt on this parent ({row.id})", row) for row in earlier]
    views = (feedback.view_of(who, row.status, row.metrics, _artifacts(row), metric) for who, row in shown)
    return tuple(feedback.render_feedback(view, program.config.feedback_bytes) for view in views if view is not None)


def prompt_feedback(
    reader: TraceReader | None, parent_id: str | None, program: Program, redactor: Redactor,
    state: StateFile | None = None, pending: trace.TraceRow | None = None,
) -> tuple[str, ...]:
    """Returns feedback_items with secrets masked, for a prompt (the loop's and `autoloop prompt`'s alike).

    state: the program's state file when a strategy runs, so that a copied parent leads to its source's row.
    """
    origins = copy_origins(population_of(state)) if state is not None and parent_id is not None else {}
    return tuple(redactor.text(item) for item in feedback_items(reader, parent_id, program, pending, origins))


def other_parents_feedback(
    reader: TraceReader | None, parents: Sequence[str], program: Program, redactor: Redactor, state: StateFile
) -> dict[str, tuple[str, ...]]:
    """Returns what evaluations said of each parent after the first (its own row only), by id, redacted."""
    if reader is None or len(parents) < 2 or program.config.feedback_bytes <= 0:
        return {}
    origins = copy_origins(population_of(state))
    found = {}
    for parent in parents[1:]:
        items = feedback_items(reader, parent, program, origins=origins, attempts=0)
        if items:
            found[parent] = tuple(redactor.text(item) for item in items)
    return found


def copy_origins(population: Population) -> dict[str, str]:
    """Returns {id: the id it came from} of the Population's one-parent candidates (copies among them)."""
    return {str(c.id): str(c.parents[0]) for c in population.candidates if len(c.parents) == 1}


def _own_row(reader: TraceReader, row_id: str, origins: Mapping[str, str]) -> trace.TraceRow | None:
    """Returns the row of row_id, or of the candidate it was copied from (following copies of copies)."""
    current: str | None = row_id
    seen: set[str] = set()
    while current is not None and current not in seen and len(seen) < LINEAGE_DEPTH:
        seen.add(current)
        row = reader.row(current)
        if row is not None:
            return row
        current = origins.get(current)
    return None


def stage_seconds(reader: TraceReader | None, after: int, recent: int = RECENT_ROWS) -> float | None:
    """Returns the seconds the stages after `after` took on the newest recent candidate that ran them (None:
    unknown)."""
    if reader is None:
        return None
    for row in reader.recent_rows(recent):
        metadata = row.extra.get("metadata")
        runs = metadata.get("stages") if isinstance(metadata, Mapping) else None
        if not isinstance(runs, list) or len(runs) <= after:
            continue
        later = [run.get("seconds") for run in runs[after:] if isinstance(run, Mapping)]
        if later and all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in later):
            return float(sum(later))
    return None


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
    # Under `novelty: embedding` the threshold is the similarity's; the recycled share keeps its default.
    share = program.config.novelty_threshold if program.config.novelty == "exact" else None
    config = NoveltyConfig(threshold=share or novelty.DEFAULT_THRESHOLD)
    verdict = novelty.check(source, lineage, reader.evaluated(source, lineage, language), config, language)
    if not verdict.skipped:
        return None
    if verdict.metric is not None and is_improvement(verdict.metric, best, program.direction, program.config.min_delta):
        log.info(
            "%s: repeats candidate %s, whose result would now be accepted; evaluating it", program.name, verdict.of
        )
        return None
    return verdict


def _was_evaluated(row: trace.TraceRow) -> bool:
    """Returns whether the row's metrics come from its own evaluation (not reused by the novelty filter)."""
    metadata = row.extra.get("metadata")
    verdict = metadata.get("novelty") if isinstance(metadata, dict) else None
    return not (isinstance(verdict, dict) and verdict.get("evaluated") is False)
