"""Processes: run a command in its own process group with bounded time and output, and reap what it left."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Mapping, Sequence

logger = logging.getLogger(__name__)

HEAD_CAP = 64 * 1024
READ_CHUNK = 64 * 1024
# How long to keep reading after the command exits and its process group is killed: a child that
# escaped the group (setsid) may hold the pipe open forever.
DRAIN_GRACE = 1.0
_POLL = 0.05
# Set to a fresh token for each command: its descendants inherit it, even those that left the group.
MARK_ENV_VAR = "AUTOLOOP_RUN_MARK"
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
      escaped: why the command broke its confinement (its processes left the pids cgroup), '' when it did not.
      memory_cap: the memory cgroup's cap in bytes when the kernel killed some of its processes for it, else None.
      memory_rlimit: the RLIMIT_AS that held a memory cap where no memory cgroup could be made, else None.
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    duration: float
    stdout_dropped: int = 0
    escaped: str = ""
    memory_cap: int | None = None
    memory_rlimit: int | None = None


def run_command(
    command: str, cwd: Path, *, timeout: float, env: Mapping[str, str], output_cap: int = 1 << 20
) -> CommandResult:
    """Runs `bash -c command` in its own process group; kills the whole group on timeout or exit."""
    return run_process(["bash", "-c", command], cwd, timeout=timeout, env=env, output_cap=output_cap)


def run_process(
    argv: Sequence[str], cwd: Path, *, timeout: float, env: Mapping[str, str], output_cap: int = 1 << 20,
    on_exit: Callable[[], object] | None = None,
    audit: Callable[[str, str], str] | None = None,
    pass_fds: Sequence[int] = (),
    on_start: Callable[[subprocess.Popen[bytes]], object] | None = None,
) -> CommandResult:
    """Runs argv in its own process group; kills the whole group (and what left it) on timeout, exit or Ctrl-C.

    on_exit: called the moment the command exits in time, before what it left running is killed (the
    evaluation's report is taken then).
    audit: called with (MARK_ENV_VAR, the command's mark) after its group was killed and before its marked strays
    are: returns why they broke the command's confinement ('' when they did not), kept as `escaped`.
    pass_fds: descriptors the command inherits. on_start: called with the process right after it was spawned (an
    outside-only network is attached then); what it raises ends the command and propagates.
    """
    started = time.monotonic()
    mark = secrets.token_hex(8)
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env={**env, MARK_ENV_VAR: mark},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    assert process.stdout is not None and process.stderr is not None
    out, err = _CappedBuffer(output_cap), _CappedBuffer(output_cap)
    stop = threading.Event()
    readers = [_start_reader(process.stdout, out, stop), _start_reader(process.stderr, err, stop)]
    try:
        if on_start is not None:
            on_start(process)
        timed_out = not _wait_exited(process, started + timeout)
        if on_exit is not None and not timed_out:
            on_exit()
    finally:
        # Also on Ctrl-C: the evaluation must not go on running on its own.
        # The shell is still unreaped here, so its pid (the group id) cannot have been reused.
        _kill_group(process.pid)
        returncode = process.wait()
        escaped = audit(MARK_ENV_VAR, mark) if audit is not None else ""
        kill_marked(MARK_ENV_VAR, mark)
        _stop_readers(readers, stop)
        process.stdout.close()
        process.stderr.close()
    duration = time.monotonic() - started
    return CommandResult(returncode, out.text(), err.text(), timed_out, duration, out.dropped, escaped)


def _wait_exited(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Returns whether the process exited before the deadline, leaving it unreaped when possible."""
    if hasattr(os, "pidfd_open"):
        with contextlib.suppress(OSError):  # an older kernel: poll instead
            return _wait_pidfd(process, deadline)
    delay = 0.001
    while not _has_exited(process):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _POLL)
    return True


def _wait_pidfd(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Waits on a pidfd (Linux), which is readable once the process has exited: no polling delay."""
    fd = os.pidfd_open(process.pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            # In slices, so that Ctrl-C and SIGTERM are handled promptly.
            if poller.poll(int(min(remaining, 0.5) * 1000) + 1):
                return True
    finally:
        os.close(fd)


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

    With MARK_ENV_VAR: a command's descendants that left its group (setsid). With the run directory's
    marker (sandbox.run.RUN_TOKEN_ENV_VAR): what a killed runner's commands left running.
    Linux only (/proc); one that replaced its environment escapes.
    """
    def find() -> list[int]:
        marked = marked_pids(name, value)
        for pid in marked:
            logger.info("killing process %d, left behind by a command (%s)", pid, name)
        return marked

    return kill_until_gone(find, _SWEEPS, 0.0, 0.0)  # again, in case one forked between the listing and the kill


def marked_pids(name: str, value: str) -> list[int]:
    """Returns the live processes (but this one) whose environment has `name=value`."""
    return [pid for pid in process_ids() if pid != os.getpid() and is_marked(pid, name, value)]


def is_marked(pid: int, name: str, value: str) -> bool:
    """Whether the process's environment has `name=value` (False once it is gone or exiting: its memory is released)."""
    return f"{name}={value}".encode() in _environ(pid)


def process_ids() -> list[int]:
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


def kill_until_gone(find: Callable[[], Sequence[int]], rounds: int, first_wait: float, last_wait: float) -> int:
    """SIGKILLs what find() returns, again until it returns nothing (a fork may race a kill) or `rounds` ran out;
    returns the count. The wait between rounds starts at first_wait and doubles up to last_wait."""
    killed, delay = 0, first_wait
    for _ in range(rounds):
        pids = find()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):  # gone already, or not ours to signal
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(delay)
        delay = min(delay * 2, last_wait)
    return killed
