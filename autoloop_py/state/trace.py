"""Trace: EvoTrace-compatible run records (program rows, source and prompt blobs, replay environment).

On the memory branch every candidate is its own file, so concurrent runners never rewrite a shared
file: `traces/<program>/rows/<iteration:06d>-<id>.json`, `traces/<program>/blobs/<sha[:2]>/<sha>.txt|.json`
and `traces/<program>/replay_env.json`. `export` turns those files into the EvoTrace run layout
(`meta.json`, `programs.jsonl`, `blobs/`), and `load_trace` reads any run directory in that layout,
including those written by other frameworks.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import sys
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from autoloop_py.errors import AutoloopError
from autoloop_py.program.model import Program

logger = logging.getLogger(__name__)

TRACES_DIR = "traces"
SOURCES_DIR = "sources"
CHILDREN_DIR = "children"
SCHEMA_VERSION = 1
BACKEND = "autoloop"
STATUSES = ("accepted", "rejected", "failed")
SCORE_KEYS = ("combined_score", "overall_score", "score")
# The row id of the unchanged code, measured as the baseline on a program's first iteration.
SEED_ID = "seed"
# Other frameworks write -2**63 as "no score" (seen in EvoTrace ahc025/ahc027).
SENTINEL_SCORE = -(2**63)
HARD_FAILURES = frozenset(
    {"COMPILE_ERROR", "RUNTIME_ERROR", "TIME_LIMIT_EXCEEDED", "MEMORY_LIMIT_EXCEEDED", "INTERNAL_ERROR"}
)
_KNOWN_METADATA = frozenset({"changes", "parent_metrics", "model_name"})
# An autoloop row's `metadata` key listing the iteration's other model calls (a strategy's guide and meta
# calls): [{"model": name, "tokens": n, "cost": dollars or null}, ...]; the row's own tokens/cost are the proposer's.
GUIDE_SPEND = "guide_spend"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class TraceRow:
    """One candidate of a run: a row of EvoTrace's `programs.jsonl` plus autoloop's extensions.

    Attributes:
        id: the candidate's id, unique within the run (`it<iteration>` or a strategy's candidate id).
        iteration_found: the iteration that produced it (the ordering key; seeds are 0).
        parent_id: the id of the program it was derived from (the lineage edge), None for a seed.
        metrics: the evaluation's metrics (may be empty, or hold `error`, NaN or sentinel scores).
        status: accepted, rejected or failed.
        language: the source language (python, cpp, ...).
        other_context_ids: ids of other programs shown to the model (context edges).
        generation: the depth the framework assigned (0 when unknown).
        source: where the row came from; "autoloop" for our runs, the other framework's tag otherwise.
        solution_sha256: sha256 of the full source blob, None when no source was saved.
        prompts_sha256: sha256 of the prompts payload blob, None when no prompt was saved.
        changes: a one-line description of the change (`metadata.changes`).
        parent_metrics: the parent's metrics (`metadata.parent_metrics`).
        model_name: the model that proposed it (`metadata.model_name`).
        operator: how it was made (mutation, recombination, refinement, repair, seed, ...).
        model: the model as autoloop named it (may add the provider to `model_name`).
        timestamp: when it was evaluated, ISO 8601; None in other frameworks' traces.
        tokens: model tokens spent on it, when known.
        cost: model cost in dollars, when known.
        extra: fields this version does not know, kept so that rows round-trip unchanged.
    """

    id: str
    iteration_found: int
    parent_id: str | None
    metrics: Mapping[str, Any]
    status: str
    language: str = "python"
    other_context_ids: tuple[str, ...] = ()
    generation: int = 0
    source: str = BACKEND
    solution_sha256: str | None = None
    prompts_sha256: str | None = None
    changes: str = ""
    parent_metrics: Mapping[str, Any] | None = None
    model_name: str | None = None
    operator: str | None = None
    model: str | None = None
    timestamp: str | None = None
    tokens: int | None = None
    cost: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


# A row's top-level JSON keys: TraceRow's fields, less those kept under `metadata` and the unknown ones.
_KNOWN_FIELDS = frozenset({f.name for f in fields(TraceRow)} - _KNOWN_METADATA - {"extra"} | {"metadata"})


@dataclass(frozen=True)
class Trace:
    """A run read from an EvoTrace directory.

    Attributes:
        directory: the run directory.
        meta: the parsed `meta.json` ({} when absent).
        rows: the programs by iteration_found, ties in file order; the first row of a duplicated id wins.
    """

    directory: Path
    meta: Mapping[str, Any]
    rows: tuple[TraceRow, ...]
    _blobs: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def metric(self) -> str | None:
        """Returns the primary metric's name when meta.json names it (autoloop traces do)."""
        metric = self.meta.get("metric")
        return metric if isinstance(metric, str) and metric else None

    @property
    def direction(self) -> str:
        """Returns 'higher' or 'lower' (meta.json's `direction`; higher when absent, as in EvoTrace)."""
        return "lower" if self.meta.get("direction") == "lower" else "higher"

    def source(self, row: TraceRow) -> str | None:
        """Returns the full source of a row (None when its blob is missing)."""
        return self._blob(row.solution_sha256, ".txt")

    def prompts(self, row: TraceRow) -> Mapping[str, Any] | None:
        """Returns the prompts payload of a row (None when it has none or it is unreadable)."""
        text = self._blob(row.prompts_sha256, ".json")
        if text is None:
            return None
        try:
            payload = json.loads(text)
        except json.JSONDecodeError:
            logger.warning("prompts blob %s is not JSON; ignored", row.prompts_sha256)
            return None
        return payload if isinstance(payload, dict) else None

    def score(self, row: TraceRow) -> float | None:
        """Returns the row's primary score, or None when the row is not a valid, scored program."""
        return valid_score(row, self.metric)

    def _blob(self, sha: str | None, suffix: str) -> str | None:
        if not sha:
            return None
        key = sha + suffix
        if key not in self._blobs:
            path = self.directory / "blobs" / sha[:2] / key
            # Bytes, not read_text: universal newlines would change the source the sha names.
            self._blobs[key] = path.read_bytes().decode("utf-8", errors="replace") if path.is_file() else None
        return self._blobs[key]


