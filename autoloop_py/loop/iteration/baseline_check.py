"""`check`'s evaluation: each program's unchanged code evaluated once, as the baseline is, and cached by tree.

The evaluation runs as an iteration's baseline runs it (a fresh copy, the program's sandbox and timeout), on the
working tree as git sees it (tracked files and untracked ones not ignored), exported outside the work tree. A
pass is remembered under the repository's git directory, keyed by the program, the tree and the command, so an
unchanged tree is not evaluated again; a failure is never remembered (the fix may lie outside the tree).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import git

from autoloop_py import tempdirs
from autoloop_py.errors import AutoloopError
from autoloop_py.git.work_tree import WorkTree, export
from autoloop_py.loop.evaluation.evaluate import EvaluationResult
from autoloop_py.loop.evaluation.fresh_copies import evaluate_copy
from autoloop_py.program.model import Program
from autoloop_py.program.objectives import metric_value

log = logging.getLogger(__name__)

CACHE_DIR = Path("autoloop") / "check"
TAIL_LINES = 10


@dataclass(frozen=True)
class BaselineCheck:
    """What `check` learnt of a program's unchanged code.

    Attributes:
      problems: `file:line: message` for each thing a run would fail on (empty: it reports what it must).
      values: the metric and each objective it reported (empty on failure).
      cached: the pass was remembered from an earlier check of the same tree.
    """

    problems: tuple[str, ...] = ()
    values: Mapping[str, float] = field(default_factory=dict)
    cached: bool = False


def check_baseline(
    program: Program, repo: git.Repo, tree: WorkTree, cache: Path, starting: Callable[[], object] = lambda: None
) -> BaselineCheck:
    """Evaluates the program's unchanged code in tree (or remembers it did); returns what a run would fail on.

    cache: the folder of remembered passes (`cache_dir`); starting: called just before an evaluation starts.
    """
    assert program.evaluation is not None
    key = cache / f"{_key(program, tree)}.json"
    remembered = _remembered(key)
    if remembered is not None:
        return BaselineCheck(values=remembered, cached=True)
    starting()
    try:
        with tempdirs.temporary("autoloop-check-") as holder:
            export(repo, tree, holder / "repo")
            result = evaluate_copy(program, holder / "repo", repeats=1)
    except AutoloopError as error:
        return BaselineCheck((f"{program.path}:{program.evaluation.line}: the baseline could not be evaluated: "
                              f"{error}",))
    found = baseline_problems(program, result)
    if found.problems:
        return found
    _remember(key, program, tree, found.values)
    return found


def baseline_problems(program: Program, result: EvaluationResult) -> BaselineCheck:
    """Returns the problems of the unchanged code's evaluation: no report, no metric, an objective missing."""
    assert program.evaluation is not None
    where = f"{program.path}:{program.evaluation.line}"
    if not result.ok or result.metric is None:
        why = f"stopped at {result.stopped}" if result.stopped else (result.error or "no metric")
        return BaselineCheck((f"{where}: the baseline evaluation fails, so every run would stop on it: {why}"
                              f"{printed(result)}",))
    values = {program.evaluation.metric: result.metric}
    missing = []
    for objective in program.config.objectives:
        value = metric_value(result.metrics, objective.name)
        if value is None:
            missing.append(objective.name)
        else:
            values[objective.name] = value
    if missing:
        keys = ", ".join(sorted(result.metrics)) or "none"
        names = ", ".join(f"`{name}`" for name in missing)
        plural = "s" if len(missing) > 1 else ""
        return BaselineCheck((f"{where}: the baseline's report has no number for the objective{plural} {names} "
                              f"(keys: {keys}); print each objective in the JSON object{printed(result)}",))
    return BaselineCheck(values=values)


def printed(result: EvaluationResult) -> str:
    """Returns the end of what the evaluation printed, as indented lines under `stdout:` and `stderr:`."""
    parts = []
    for name, text in (("stdout", result.stdout_tail), ("stderr", result.stderr_tail)):
        lines = [line.rstrip() for line in text.splitlines() if line.strip()][-TAIL_LINES:]
        if lines:
            parts.append(f"\n  its {name} ended:\n" + "\n".join(f"    {line}" for line in lines))
    return "".join(parts) or "\n  it printed nothing"


def cache_dir(common: Path) -> Path:
    """Returns the folder of remembered passes under the repository's (common) git directory."""
    return common / CACHE_DIR


def _key(program: Program, tree: WorkTree) -> str:
    assert program.evaluation is not None
    text = json.dumps([program.name, str(program.path), tree.sha, program.evaluation.command])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _remembered(key: Path) -> dict[str, float] | None:
    """Returns the values a remembered pass holds (None: none, or unreadable)."""
    try:
        found: Any = json.loads(key.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    values = found.get("values") if isinstance(found, dict) else None
    if not isinstance(values, dict) or any(metric_value(values, name) is None for name in values):
        return None
    return {name: float(value) for name, value in values.items()}


def _remember(key: Path, program: Program, tree: WorkTree, values: Mapping[str, float]) -> None:
    """Writes the pass (atomically: a concurrent check reads the old file or the new one)."""
    record = {"program": program.name, "tree": tree.sha, "values": dict(values)}
    try:
        key.parent.mkdir(parents=True, exist_ok=True)
        partial = key.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(partial, key)
    except OSError as error:  # not remembered: the next check evaluates again
        log.warning("could not remember %s's check in %s: %s", program.name, key, error)
