"""The outcome of a proposed iteration: what the read-only job hands the job that publishes, as JSON plus files.

The proposing job runs candidate code, so everything read back here is untrusted: the reader accepts
only the layout it writes (one `outcome.json`, the changed files under `files/`, nothing else, no
links), bounded sizes and well-typed fields, and `problems` checks the paths against the program's
Target as the publishing job's own checkout defines it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import AbstractSet, Any, Mapping

from autoloop_py.errors import AutoloopError
from autoloop_py.loop.record.decision_codec import DecisionCodecError, decode, encode
from autoloop_py.program import paths
from autoloop_py.state import feedback
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.machine import MachineState
from autoloop_py.state.trace import Evaluated
from autoloop_py.state.untrusted_text import plain

OUTCOME_FILE = "outcome.json"
FILES_DIR = "files"
FORMAT = 1
STATUSES = ("accepted", "rejected", "error")
MAX_FILE_BYTES = 1 << 20  # the default of program.md's `max-file-bytes`
MAX_JSON_BYTES = 8_000_000
MAX_FILES = 100
MAX_LINE = 500
MAX_TEXT = 20_000

_KEY_RE = re.compile(r"^[A-Za-z0-9_.-]+:(?P<iteration>\d{1,9}):[0-9a-f]{16}$")
_KEY_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_.-]+")
_SHA_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
# The Outcome fields outcome.json holds as they are; the others are converted (render_outcome).
_PLAIN_KEYS = ("program", "iteration", "key", "base_tree", "best_before", "prompt", "waiting", "candidate_source",
               "approach", "base_commit")
_TOP_KEYS = {*_PLAIN_KEYS, "format", "record", "changed", "deleted", "evaluated", "seed", "decision", "recheck"}
_RECORD_KEYS = {"status", "timestamp", "change", "metric", "notes", "lesson", "baseline", "tokens", "cost", "extra"}
_RECHECK_KEYS = {"base", "recorded", "best", "stale"}
_EVALUATED_KEYS = {"source", "metrics", "prompt", "replies", "parent_id", "operator", "model", "tokens", "cost",
                   "language", "metadata"}


class OutcomeError(AutoloopError):
    """An outcome directory that is not one the proposing job may hand over; nothing was published."""


@dataclass(frozen=True)
class BestRecheck:
    """The best measured again on a new default-branch commit (loop/iteration/incumbent_check.py).

    Attributes:
      base: the default branch's commit it was measured on now.
      recorded: the Best Metric it was judged against (the one recorded on the older base).
      best: the Best Metric to record (the re-based value when stale, else the recorded one).
      stale: why the best no longer holds (None: it holds).
    """

    base: str
    recorded: float
    best: float
    stale: str | None

    def applied_to(self, machine: MachineState) -> MachineState:
        """Returns the Machine State with the best re-based (or confirmed) on the new base."""
        return replace(machine, best_base=self.base, stale_reason=self.stale, best_metric=self.best)


@dataclass(frozen=True)
class Outcome:
    """One proposed and evaluated iteration, decided but not yet written anywhere.

    Attributes:
      program: the program's name.
      iteration: the iteration number the proposing job saw.
      key: the iteration's idempotency key (`<program>:<iteration>:<16 hex>`).
      base_tree: the tree of the program branch the candidate was made on (None: no iteration ran).
      best_before: the best metric the candidate was judged against.
      record: the history record (its commit unset: only the publishing job commits); None while
        the program waits for CI and no iteration ran.
      changes: the changed Target files of an accepted candidate (None: deleted); empty otherwise.
      prompt: the prompt, for the memory branch's traces.
      evaluated: the candidate's trace data.
      seed: the unchanged code's trace data, when this iteration measured the baseline.
      waiting: why no iteration ran (e.g. the CI gate waits), '' when one did.
      decision: the strategy's decision (None without a strategy), for its Population bookkeeping.
      candidate_source: the source a strategy's Population entry keeps (None: the iteration made no entry).
      approach: the proposal's one-line approach, for that entry.
      base_commit: the default-branch commit the candidate was made on (for a strategy's stale-parent check).
      recheck: the best measured again on base_commit, when the default branch had moved under it (the
        candidate was judged against its outcome; publish records it first).
    """

    program: str
    iteration: int
    key: str
    base_tree: str | None
    best_before: float | None
    record: IterationRecord | None
    changes: Mapping[str, str | None] = field(default_factory=dict)
    prompt: str = ""
    evaluated: Evaluated | None = None
    seed: Evaluated | None = None
    waiting: str = ""
    decision: Any = None
    candidate_source: str | None = None
    approach: str | None = None
    base_commit: str | None = None
    recheck: BestRecheck | None = None


def idle_outcome(program: str, why: str, iteration: int = 0) -> Outcome:
    """Returns the outcome of a proposing job in which no iteration ran (waiting for CI, nothing due)."""
    return Outcome(program, iteration, f"{_KEY_UNSAFE_RE.sub('-', program)}:{iteration}:{'0' * 16}", None, None, None,
                   waiting=why)


# ---------------------------------------------------------------- render


def render_outcome(outcome: Outcome) -> tuple[str, dict[str, bytes]]:
    """Returns (outcome.json text, {path under files/: bytes}) of an outcome."""
    written = {path: text.encode("utf-8") for path, text in outcome.changes.items() if text is not None}
    doc = {
        **{name: getattr(outcome, name) for name in _PLAIN_KEYS},
        "format": FORMAT,
        "record": _record_json(outcome.record) if outcome.record is not None else None,
        "changed": {path: hashlib.sha256(data).hexdigest() for path, data in sorted(written.items())},
        "deleted": sorted(path for path, text in outcome.changes.items() if text is None),
        "evaluated": _evaluated_json(outcome.evaluated),
        "seed": _evaluated_json(outcome.seed),
        "decision": _encoded(outcome.decision),
        "recheck": None if outcome.recheck is None else asdict(outcome.recheck),
    }
    return json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n", written


def _encoded(decision: Any) -> Any:
    """Returns the decision as JSON values; raises unless they read back as the same decision."""
    if decision is None:
        return None
    encoded = encode(decision)
    if decode(json.loads(json.dumps(encoded))) != decision:
        raise DecisionCodecError(f"a {type(decision).__name__} does not read back the same from JSON")
    return encoded


def _record_json(record: IterationRecord) -> dict[str, Any]:
    fields = {name: getattr(record, name) for name in _RECORD_KEYS}
    return {**fields, "timestamp": record.timestamp.isoformat(), "extra": [list(pair) for pair in record.extra]}


def _evaluated_json(data: Evaluated | None) -> dict[str, Any] | None:
    if data is None:
        return None
    fields = {name: getattr(data, name) for name in _EVALUATED_KEYS}
    return {**fields, "metrics": dict(data.metrics), "replies": list(data.replies), "metadata": dict(data.metadata),
            **({"artifacts": dict(data.artifacts)} if data.artifacts else {}),
            **({"runs": list(data.runs)} if data.runs else {})}


# ---------------------------------------------------------------- parse


def parse_outcome(text: str, files: Mapping[str, bytes]) -> Outcome:
    """Returns the outcome of an outcome.json text and the files found under files/; raises OutcomeError."""
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as err:
        raise OutcomeError(f"{OUTCOME_FILE}: not valid JSON ({err}); the proposing job wrote something else") from None
    _keys(doc, _TOP_KEYS, OUTCOME_FILE)
    if doc["format"] != FORMAT:
        raise OutcomeError(f"{OUTCOME_FILE}: format {doc['format']!r}, this autoloop reads format {FORMAT}")
    program, key = _str(doc, "program", 200), _str(doc, "key", 300)
    iteration = _int(doc, "iteration")
    found = _KEY_RE.match(key)
    if found is None or int(found["iteration"]) != iteration:
        raise OutcomeError(f"{OUTCOME_FILE}: key {key!r} is not `<program>:{iteration}:<16 hex digits>`")
    base_tree, base_commit = _opt_str(doc, "base_tree", 64), _opt_str(doc, "base_commit", 64)
    for name, sha in (("base_tree", base_tree), ("base_commit", base_commit)):
        if sha is not None and not _SHA_RE.match(sha):
            raise OutcomeError(f"{OUTCOME_FILE}: {name} {sha!r} is not a git object id")
    changes = _changes(doc, files)
    record = _record(doc["record"]) if doc["record"] is not None else None
    return Outcome(
        program=program, iteration=iteration, key=key, base_tree=base_tree,
        best_before=_number(doc, "best_before", OUTCOME_FILE), record=record, changes=changes,
        prompt=_str(doc, "prompt", MAX_JSON_BYTES), evaluated=_evaluated(doc["evaluated"], "evaluated"),
        seed=_evaluated(doc["seed"], "seed"), waiting=_str(doc, "waiting", MAX_LINE), decision=_decision(doc),
        candidate_source=_opt_str(doc, "candidate_source", MAX_JSON_BYTES),
        approach=_plain_or_none(_opt_str(doc, "approach", MAX_TEXT)),
        base_commit=base_commit, recheck=_recheck(doc["recheck"]),
    )


def _recheck(doc: Any) -> BestRecheck | None:
    """Returns the outcome's re-check of the best (types and ranges only; publish_guard checks it against the state)."""
    if doc is None:
        return None
    where = f"{OUTCOME_FILE}: recheck"
    _keys(doc, _RECHECK_KEYS, where)
    base, stale = _str(doc, "base", 64), _opt_str(doc, "stale", MAX_TEXT)
    recorded, best = _number(doc, "recorded", where), _number(doc, "best", where)
    if not _SHA_RE.match(base) or recorded is None or best is None:
        raise OutcomeError(f"{where}: base must be a git object id, recorded and best finite numbers")
    return BestRecheck(base, recorded, best, _plain_or_none(stale))


def _plain_or_none(text: str | None) -> str | None:
    return plain(text) if text is not None else None


def _decision(doc: Mapping[str, Any]) -> Any:
    try:
        return decode(doc["decision"])
    except (DecisionCodecError, RecursionError) as err:
        raise OutcomeError(f"{OUTCOME_FILE}: decision: {err}") from None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")


def _changes(doc: Mapping[str, Any], files: Mapping[str, bytes]) -> dict[str, str | None]:
    """Returns the changed files, each checked against the hash outcome.json lists; extra files are refused."""
    changed, deleted = doc["changed"], doc["deleted"]
    if not isinstance(changed, dict) or not isinstance(deleted, list) or not all(isinstance(p, str) for p in deleted):
        raise OutcomeError(f"{OUTCOME_FILE}: 'changed' must map paths to sha256 and 'deleted' list paths")
    if len(changed) + len(deleted) > MAX_FILES:
        raise OutcomeError(f"{OUTCOME_FILE}: {len(changed) + len(deleted)} changed files, more than {MAX_FILES}")
    unlisted = sorted(set(files) - set(changed))
    if unlisted:
        raise OutcomeError(f"{FILES_DIR}/ holds files {OUTCOME_FILE} does not list: {', '.join(unlisted[:5])}")
    result: dict[str, str | None] = {}
    for path, digest in changed.items():
        data = files.get(path)
        if data is None or hashlib.sha256(data).hexdigest() != digest:
            raise OutcomeError(f"{FILES_DIR}/{path}: missing or not the file {OUTCOME_FILE} lists")
        try:
            result[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            raise OutcomeError(f"{FILES_DIR}/{path}: not UTF-8 text") from None
    for path in deleted:
        if path in result:
            raise OutcomeError(f"{OUTCOME_FILE}: {path!r} is both changed and deleted")
        result[path] = None
    return result


def _record(doc: Any) -> IterationRecord:
    where = f"{OUTCOME_FILE}: record"
    _keys(doc, _RECORD_KEYS, where)
    status = _str(doc, "status", 20)
    if status not in STATUSES:
        raise OutcomeError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}")
    try:
        timestamp = datetime.fromisoformat(_str(doc, "timestamp", 64))
    except ValueError:
        raise OutcomeError(f"{where}: timestamp {doc['timestamp']!r} is not an ISO time") from None
    if timestamp.tzinfo is None:
        raise OutcomeError(f"{where}: timestamp {doc['timestamp']!r} has no time zone")
    # Written by the proposing job, which ran candidate code: stripped as the proposer's texts are (record_of).
    change = plain(_str(doc, "change", MAX_LINE))
    if not change.strip() or "\n" in change or "\r" in change:
        raise OutcomeError(f"{where}: change must be one non-empty line")
    metric = _number(doc, "metric", where)
    if (status == "accepted" and metric is None) or (status == "error" and metric is not None):
        raise OutcomeError(f"{where}: an {status} record {'has' if metric is not None else 'needs'} a metric")
    extra = doc["extra"]
    if not isinstance(extra, list) or len(extra) > 20 or not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(s, str) and len(s) <= MAX_LINE for s in pair)
        for pair in extra
    ):
        raise OutcomeError(f"{where}: extra must be at most 20 [label, value] pairs of short strings")
    tokens = None if doc["tokens"] is None else _int(doc, "tokens", where)
    return IterationRecord(
        status=status, timestamp=timestamp, change=change, metric=metric, notes=plain(_str(doc, "notes", MAX_TEXT)),
        lesson=_plain_or_none(_opt_str(doc, "lesson", MAX_LINE * 4)), baseline=_number(doc, "baseline", where),
        tokens=tokens, cost=_number(doc, "cost", where), extra=tuple((plain(a), plain(b)) for a, b in extra),
    )