def trace_dir(program: str) -> str:
    """Returns the memory-branch folder holding a program's trace."""
    return f"{TRACES_DIR}/{program}"


def sha256_text(text: str) -> str:
    """Returns the sha256 hex digest of text encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def blob_path(sha: str, suffix: str) -> str:
    """Returns a blob's path relative to the trace folder: `blobs/<sha[:2]>/<sha><suffix>`."""
    return f"blobs/{sha[:2]}/{sha}{suffix}"


def row_file_name(row: TraceRow) -> str:
    """Returns the row's file name: `<iteration:06d>-<id>.json`, the id made safe for a path."""
    return f"{row.iteration_found:06d}-{safe_id(row.id)}.json"


def safe_id(row_id: str) -> str:
    """Returns a row id as its file name has it (characters unsafe in a path replaced)."""
    return _UNSAFE_NAME.sub("_", row_id)


def row_files(program: str, row: TraceRow, source: str, prompts: Mapping[str, Any]) -> dict[str, str]:
    """Returns the memory-branch files recording one candidate: its row and its blobs, shas filled in."""
    base = trace_dir(program)
    solution_sha = sha256_text(source)
    files = {f"{base}/{blob_path(solution_sha, '.txt')}": source}
    prompts_sha = None
    if prompts:
        payload = json.dumps(prompts, sort_keys=True, ensure_ascii=False)  # serialized as EvoTrace does
        prompts_sha = sha256_text(payload)
        files[f"{base}/{blob_path(prompts_sha, '.json')}"] = payload
    row = replace(row, solution_sha256=solution_sha, prompts_sha256=prompts_sha)
    files[f"{base}/rows/{row_file_name(row)}"] = json.dumps(row_to_json(row), sort_keys=True, ensure_ascii=False) + "\n"
    files[f"{base}/{source_index_dir(solution_sha)}/{row_file_name(row)}"] = ""
    if row.parent_id is not None:
        # An empty JSON object, not an empty file: gh-aw's repo-memory may parse every .json file it saves.
        files[f"{base}/{children_index_dir(row.parent_id)}/{row_file_name(row)}"] = "{}\n"
    return files


