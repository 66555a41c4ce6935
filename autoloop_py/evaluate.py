"""Evaluation: run a program's command in a subprocess (bounded time, output and environment) and read its metric."""

from __future__ import annotations

import fnmatch
import json
import logging
import math
import os
import secrets
import select
import signal
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterable, Mapping, Sequence

from autoloop_py.errors import EvaluationError
from autoloop_py.program import Program

logger = logging.getLogger(__name__)

HEAD_CAP = 64 * 1024
TAIL_CHARS = 4 * 1024
READ_CHUNK = 64 * 1024
# How long to keep reading after the command exits and its process group is killed: a child that
# escaped the group (setsid) may hold the pipe open forever.
DRAIN_GRACE = 1.0
_POLL = 0.05
_JSON_WINDOW = 64 * 1024
_DECODE_BUDGET = 2000

SAFE_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ",
    "TMPDIR", "TMP", "TEMP", "PWD", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
    "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_*", "CI", "SYSTEMROOT",
)  # fmt: skip
SECRET_ENV = ("GITHUB_TOKEN", "GH_TOKEN", "ACTIONS_*", "*_TOKEN", "*_API_KEY", "*_SECRET*", "*PASSWORD*")
EXTRA_ENV_VAR = "AUTOLOOP_EVAL_ENV"
# Set to a fresh token for each command: its descendants inherit it, even those that left the group.
MARK_ENV_VAR = "AUTOLOOP_RUN_MARK"
# The runner's pid: when a runner is killed, the next run finds what its commands left running.
RUNNER_ENV_VAR = "AUTOLOOP_RUNNER_PID"
_SWEEPS = 5


@dataclass(frozen=True)
class CommandResult:
    """What one run of a shell command produced.

    Attributes:
      returncode: exit status of `bash -c` (negative: killed by that signal).
      stdout: decoded stdout; past the cap, the first 64 KB and the last `output_cap` bytes.
      stderr: decoded stderr, capped the same way.
      timed_out: the command ran past its timeout and its process group was killed.
      duration: seconds from start until the output was read.
      stdout_dropped: bytes of stdout dropped from the middle over the cap (0: stdout is whole).
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    duration: float
    stdout_dropped: int = 0


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
) -> EvaluationResult:
    """Runs the program's evaluation `repeats` times from the repository root; returns the median metric or why it failed.

    The command runs where upstream autoloop runs it, at the top of the tree, with AUTOLOOP_PROGRAM_DIR
    naming the program folder (`cd "$AUTOLOOP_PROGRAM_DIR" && …` runs it there instead).
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
    env = _environment(program, workdir, os.environ if environ is None else environ)
    runs: list[float] = []
    printed: list[Mapping[str, Any]] = []
    for index in range(count):
        try:
            result = run_command(program.evaluation.command, cwd, timeout=limit, env=env)
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


def scrub_environment(environ: Mapping[str, str], allow: Iterable[str] = ()) -> dict[str, str]:
    """Returns the allow-listed variables of environ, without anything that looks like a secret."""
    explicit = tuple(allow)
    extra = tuple(name.strip() for name in environ.get(EXTRA_ENV_VAR, "").split(",") if name.strip())
    patterns = SAFE_ENV + explicit + extra
    kept: dict[str, str] = {}
    for name, value in environ.items():
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            continue
        if _looks_secret(name) and name not in explicit:
            logger.debug("not passing %s to the evaluation: it looks like a secret", name)
            continue
        kept[name] = value
    return kept


def _looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_ENV)


