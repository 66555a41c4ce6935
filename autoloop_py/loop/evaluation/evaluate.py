"""Evaluation: run a program's command in a subprocess (bounded time, output and environment) and read its metric."""

from __future__ import annotations

import logging
import math
import os
import signal
import stat
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from autoloop_py import tempdirs
from autoloop_py.errors import EvaluationError
from autoloop_py.loop.evaluation.cascade import run_cascade
from autoloop_py.loop.evaluation.evaluation_report import (
    AUTO,
    FILE,
    RESULT_ENV,
    STDOUT,
    EvaluationResult,
    Report,
    channel_of,
    one_line,
    read_report,
)
from autoloop_py.program.model import Program
from autoloop_py.program.requirements import without_leading_pip_install
from autoloop_py.program.stages import REJECT, STAGE_ENV, Stage, label
from autoloop_py.program.target import target_files
from autoloop_py.redact import Redactor, from_environment
from autoloop_py.sandbox.environment import scrub_environment
from autoloop_py.sandbox.policy import SandboxPolicy
from autoloop_py.sandbox.process import CommandResult
from autoloop_py.sandbox.run import command_words, isolation_for, program_limits, requested_mode, run_sandboxed

logger = logging.getLogger(__name__)

TAIL_CHARS = 4 * 1024
# A report file larger than this is refused unread (a metric object is a few hundred bytes).
REPORT_CAP = 1 << 20
# The files the evaluation command names, read to learn whether it writes $AUTOLOOP_RESULT (`evaluation-report: auto`).
_SCANNED_BYTES = 256 * 1024
_SCANNED_FILES = 64
_NAME_MAX = 1024
_CHANGED = ("the report in $AUTOLOOP_RESULT changed after the evaluation's command exited: a process it left "
            "running wrote it, so it does not count; let nothing the evaluator starts outlive it")


# Runs one stage (the evaluation, without stages) given the tree to run it in; called with the stage's label
# ('' without stages). The default runs it in the evaluated tree itself; evaluate_copy gives each a fresh copy.
Place = Callable[[Callable[[Path], EvaluationResult], str], EvaluationResult]


@dataclass(frozen=True)
class _Setup:
    """What every run of one stage shares: where, how confined, its environment and how its report is read.

    Attributes:
      holder: a private folder where each run gets a fresh folder for its report file.
      stage: the stage of `evaluation-stages` being run (None: the evaluation, without stages).
    """

    program: Program
    workdir: Path
    sandbox: SandboxPolicy
    env: Mapping[str, str]
    mask: Redactor
    limit: float
    channel: str
    holder: Path
    stage: Stage | None = None


def evaluate(
    program: Program,
    workdir: Path,
    *,
    timeout: float | None = None,
    repeats: int | None = None,
    environ: Mapping[str, str] | None = None,
    sandbox: SandboxPolicy | None = None,
    place: Place | None = None,
) -> EvaluationResult:
    """Runs the program's evaluation `repeats` times from the repository root; returns the median metric or why it
    failed.

    The command runs where upstream autoloop runs it, at the top of the tree, with AUTOLOOP_PROGRAM_DIR
    naming the program folder (`cd "$AUTOLOOP_PROGRAM_DIR" && …` runs it there instead). Only workdir is
    writable to it; sandbox says how it is confined (None: the program's `isolation`). Secret values the
    runner holds are masked in what it printed before anything reads it. The report is the file named by
    AUTOLOOP_RESULT, read once the command has exited, or (upstream's way) the last JSON object on stdout.
    place: where each stage runs (None: in workdir itself).
    """
    if program.evaluation is None:
        raise EvaluationError(
            "the program has no evaluation; add a `## Evaluation` section with a ```bash block "
            "and a line like: The metric is `score`.",
            program.path,
        )
    limit = program.config.evaluation_timeout if timeout is None else timeout
    count = max(1, program.config.repeats if repeats is None else repeats)
    started = time.monotonic()
    if not (workdir / program.base_dir).is_dir():
        return _result(f"the program folder {workdir / program.base_dir} does not exist in the workspace", started, [])
    environ = os.environ if environ is None else environ
    mask = from_environment(environ)
    if sandbox is None:
        sandbox = isolation_for(
            requested_mode(program), network=program.config.evaluation_network, limits=program_limits(program)
        ).evaluation
    command = program.evaluation.command
    if sandbox.sandboxed and not sandbox.network:
        command = without_leading_pip_install(command)  # `autoloop deps` installed it; offline it can only fail
    channel = channel_of(program.config.evaluation_report, _evaluator_texts(program, workdir))
    place = place or (lambda run, _label: run(workdir))
    stages = program.config.evaluation_stages
    with tempdirs.temporary("autoloop-report-") as holder:
        setup = _Setup(program, workdir, sandbox, {}, mask, limit, channel, holder)

        def in_tree(tree: Path) -> _Setup:
            return replace(setup, workdir=tree, env=_environment(program, tree, environ))

        if not stages:
            return _repeated(lambda: place(lambda tree: _run(in_tree(tree), command, started), ""), count, started)

        def stage(own: str, runs: int, number: int, need_metric: bool) -> EvaluationResult:
            def run(tree: Path) -> EvaluationResult:
                staged = replace(in_tree(tree), stage=stages[number - 1])
                staged = replace(staged, env={**staged.env, STAGE_ENV: str(number)})
                return _run(staged, own or command, time.monotonic(), need_metric)

            began = time.monotonic()
            return _repeated(lambda: place(run, label(stages[number - 1], number, len(stages))), runs, began)

        return run_cascade(program, stage, count, started)