def source_index_dir(sha: str) -> str:
    """Returns the folder (relative to the trace folder) whose empty files name the rows that recorded source `sha`.

    The novelty filter finds an exact earlier result through it without reading every row; `export`
    leaves it out.
    """
    return f"{SOURCES_DIR}/{sha[:2]}/{sha}"


def children_index_dir(parent_id: str) -> str:
    """Returns the folder (relative to the trace folder) whose files (`{}`) name the rows derived from parent_id.

    A prompt finds what evaluations said of a parent's attempts through it, however old they are, without
    reading every row; `export` leaves it out.
    """
    return f"{CHILDREN_DIR}/{safe_id(parent_id)}"


def row_to_json(row: TraceRow) -> dict[str, Any]:
    """Returns the row as an EvoTrace `programs.jsonl` object (unknown fields kept)."""
    extra = dict(row.extra)
    metadata = {**dict(extra.pop("metadata", None) or {}), "changes": row.changes,
                "parent_metrics": _plain(row.parent_metrics), "model_name": row.model_name}
    known = {f.name: getattr(row, f.name) for f in fields(TraceRow) if f.name in _KNOWN_FIELDS}
    return {**extra, **known, "metrics": _plain(row.metrics), "other_context_ids": list(row.other_context_ids),
            "metadata": metadata}


def row_from_json(data: Mapping[str, Any]) -> TraceRow:
    """Returns a row from a `programs.jsonl` object, tolerating missing optional fields and nulls."""
    raw_metadata = data.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    extra = {k: v for k, v in data.items() if k not in _KNOWN_FIELDS}
    unknown_metadata = {k: v for k, v in metadata.items() if k not in _KNOWN_METADATA}
    if unknown_metadata:
        extra["metadata"] = unknown_metadata
    return TraceRow(
        id=str(data["id"]),
        iteration_found=_int(data.get("iteration_found"), _int(data.get("iteration"), 0)),
        parent_id=None if data.get("parent_id") in (None, "") else str(data["parent_id"]),
        metrics=data["metrics"] if isinstance(data.get("metrics"), dict) else {},
        status=str(data.get("status") or "accepted"),
        language=str(data.get("language") or "python"),
        other_context_ids=tuple(str(i) for i in data.get("other_context_ids") or () if i is not None),
        generation=_int(data.get("generation"), 0),
        source=str(data.get("source") or ""),
        solution_sha256=data.get("solution_sha256") or None,
        prompts_sha256=data.get("prompts_sha256") or None,
        changes=str(metadata.get("changes") or ""),
        parent_metrics=metadata.get("parent_metrics") if isinstance(metadata.get("parent_metrics"), dict) else None,
        model_name=metadata.get("model_name"),
        operator=data.get("operator"),
        model=data.get("model"),
        timestamp=None if data.get("timestamp") is None else str(data["timestamp"]),
        tokens=_int(data.get("tokens"), None),
        cost=_float(data.get("cost")),
        extra=extra,
    )


def replay_env_file(program: Program) -> tuple[str, str]:
    """Returns (memory path, JSON text) of the program's replay environment."""
    evaluation = program.evaluation
    config = program.config
    evaluated = (evaluation.command, evaluation.metric) if evaluation else (None, None)
    return _replay_env(program.name, *evaluated, program.direction, config.evaluation_timeout, config.repeats,
                       program.base_dir.as_posix())