def _evaluated(doc: Any, name: str) -> Evaluated | None:
    if doc is None:
        return None
    where = f"{OUTCOME_FILE}: {name}"
    _keys(doc, _EVALUATED_KEYS, where, optional={"artifacts", "runs"})
    replies = doc["replies"]
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        raise OutcomeError(f"{where}: replies must be a list of strings")
    for mapping in ("metrics", "metadata"):
        if not isinstance(doc[mapping], dict):
            raise OutcomeError(f"{where}: {mapping} must be a JSON object")
    tokens = None if doc["tokens"] is None else _int(doc, "tokens", where)
    return Evaluated(
        source=_str(doc, "source", MAX_JSON_BYTES), metrics=doc["metrics"], prompt=_str(doc, "prompt", MAX_JSON_BYTES),
        replies=tuple(replies), parent_id=_opt_str(doc, "parent_id", 100), operator=_opt_str(doc, "operator", 100),
        model=_opt_str(doc, "model", 200), tokens=tokens, cost=_number(doc, "cost", where),
        language=_str(doc, "language", 40), metadata=doc["metadata"], artifacts=_artifacts(doc.get("artifacts"), where),
        runs=_runs(doc.get("runs", []), where),
    )


def _runs(doc: Any, where: str) -> tuple[float, ...]:
    """Returns each repeat's primary metric (the trace row shows them beside the median); display only."""
    if not isinstance(doc, list) or len(doc) > MAX_FILES or not all(_finite(value) for value in doc):
        raise OutcomeError(f"{where}: runs must be a list of at most {MAX_FILES} finite numbers")
    return tuple(float(value) for value in doc)