def _repeated(once: Callable[[], EvaluationResult], count: int, started: float) -> EvaluationResult:
    """Runs once() count times (each run in a tree of its own: nothing one run leaves reaches the next); returns the
    median, or the first run's failure or rejection."""
    runs: list[float] = []
    printed: list[Mapping[str, Any]] = []
    for _ in range(count):
        result = once()
        if not result.ok or (result.metric is None and result.rejection):
            return replace(result, runs=tuple(runs), duration=time.monotonic() - started)
        printed.append(result.metrics)
        if result.metric is not None:
            runs.append(result.metric)
        if result.rejection:  # the evaluator judged the candidate invalid: running it again changes nothing
            break
    metric = statistics.median(runs) if runs else None
    return replace(result, metric=metric, runs=tuple(runs), metrics=median_metrics(printed),
                   duration=time.monotonic() - started)  # fmt: skip


def _run(setup: _Setup, command: str, started: float, need_metric: bool = True) -> EvaluationResult:
    """Runs the command once; returns its metric, or its failure or rejection.

    need_metric False (a pass/fail stage): no report, or one without the metric and without an `error`, passes.
    """
    program, workdir, sandbox, mask, limit, channel = (
        setup.program, setup.workdir, setup.sandbox, setup.mask, setup.limit, setup.channel
    )
    assert program.evaluation is not None
    # A fresh folder for each run's report: nothing an earlier run (or stage) left there is read.
    report_file = Path(tempfile.mkdtemp(prefix="report-", dir=setup.holder)) / "result.json"
    env = {**setup.env, RESULT_ENV: str(report_file)}
    taken: list[str] = []
    try:
        result = run_sandboxed(
            command, workdir, sandbox, cwd=workdir, timeout=limit, env=env,
            writable=[report_file.parent], on_exit=lambda: taken.append(read_channel(report_file)),
        )
    except OSError as err:
        return _result(f"could not start `bash` in {workdir}: {err}", started, [])
    text = result.stdout if channel == STDOUT else _settled(taken, read_channel(report_file))
    result = replace(result, stdout=mask.text(result.stdout), stderr=mask.text(result.stderr))
    read = None if text is None else mask.text(text)
    report = _judge(result, read, program.evaluation.metric, limit, channel, setup.stage)
    logger.info("evaluation of %s: %s", program.name, report.error or report.rejection or report.metric)
    if report.metric is None and channel == STDOUT and not report.metrics and read_channel(report_file).strip():
        report = replace(report, missing=False, error=f"{report.error}; it wrote $AUTOLOOP_RESULT, which this "
                         "program does not read: set `evaluation-report: file` in its frontmatter")
    if report.metric is None and report.missing and not need_metric:
        return _result(None, started, [], report.metrics, result, report, channel)
    if report.metric is None and not report.rejection:
        return _result(report.error or "no metric", started, [], report.metrics, result, report, channel)
    runs = [] if report.metric is None else [report.metric]
    return _result(None, started, runs, report.metrics, result, report, channel)


def _settled(taken: list[str], final: str) -> str | None:
    """Returns the report as the command left it when it exited; None when a process it left running changed it since.

    The report is taken the moment the command exits, and again once everything it started is killed:
    a difference means something outlived the evaluator and wrote the file, so neither counts.
    """
    if not taken or taken[0] != final:
        logger.warning("the evaluation's report changed after its command exited: ignored")
        return None
    return final