@lru_cache(maxsize=8)  # every record writes it: made once per program (the machine does not change in a run)
def _replay_env(name: str, command: str | None, metric: str | None, direction: str, timeout: float, repeats: int,
                program_dir: str) -> tuple[str, str]:
    import platform  # here, as importlib.metadata below: a run reaches its first model request before any record

    env = {
        "program": name,
        # The command runs at the repository root; AUTOLOOP_PROGRAM_DIR names this folder.
        "evaluation": {"command": command, "metric": metric, "direction": direction, "timeout_seconds": timeout,
                       "repeats": repeats, "working_directory": ".", "program_dir": program_dir},
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "platform": {"system": platform.system(), "release": platform.release(), "machine": platform.machine(),
                     "platform": platform.platform(), "cpu_count": os.cpu_count()},
        "dependencies": installed_distributions(),
    }
    return f"{trace_dir(name)}/replay_env.json", json.dumps(env, indent=2, sort_keys=True) + "\n"


@lru_cache(maxsize=1)
def installed_distributions() -> dict[str, str]:
    """Returns {distribution name: version} of every installed distribution, sorted by name."""
    import importlib.metadata

    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        # The headers alone, read as lines: `dist.metadata` parses the whole file (0.1 s for all of them).
        headers = (dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "").split("\n\n", 1)[0]
        fields = dict(reversed([line.split(":", 1) for line in headers.splitlines() if ":" in line]))
        if fields.get("Name", "").strip():
            found.setdefault(fields["Name"].strip(), fields.get("Version", "").strip())
    return dict(sorted(found.items(), key=lambda item: item[0].lower()))