def _finite(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _artifacts(doc: Any, where: str) -> dict[str, str]:
    """Returns an evaluation's artifacts: known fields of bounded text only (state/feedback.py)."""
    if doc is None:
        return {}
    if not isinstance(doc, dict) or not set(doc) <= set(feedback.FIELDS):
        raise OutcomeError(f"{where}: artifacts must be an object of {', '.join(feedback.FIELDS)}")
    if not all(isinstance(text, str) and len(text) <= feedback.STORED_CHARS for text in doc.values()):
        raise OutcomeError(f"{where}: each artifact must be a string of at most {feedback.STORED_CHARS} characters")
    return dict(doc)


def _keys(doc: Any, expected: set[str], where: str, optional: AbstractSet[str] = frozenset()) -> None:
    """Raises unless doc is an object with exactly the expected keys and any optional ones (an unknown may be a
    forgery)."""
    if not isinstance(doc, dict):
        raise OutcomeError(f"{where}: expected a JSON object")
    missing, unknown = sorted(expected - set(doc)), sorted(set(doc) - expected - optional)
    if missing or unknown:
        raise OutcomeError(f"{where}: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}")


def _str(doc: Mapping[str, Any], name: str, limit: int) -> str:
    value = doc[name]
    if not isinstance(value, str) or len(value) > limit:
        raise OutcomeError(f"{OUTCOME_FILE}: {name} must be a string of at most {limit} characters")
    return value


def _opt_str(doc: Mapping[str, Any], name: str, limit: int) -> str | None:
    return None if doc[name] is None else _str(doc, name, limit)


def _int(doc: Mapping[str, Any], name: str, where: str = OUTCOME_FILE) -> int:
    value = doc[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise OutcomeError(f"{where}: {name} must be a non-negative integer")
    return value


def _number(doc: Mapping[str, Any], name: str, where: str) -> float | None:
    value = doc[name]
    if value is None:
        return None
    if not _finite(value):
        raise OutcomeError(f"{where}: {name} must be a finite number or null")
    return float(value)


# ---------------------------------------------------------------- validate


def problems(outcome: Outcome, program_name: str, allows: Any, max_file_bytes: int = MAX_FILE_BYTES) -> list[str]:
    """Returns why the publishing job must refuse the outcome for this program ([] when it may publish it).

    `allows(path) -> bool` is the Target allowlist of the program as the publishing job reads it.
    """
    found = []
    if outcome.program != program_name:
        found.append(f"the outcome is for program {outcome.program!r}, not {program_name!r}")
    record = outcome.record
    if record is None and outcome.changes:
        found.append("an outcome without an iteration carries files")
    if record is not None and record.status != "accepted" and outcome.changes:
        found.append(f"a {record.status} outcome carries files; only an accepted candidate has changes")
    if record is not None and record.status == "accepted" and not outcome.changes:
        found.append("an accepted outcome changes no file")
    if record is not None and outcome.base_tree is None:
        found.append("the outcome names no base tree")
    found += paths.path_problems(outcome.changes)  # the rule every proposer's paths pass: git stores each as a file
    for path, text in sorted(outcome.changes.items()):
        pure = PurePosixPath(path)
        relative = path and not pure.is_absolute() and ".." not in pure.parts and pure.parts[:1] != (".git",)
        if not relative or path != pure.as_posix():
            found.append(f"{path!r} is not a plain relative path")
        elif not allows(path):
            found.append(f"{path} is outside the program's Target")
        if text is not None and len(text.encode("utf-8")) > max_file_bytes:
            found.append(f"{path} is {len(text.encode('utf-8'))} bytes, over the {max_file_bytes}-byte cap")
    return found


# ---------------------------------------------------------------- the directory (effects)


def write_outcome(directory: Path, outcome: Outcome) -> None:
    """Writes the outcome into an empty (or new) directory."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise AutoloopError(f"{directory}: the outcome directory is not empty; give a new or empty one")
    text, files = render_outcome(outcome)
    for path, data in files.items():
        target = directory / FILES_DIR / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (directory / OUTCOME_FILE).write_text(text, encoding="utf-8")


def read_outcome(directory: Path) -> Outcome:
    """Returns the outcome in a directory; refuses links, special files, unknown files and oversized ones."""
    if not directory.is_dir() or directory.is_symlink():
        raise OutcomeError(f"{directory}: no outcome directory here")
    names = sorted(entry.name for entry in directory.iterdir())
    unknown = [name for name in names if name not in (OUTCOME_FILE, FILES_DIR)]
    if unknown or OUTCOME_FILE not in names:
        raise OutcomeError(f"{directory}: expected {OUTCOME_FILE} and {FILES_DIR}/ only, found {', '.join(names)}")
    try:
        text = _read_regular(directory / OUTCOME_FILE, MAX_JSON_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise OutcomeError(f"{directory / OUTCOME_FILE}: not UTF-8 text") from None
    files: dict[str, bytes] = {}
    if FILES_DIR in names:
        _collect(directory / FILES_DIR, "", files)
    return parse_outcome(text, files)


def _collect(folder: Path, prefix: str, files: dict[str, bytes]) -> None:
    mode = os.lstat(folder).st_mode
    if not stat.S_ISDIR(mode):
        raise OutcomeError(f"{folder}: not a plain directory (a link or a special file)")
    for entry in sorted(folder.iterdir()):
        rel = f"{prefix}{entry.name}"
        if stat.S_ISDIR(os.lstat(entry).st_mode):
            _collect(entry, rel + "/", files)
        else:
            files[rel] = _read_regular(entry, MAX_FILE_BYTES * 4)
        if len(files) > MAX_FILES:
            raise OutcomeError(f"{folder}: more than {MAX_FILES} files")


def _read_regular(path: Path, limit: int) -> bytes:
    """Returns a regular file's bytes (never through a link); raises OutcomeError past `limit` bytes."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise OutcomeError(f"{path}: cannot read ({err.strerror}); a link or a special file is refused") from None
    with os.fdopen(handle, "rb") as reader:
        if not stat.S_ISREG(os.fstat(reader.fileno()).st_mode):
            raise OutcomeError(f"{path}: not a regular file")
        data = reader.read(limit + 1)
    if len(data) > limit:
        raise OutcomeError(f"{path}: over the {limit}-byte cap")
    return data