def read_channel(path: Path) -> str:
    """Returns the report file's text ('' when it is absent, not a regular file, or over REPORT_CAP).

    Never follows a link nor blocks on a fifo: the evaluated code may have put either there.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > REPORT_CAP:  # checked before fdopen, which refuses a folder
        os.close(fd)
        logger.warning("ignored the evaluation's report %s: not a regular file of at most %d bytes", path, REPORT_CAP)
        return ""
    with os.fdopen(fd, "rb") as handle:
        return handle.read(REPORT_CAP).decode("utf-8", errors="replace")


def _evaluator_texts(program: Program, workdir: Path) -> list[str]:
    """Returns the evaluation command and the files it names (not the Target's), to find the report's channel."""
    assert program.evaluation is not None
    texts = [program.evaluation.command]
    if program.config.evaluation_report != AUTO:
        return texts
    candidate = {workdir / path for path in target_files(program.target, workdir)}
    for path in named_paths(program.evaluation.command, workdir, workdir / program.base_dir):
        try:
            if path in candidate or path.is_symlink() or not path.is_file():
                continue
            with path.open("rb") as handle:
                texts.append(handle.read(_SCANNED_BYTES).decode("utf-8", errors="replace"))
        except OSError:  # a word of inline code is no file name (too long, not readable)
            continue
    return texts


def named_paths(command: str, root: Path, folder: Path) -> list[Path]:
    """Returns the paths inside root that the command's words name: from root, the program folder, or its variables."""
    found: list[Path] = []
    for word in command_words(command)[:_SCANNED_FILES]:
        word = word.replace("${AUTOLOOP_PROGRAM_DIR}", str(folder)).replace("$AUTOLOOP_PROGRAM_DIR", str(folder))
        word = word.replace("${AUTOLOOP_REPO_ROOT}", str(root)).replace("$AUTOLOOP_REPO_ROOT", str(root))
        if not word or word.startswith("-") or "$" in word or "\n" in word or len(word) > _NAME_MAX:
            continue
        for base in (root, folder):
            path = Path(os.path.normpath(base / word))
            if (path == root or root in path.parents) and path not in found:
                found.append(path)
    return found


def _result(
    error: str | None,
    started: float,
    runs: list[float],
    metrics: Mapping[str, Any] | None = None,
    last: CommandResult | None = None,
    report: Report | None = None,
    channel: str = STDOUT,
) -> EvaluationResult:
    """Returns the outcome: ok with the median of runs when error is None, else failed with error."""
    return EvaluationResult(
        ok=error is None,
        metric=statistics.median(runs) if error is None and runs else None,
        metrics=metrics or {},
        error=error,
        runs=tuple(runs),
        stdout_tail=last.stdout[-TAIL_CHARS:] if last else "",
        stderr_tail=last.stderr[-TAIL_CHARS:] if last else "",
        duration=time.monotonic() - started,
        rejection=report.rejection if report is not None and error is None else "",
        feedback=report.feedback if report is not None else "",
        channel=channel,
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


def _judge(
    result: CommandResult, text: str | None, metric: str, timeout: float, channel: str, stage: Stage | None = None
) -> Report:
    """Returns one run's report (text None: it changed after the exit): a failed process is an error even with a metric.

    stage: the stage of a cascade this run is (None: none): its `error` rejects the candidate, and so does a
    non-zero exit status when the stage says `failing-exit: reject`.
    """
    if text is None:
        report = Report(None, error=_CHANGED)
    else:
        printed = (result.stdout, result.stderr)
        report = read_report(text, metric, whole=channel == FILE, stage=stage is not None, printed=printed)
    if report.metric is None and not report.metrics and result.stdout_dropped and channel == STDOUT:
        report = replace(report, error=_cut_error(result), missing=False)
    failed = None
    if result.escaped:
        failed = f"broke its confinement: {result.escaped}"
    elif result.memory_cap is not None:
        failed = (f"was killed at the program's `max-memory` of {result.memory_cap} bytes (its processes together, "
                  "a memory cgroup)")
    elif result.timed_out:
        failed = f"timed out after {timeout:g} s"
    elif result.returncode < 0:
        failed = f"was killed by signal {_signal_name(-result.returncode)}"
    elif result.returncode != 0:
        failed = f"exited with status {result.returncode}: {_exit_detail(result, report.metrics)}"
        if stage is not None and stage.failing_exit == REJECT:  # the stage's contract: its exit status is a verdict
            return replace(report, metric=None, error=None, rejection=report.rejection or failed, missing=False)
    return report if failed is None else replace(report, metric=None, error=failed, rejection="", missing=False)


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
            return one_line(lines[-1])
    return "no output"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