def export(read: Callable[[str], str | None], paths: Sequence[str], program: str, out: Path) -> Path:
    """Writes the trace files `paths` (read through `read`) as an EvoTrace run directory at `out`."""
    base = trace_dir(program) + "/"
    rows, duplicates = _collect_rows(read, [p for p in paths if p.startswith(base + "rows/")])
    out.mkdir(parents=True, exist_ok=True)
    blob_counts = _copy_blobs(read, [p for p in paths if p.startswith(base + "blobs/")], base, out)
    env_text = read(base + "replay_env.json")
    if env_text is not None:
        (out / "replay_env.json").write_text(env_text, encoding="utf-8", newline="")
    lines = [json.dumps(row_to_json(row), sort_keys=True, ensure_ascii=False) for row in rows]
    (out / "programs.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    meta = _meta(program, rows, duplicates, blob_counts, _evaluation(env_text))
    (out / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    logger.info("exported %d rows of %s to %s", len(rows), program, out)
    return out


def memory_trace(read: Callable[[str], str | None], paths: Sequence[str], program: str, metric: str | None,
                 direction: str) -> Trace:
    """Returns a program's trace rows read from the memory branch (no blobs: sources read as None)."""
    rows, _ = _collect_rows(read, [p for p in paths if p.startswith(trace_dir(program) + "/rows/")])
    meta = {"program": program, "metric": metric, "direction": direction}
    return Trace(directory=Path(trace_dir(program)), meta=meta, rows=tuple(sorted(rows, key=order_key)))


def load_trace(directory: Path) -> Trace:
    """Reads an EvoTrace run directory (ours or another framework's) into a Trace."""
    directory = Path(directory)
    programs = directory / "programs.jsonl"
    if not programs.is_file():
        raise AutoloopError(
            "not an EvoTrace run directory (no programs.jsonl); pass a directory written by "
            "`autoloop trace export` or another EvoTrace writer",
            path=directory,
        )
    meta = _read_meta(directory / "meta.json")
    rows: dict[str, TraceRow] = {}
    for number, line in enumerate(programs.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise AutoloopError(f"not a JSON object ({err.msg}); fix or delete the line", path=programs,
                                line=number) from None
        if not isinstance(data, dict) or data.get("id") in (None, ""):
            logger.warning("%s:%d: row without an id; skipped", programs, number)
            continue
        row = row_from_json(data)
        rows.setdefault(row.id, row)
    # Stable: rows of one iteration keep their programs.jsonl order, as EvoReplay reads them.
    return Trace(directory=directory, meta=meta, rows=tuple(sorted(rows.values(), key=lambda r: r.iteration_found)))


def order_key(row: TraceRow) -> tuple[int, str]:
    """Returns the sort key of a row: iteration_found, then id."""
    return (row.iteration_found, row.id)


def primary_score(metrics: Mapping[str, Any], metric: str | None = None) -> float | None:
    """Returns the primary score: `metric` (when given), combined_score, overall_score or score; None if unusable."""
    for key in ((metric,) if metric else ()) + SCORE_KEYS:
        if key in metrics:
            return _usable(metrics[key])
    return None


def valid_score(row: TraceRow, metric: str | None = None) -> float | None:
    """Returns the row's primary score if the row is a valid program, else None."""
    metrics = row.metrics
    if row.status == "failed" or not metrics or metrics.get("error"):
        return None
    # A judge_result (a string or a dict of strings) reporting a hard failure.
    judge = metrics.get("judge_result")
    verdicts = judge.values() if isinstance(judge, dict) else [judge]
    if any(isinstance(v, str) and v.strip().upper() in HARD_FAILURES for v in verdicts):
        return None
    return primary_score(metrics, metric)


def _usable(value: Any) -> float | None:
    """Returns value as a finite, non-sentinel float, else None."""
    if isinstance(value, bool):
        return None
    number = _float(value)
    if number is None or not math.isfinite(number) or number == SENTINEL_SCORE:
        return None
    return number


def _read_meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise AutoloopError(f"not valid JSON ({err.msg}); fix or delete it", path=path, line=err.lineno) from None
    return meta if isinstance(meta, dict) else {}


def _collect_rows(read: Callable[[str], str | None], paths: Sequence[str]) -> tuple[list[TraceRow], dict[str, int]]:
    """Returns the rows in `paths` (first of a duplicated id wins) and the duplicates skipped per status."""
    rows: dict[str, TraceRow] = {}
    duplicates = {status: 0 for status in STATUSES}
    for path in sorted(paths):
        text = read(path)
        if text is None or not text.strip():
            continue
        try:
            row = row_from_json(json.loads(text))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise AutoloopError(f"unreadable trace row ({err}); delete the file and rerun", path=path) from None
        if row.id in rows:
            duplicates[row.status] = duplicates.get(row.status, 0) + 1
            continue
        rows[row.id] = row
    return sorted(rows.values(), key=order_key), duplicates


def _copy_blobs(read: Callable[[str], str | None], paths: Sequence[str], base: str, out: Path) -> dict[str, int]:
    """Writes each blob under `out` with its exact text; returns how many were written per suffix."""
    counts = {".txt": 0, ".json": 0}
    for path in paths:
        text = read(path)
        if text is None:
            continue
        target = out / path[len(base):]
        target.parent.mkdir(parents=True, exist_ok=True)
        # newline="" keeps the bytes the sha names (no \n → os.linesep translation).
        target.write_text(text, encoding="utf-8", newline="")
        counts[target.suffix] = counts.get(target.suffix, 0) + 1
    return counts


def _evaluation(env_text: str | None) -> dict[str, Any]:
    """Returns the `evaluation` object of a replay_env.json text ({} when absent or unreadable)."""
    try:
        env = json.loads(env_text) if env_text else {}
    except json.JSONDecodeError:
        return {}
    evaluation = env.get("evaluation") if isinstance(env, dict) else None
    return evaluation if isinstance(evaluation, dict) else {}


def _meta(
    program: str, rows: Sequence[TraceRow], duplicates: Mapping[str, int], blobs: Mapping[str, int],
    evaluation: Mapping[str, Any],
) -> dict[str, Any]:
    """Returns meta.json for an exported autoloop run."""
    counts: dict[str, int] = {"checkpoints": 0}
    for status in STATUSES:
        counts[f"{status}_unique"] = sum(1 for row in rows if row.status == status)
        counts[f"{status}_dup_skipped"] = duplicates.get(status, 0)
    counts["blobs_solution"] = blobs.get(".txt", 0)
    counts["blobs_prompts"] = blobs.get(".json", 0)
    meta: dict[str, Any] = {"backend": BACKEND, "source": f"{TRACES_DIR}/{program}", "refined_at": None,
                            "program": program, "counts": counts, "schema_version": SCHEMA_VERSION}
    if evaluation.get("metric"):
        meta["metric"] = evaluation["metric"]
    if evaluation.get("direction") in ("higher", "lower"):
        meta["direction"] = evaluation["direction"]
    return meta


def _plain(value: Any) -> Any:
    """Returns mappings as plain dicts so that json can write them."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _int(value: Any, default: int | None) -> Any:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else default
    except (TypeError, ValueError):
        return default


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Evaluated:
    """What the runner knows of one evaluated candidate, for its trace row.

    Attributes:
      source: the evaluated source of the program's primary Target file.
      metrics: the JSON object the evaluation printed (or {metric: value}).
      prompt: the prompt that produced it ('' for the seed).
      replies: the model's or agent's replies, in order.
      parent_id: the row id of the program it was derived from.
      operator: the strategy's operator, when a strategy chose one.
      model: the model that proposed it.
      tokens: prompt + completion tokens.
      cost: dollars, when known.
      language: the source's language (python, cpp, ...).
      metadata: extra `metadata` fields of its row (the novelty filter's verdict on a candidate it did not evaluate).
      runs: the primary metric of each evaluation run with `repeats` > 1 (metrics hold their median).
      artifacts: what the evaluation said beside its metrics (EvoTrace's `artifacts`): `feedback`, `error`
        (a rejection's or failure's reason), `stdout_tail`, `stderr_tail`; redacted and bounded (state/feedback.py).
    """

    source: str
    metrics: Mapping[str, Any]
    prompt: str = ""
    replies: tuple[str, ...] = ()
    parent_id: str | None = None
    operator: str | None = None
    model: str | None = None
    tokens: int | None = None
    cost: float | None = None
    language: str = "python"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    runs: tuple[float, ...] = ()
    artifacts: Mapping[str, str] = field(default_factory=dict)


_ROW_STATUS = {"accepted": "accepted", "pending-ci": "accepted", "rejected": "rejected"}


def tip_path(program: str) -> str:
    """Returns the memory-branch file naming the row id at the tip of the program branch.

    `.txt`: gh-aw's repo-memory refuses to save a folder holding a file without an allowed extension.
    """
    return f"{trace_dir(program)}/tip.txt"


def read_tip(read: Callable[[str], str | None], program: str) -> str | None:
    """Returns the row id at the tip of the program branch (None when none is recorded; the old `tip` file too)."""
    text = read(tip_path(program))
    if text is None:
        text = read(f"{trace_dir(program)}/tip")
    return (text or "").strip() or None


def iteration_files(
    program: Program, evaluated: Evaluated, row_id: str, iteration: int, status: str, timestamp: str, changes: str
) -> dict[str, str]:
    """Returns the memory-branch files recording one evaluated candidate (row, blobs, replay env, tip)."""
    # The row's autoloop-only fields: the novelty verdict, and each run's metric behind a median.
    runs = list(evaluated.runs) if len(evaluated.runs) > 1 else []
    extra = {"metadata": dict(evaluated.metadata), "runs": runs, "artifacts": dict(evaluated.artifacts)}
    row = TraceRow(
        id=row_id,
        iteration_found=iteration,
        parent_id=evaluated.parent_id,
        metrics=dict(evaluated.metrics),
        status=_ROW_STATUS.get(status, "failed"),
        language=evaluated.language,
        changes=changes,
        model_name=evaluated.model,
        operator=evaluated.operator,
        model=evaluated.model,
        timestamp=timestamp,
        tokens=evaluated.tokens,
        cost=evaluated.cost,
        extra={key: value for key, value in extra.items() if value},
    )
    prompts = {"iteration": {"system": "", "user": evaluated.prompt, "responses": list(evaluated.replies)}}
    files = row_files(program.name, row, evaluated.source, prompts if evaluated.prompt else {})
    path, text = replay_env_file(program)
    files[path] = text
    if row.status == "accepted":
        files[tip_path(program.name)] = row_id + "\n"
    return files
