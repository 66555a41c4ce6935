"""Evaluation: run a program's command in a subprocess (bounded time, output and environment) and read its metric."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from autoloop_py.errors import EvaluationError
from autoloop_py.program.model import Program
from autoloop_py.program.requirements import without_leading_pip_install
from autoloop_py.redact import Redactor, from_environment
from autoloop_py.sandbox.environment import scrub_environment
from autoloop_py.sandbox.policy import SandboxPolicy
from autoloop_py.sandbox.process import CommandResult
from autoloop_py.sandbox.run import isolation_for, requested_mode, run_sandboxed

logger = logging.getLogger(__name__)

TAIL_CHARS = 4 * 1024
_JSON_WINDOW = 64 * 1024
_DECODE_BUDGET = 2000


@dataclass(frozen=True)
class EvaluationResult:
    """The outcome of evaluating one candidate (all repeats).

    Attributes:
      ok: every run exited 0 and printed a finite metric.
      metric: the median of the runs' metrics when ok, else None.
      metrics: the last run's JSON object, every number all runs printed replaced by its median, so the
        primary metric here is `metric`, the number the runner compares ({} when none).
      error: a one-line reason when not ok, else None.
      runs: the metric of each successful run, in order.
      stdout_tail: the last ~4 KB of the last run's stdout.
      stderr_tail: the last ~4 KB of the last run's stderr.
      duration: seconds spent in all runs.
    """

    ok: bool
    metric: float | None
    metrics: Mapping[str, Any]
    error: str | None
    runs: tuple[float, ...]
    stdout_tail: str
    stderr_tail: str
    duration: float


def evaluate(
    program: Program,
    workdir: Path,
    *,
    timeout: float | None = None,
    repeats: int | None = None,
    environ: Mapping[str, str] | None = None,
    sandbox: SandboxPolicy | None = None,
    redactor: Redactor | None = None,
) -> EvaluationResult:
    """Runs the program's evaluation `repeats` times from the repository root; returns the median metric or why it failed.

    The command runs where upstream autoloop runs it, at the top of the tree, with AUTOLOOP_PROGRAM_DIR
    naming the program folder (`cd "$AUTOLOOP_PROGRAM_DIR" && …` runs it there instead). Only workdir is
    writable to it; sandbox says how it is confined (None: the program's `isolation`). Secret values the
    runner holds are masked in what it printed before anything reads it.
    """
    if program.evaluation is None:
        raise EvaluationError(
            "the program has no evaluation; add a `## Evaluation` section with a ```bash block "
            "and a line like: The metric is `score`.",
            program.path,
        )
    limit = program.config.evaluation_timeout if timeout is None else timeout
    count = max(1, program.config.repeats if repeats is None else repeats)
    cwd = workdir
    started = time.monotonic()
    if not (workdir / program.base_dir).is_dir():
        return _result(f"the program folder {workdir / program.base_dir} does not exist in the workspace", started, [])
    environ = os.environ if environ is None else environ
    env = _environment(program, workdir, environ)
    mask = redactor if redactor is not None else from_environment(environ)
    if sandbox is None:
        sandbox = isolation_for(requested_mode(program), network=program.config.evaluation_network).evaluation
    command = program.evaluation.command
    if sandbox.sandboxed and not sandbox.network:
        command = without_leading_pip_install(command)  # `autoloop deps` installed it; offline it can only fail
    runs: list[float] = []
    printed: list[Mapping[str, Any]] = []
    for index in range(count):
        try:
            result = run_sandboxed(command, workdir, sandbox, cwd=cwd, timeout=limit, env=env)
            result = replace(result, stdout=mask.text(result.stdout), stderr=mask.text(result.stderr))
        except OSError as err:
            return _result(f"could not start `bash` in {cwd}: {err}", started, runs)
        value, metrics, error = _judge(result, program.evaluation.metric, limit)
        logger.info("evaluation of %s, run %d/%d: %s", program.name, index + 1, count, error or value)
        if value is None:
            return _result(error or "no metric", started, runs, metrics, result)
        runs.append(value)
        printed.append(metrics)
    return _result(None, started, runs, median_metrics(printed), result)


def _result(
    error: str | None,
    started: float,
    runs: list[float],
    metrics: Mapping[str, Any] | None = None,
    last: CommandResult | None = None,
) -> EvaluationResult:
    """Returns the outcome: ok with the median of runs when error is None, else failed with error."""
    return EvaluationResult(
        ok=error is None,
        metric=statistics.median(runs) if error is None else None,
        metrics=metrics or {},
        error=error,
        runs=tuple(runs),
        stdout_tail=last.stdout[-TAIL_CHARS:] if last else "",
        stderr_tail=last.stderr[-TAIL_CHARS:] if last else "",
        duration=time.monotonic() - started,
    )


def median_metrics(printed: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Returns the last run's object with each number that every run printed replaced by the runs' median."""
    if not printed:
        return {}
    combined = dict(printed[-1])
    for key, value in combined.items():
        values = [run.get(key) for run in printed]
        if all(_is_number(v) for v in values) and len(values) > 1:
            middle = statistics.median(float(v) for v in values)
            combined[key] = int(middle) if isinstance(value, int) and middle.is_integer() else middle
    return combined


def _is_number(value: Any) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _environment(program: Program, workdir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    env = scrub_environment(environ)
    env["AUTOLOOP_PROGRAM"] = program.name
    env["AUTOLOOP_REPO_ROOT"] = str(workdir.resolve())
    env["AUTOLOOP_PROGRAM_DIR"] = str((workdir / program.base_dir).resolve())
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _judge(result: CommandResult, metric: str, timeout: float) -> tuple[float | None, dict[str, Any], str | None]:
    """Returns (metric, metrics, error) for one run: a failed process is an error even when it printed a metric."""
    value, metrics, error = parse_metric(result.stdout, metric)
    if value is None and not metrics and result.stdout_dropped:
        error = _cut_error(result)
    if result.timed_out:
        return None, metrics, f"timed out after {timeout:g} s"
    if result.returncode < 0:
        return None, metrics, f"was killed by signal {_signal_name(-result.returncode)}"
    if result.returncode != 0:
        return None, metrics, f"exited with status {result.returncode}: {_exit_detail(result, metrics)}"
    return value, metrics, error


def _cut_error(result: CommandResult) -> str:
    """Returns why no JSON object was read from stdout that was cut over the output cap."""
    last = next((line.strip() for line in reversed(result.stdout.splitlines()) if line.strip()), "")
    if last.endswith("}"):
        return (f"output cut at the output cap ({result.stdout_dropped} bytes dropped) before a JSON object ended; "
                'print the metric object, such as {"score": 0.5}, on a short last line of its own')
    return (f"the evaluation printed no JSON object in the part of its output kept under the cap "
            f"({result.stdout_dropped} bytes dropped); print one such as {{\"score\": 0.5}} as its last line")


def _exit_detail(result: CommandResult, metrics: Mapping[str, Any]) -> str:
    for text in (result.stderr, str(metrics["error"]) if metrics.get("error") else "", result.stdout):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return _one_line(lines[-1])
    return "no output"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def parse_metric(stdout: str, metric: str) -> tuple[float | None, dict[str, Any], str | None]:
    """Returns (metric, last JSON object, error) read from a command's stdout; metric is None on error."""
    found = _last_json_object(stdout)
    if found is None:
        return None, {}, 'the evaluation printed no JSON object; print one such as {"score": 0.5} as its last line'
    if found.get("error"):
        return None, found, f"evaluation reported an error: {_one_line(str(found['error']))}"
    if metric not in found:
        keys = ", ".join(sorted(found)) or "none"
        return None, found, f"metric '{metric}' is missing from the JSON object (keys: {keys}); check the metric name"
    value = found[metric]
    if isinstance(value, bool):
        return None, found, f"metric '{metric}' is a boolean ({json.dumps(value)}); booleans are never metrics"
    if not isinstance(value, (int, float)):
        return None, found, f"metric '{metric}' is not a number: {_one_line(json.dumps(value))}"
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = math.inf
    if not math.isfinite(number):
        return None, found, f"metric '{metric}' is not finite ({number})"
    return number, found, None


def _last_json_object(text: str) -> dict[str, Any] | None:
    """Returns the JSON object whose closing brace comes last in text (scanning lines from the end)."""
    budget = [_DECODE_BUDGET]
    end = len(text)
    while end > 0 and budget[0] > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end].rstrip()
        end = start - 1
        if not line.endswith("}"):
            continue
        found = _loads_object(line.strip())
        if found is None:
            found = _object_ending_at(text, start + len(line) - 1, budget)
        if found is not None:
            return found
    return None


def _loads_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _object_ending_at(text: str, close: int, budget: list[int]) -> dict[str, Any] | None:
    """Returns the object that closes at index `close`, decoding from each `{` going backwards."""
    decoder = json.JSONDecoder()
    floor = max(0, close - _JSON_WINDOW)
    pos = close + 1
    while budget[0] > 0:
        pos = text.rfind("{", floor, pos)
        if pos < 0:
            return None
        budget[0] -= 1
        try:
            found, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            continue
        if end == close + 1 and isinstance(found, dict):
            return found
    return None