def run_command(
    command: str, cwd: Path, *, timeout: float, env: Mapping[str, str], output_cap: int = 1 << 20
) -> CommandResult:
    """Runs `bash -c command` in its own process group; kills the whole group on timeout or exit."""
    started = time.monotonic()
    mark = secrets.token_hex(8)
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env={**env, MARK_ENV_VAR: mark, RUNNER_ENV_VAR: str(os.getpid())},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None and process.stderr is not None
    out, err = _CappedBuffer(output_cap), _CappedBuffer(output_cap)
    stop = threading.Event()
    readers = [_start_reader(process.stdout, out, stop), _start_reader(process.stderr, err, stop)]
    try:
        timed_out = not _wait_exited(process, started + timeout)
    finally:
        # Also on Ctrl-C: the evaluation must not go on running on its own.
        # The shell is still unreaped here, so its pid (the group id) cannot have been reused.
        _kill_group(process.pid)
        returncode = process.wait()
        kill_marked(MARK_ENV_VAR, mark)
        _stop_readers(readers, stop)
        process.stdout.close()
        process.stderr.close()
    return CommandResult(returncode, out.text(), err.text(), timed_out, time.monotonic() - started, out.dropped)


def _wait_exited(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Returns whether the process exited before the deadline, leaving it unreaped when possible."""
    delay = 0.001
    while not _has_exited(process):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _POLL)
    return True


def _has_exited(process: subprocess.Popen[bytes]) -> bool:
    if not hasattr(os, "waitid"):
        return process.poll() is not None
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except OSError as err:
        logger.warning("could not kill process group %d of the evaluation: %s", pgid, err)


def kill_marked(name: str, value: str) -> int:
    """Kills the processes whose environment has `name=value`; returns how many were signalled.

    With MARK_ENV_VAR: a command's descendants that left its group (setsid). With RUNNER_ENV_VAR: what a
    killed runner's commands left running. Linux only (/proc); one that replaced its environment escapes.
    """
    needle = f"{name}={value}".encode()
    killed = 0
    for _ in range(_SWEEPS):  # again, in case one forked between the listing and the kill
        marked = [pid for pid in _pids() if pid != os.getpid() and needle in _environ(pid)]
        if not marked:
            break
        for pid in marked:
            logger.info("killing process %d, left behind by a command (%s)", pid, name)
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:  # gone already, or not ours to signal
                pass
    return killed


def _pids() -> list[int]:
    """Returns the ids of the live processes (none when there is no /proc)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _environ(pid: int) -> list[bytes]:
    """Returns the environment a process started with, as `NAME=value` entries (empty if unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


class _CappedBuffer:
    """Keeps the first HEAD_CAP bytes and the last `cap` bytes of a stream, counting the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        """Appends a chunk, dropping the middle once the tail holds more than twice the cap."""
        self.total += len(chunk)
        room = HEAD_CAP - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.cap:
            del self.tail[: len(self.tail) - self.cap]

    @property
    def dropped(self) -> int:
        """Returns how many bytes text() leaves out."""
        return self.total - len(self.head) - min(self.cap, len(self.tail))

    def text(self) -> str:
        """Returns the kept bytes decoded, with a marker where bytes were dropped."""
        tail = bytes(self.tail[len(self.tail) - min(self.cap, len(self.tail)) :])
        omitted = self.dropped
        marker = f"\n[... {omitted} bytes omitted ...]\n".encode() if omitted else b""
        return (bytes(self.head) + marker + tail).decode("utf-8", errors="replace")


def _start_reader(pipe: IO[bytes], buffer: _CappedBuffer, stop: threading.Event) -> threading.Thread:
    thread = threading.Thread(target=_pump, args=(pipe.fileno(), buffer, stop), daemon=True)
    thread.start()
    return thread


def _pump(fd: int, buffer: _CappedBuffer, stop: threading.Event) -> None:
    """Copies fd into buffer until EOF or stop; polls so that stop is noticed even when no data comes."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while not stop.is_set():
        if not poller.poll(int(_POLL * 1000)):
            continue
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            return
        buffer.feed(chunk)


def _stop_readers(readers: list[threading.Thread], stop: threading.Event) -> None:
    deadline = time.monotonic() + DRAIN_GRACE
    for reader in readers:
        reader.join(max(0.0, deadline - time.monotonic()))
    if any(reader.is_alive() for reader in readers):
        logger.warning("a process left behind by the evaluation still holds its output open; stopped reading")
    stop.set()
    for reader in readers:
        reader.join()
