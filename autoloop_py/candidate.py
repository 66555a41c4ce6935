"""Calls a function of candidate code in a process of its own, so that the candidate cannot set its own metric.

An evaluator is the trusted scorer: it computes the metric from what the candidate's function returns.
Imported into the scorer's process, the candidate could replace `json.dump`, `print` or `os._exit`,
register an `atexit` report, or rewrite $AUTOLOOP_RESULT. Called through `call`, it runs in a child
that gets a scrubbed environment (no $AUTOLOOP_RESULT), none of the scorer's file descriptors, its own
stdout (discarded, never the scorer's, so never read as a report) and stderr (a crash quotes its end), and
returns its values as JSON over a pipe of its own.
The scorer cannot be reached through /proc (it is made non-dumpable) and, where the kernel allows a user
namespace, the child runs in a PID namespace of its own, where the scorer has no pid to signal. When the
call returns or times out, every process the child started is killed, daemons that called setsid too
(the scorer is their subreaper). A crash, an exception or a timeout is a CandidateError.

Stdlib only, and nothing else of autoloop_py: the child runs this very file (`python3 -B candidate.py
REQUEST_FD RESULT_FD`) and an evaluator imports it in the sandbox.
"""

from __future__ import annotations

import ctypes
import fnmatch
import importlib.util
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

# The child's environment: an allow-list (never AUTOLOOP_*, whose $AUTOLOOP_RESULT names the report).
KEPT_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR", "PYTHONPATH", "PYTHONHASHSEED",
    "VIRTUAL_ENV", "CONDA_PREFIX", "SYSTEMROOT",
)  # fmt: skip
RESULT_CAP = 64 << 20  # bytes of JSON a call may return
TAIL_BYTES = 4096  # of the child's stderr, quoted in a CandidateError
MESSAGE_CHARS = 2000  # of the candidate's own exception message
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
# Flags a remount must repeat (the kernel refuses to clear them in a user namespace): statvfs's, as mount's.
_KEPT_FLAGS = ((os.ST_NOSUID, 2), (os.ST_NODEV, 4), (os.ST_NOEXEC, 8), (os.ST_NOATIME, 1024),
               (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21)) if sys.platform.startswith("linux") else ()
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_CAPABILITY_VERSION_3 = 0x20080522
_KILL_ROUNDS = 500
_LOCK = threading.Lock()  # one call at a time: each kills every process the scorer gained during it


class CandidateError(Exception):
    """The candidate's call gave no value: it raised, crashed, timed out or returned something not JSON.

    Attributes:
      stderr: the last TAIL_BYTES of what the child wrote to stderr (its traceback, if any).
    """

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class CandidateTimeout(CandidateError):
    """The candidate's call did not return in time; it and everything it started were killed."""


def call(
    path: str | os.PathLike[str], function: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None,
    *, timeout: float = 60.0, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
) -> Any:
    """Returns what `function(*args, **kwargs)` of the module at path returned, run in a process of its own.

    args and the value go as JSON (tuples come back as lists; numpy values as lists and numbers).
    env: variables to add to the child's scrubbed environment. cwd: the child's (default: the scorer's).
    Raises CandidateError (CandidateTimeout after `timeout` seconds).
    """
    return call_each(path, function, [args], kwargs, timeout=timeout, env=env, cwd=cwd)[0]


def call_each(
    path: str | os.PathLike[str], function: str, arguments: Iterable[Sequence[Any]],
    kwargs: Mapping[str, Any] | None = None, *, timeout: float = 60.0, env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> list[Any]:
    """Returns the value of `function(*args, **kwargs)` for each args in arguments, all called in one child process.

    The module is loaded once; `timeout` bounds all the calls together. Raises CandidateError at the first failure.
    """
    deadline = time.monotonic() + timeout
    with Session(path, function, kwargs, timeout=timeout, env=env, cwd=cwd) as session:
        return [session.call_until(deadline, *args) for args in arguments]


class Session:
    """One child process that loads the candidate's module once and calls its function on request, one call at a time.

    Use it as a context manager: `with Session(path, "f") as session: value = session.call(1, 2)`. Each call's
    round trip (request out, reply back) is what a scorer times; the child sends nothing else. `timeout` bounds
    each call. When the session ends (or a call fails), the child and every process it started are killed.
    Only one call or session runs at a time in a scorer.
    """

    def __init__(
        self, path: str | os.PathLike[str], function: str, kwargs: Mapping[str, Any] | None = None, *,
        timeout: float = 60.0, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        source = Path(path).resolve()
        header = {"path": str(source), "function": function, "kwargs": dict(kwargs or {}),
                  "read_only": scorer_paths(os.environ)}
        self._header = json.dumps(header).encode() + b"\n"  # sent with the first call
        self._what = f"{source.name}: {function}()"
        self._timeout, self._env, self._cwd = timeout, child_environment(os.environ, env), cwd
        self._child: subprocess.Popen[bytes] | None = None
        self._request: int | None = None
        self._reply: int | None = None
        self._open = False
        self._stderr = bytearray()

    def __enter__(self) -> Session:
        _LOCK.acquire()
        self._open = True
        try:
            _guard_scorer()
            self._before = {pid for pid, _ in _descendants(os.getpid())}
            request_read, request_write = os.pipe()
            reply_read, reply_write = os.pipe()
            self._request, self._reply = request_write, reply_read
            try:
                self._child = subprocess.Popen(
                    [sys.executable, "-B", str(Path(__file__).resolve()), str(request_read), str(reply_write)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self._env,
                    cwd=self._cwd, pass_fds=(request_read, reply_write), start_new_session=True,
                )  # fmt: skip
            finally:
                os.close(request_read)
                os.close(reply_write)
            os.set_blocking(request_write, False)
        except BaseException:
            self._end()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._end()

    def call(self, *args: Any) -> Any:
        """Returns what the function returned for args; raises CandidateError (CandidateTimeout after `timeout`)."""
        return self.call_until(time.monotonic() + self._timeout, *args)

    def call_until(self, deadline: float, *args: Any) -> Any:
        """Returns what the function returned for args, by time.monotonic() `deadline`; raises as `call` does."""
        if self._child is None or self._request is None or self._reply is None:
            raise CandidateError(f"{self._what}: the session has ended")
        if _readable(self._reply):
            return self._fail(f"{self._what} sent a reply before it was asked")
        request, self._header = self._header + json.dumps(list(args)).encode() + b"\n", b""
        reply = self._exchange(self._request, self._reply, request, deadline)
        if reply is None:
            return self._fail(f"{self._what} did not return within {self._timeout:g} s; it was killed", timeout=True)
        if not reply.endswith(b"\n"):  # the child ended without a whole reply
            status = self._child.wait()
            ended = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
            return self._fail(f"{self._what} returned nothing: its process {ended}{_quoted(self._tail())}")
        if reply.count(b"\n") > 1:
            return self._fail(f"{self._what} sent more than one reply")
        try:
            return _result(reply, self._what, self._tail())
        except CandidateError:
            self._end()
            raise

    def _fail(self, message: str, timeout: bool = False) -> Any:
        """Ends the session and raises the error (the child's state is unknown: no further call may use it)."""
        stderr = self._tail()
        self._end()
        raise (CandidateTimeout if timeout else CandidateError)(message, stderr)

    def _tail(self) -> str:
        return self._stderr.decode("utf-8", errors="replace")

    def _exchange(self, request_fd: int, reply_fd: int, request: bytes, deadline: float) -> bytes | None:
        """Sends the request and returns the reply read up to its newline or the child's end (None: the deadline
        passed first)."""
        assert self._child is not None and self._child.stderr is not None
        pending, reply = memoryview(request), bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(request_fd, selectors.EVENT_WRITE)
            for stream in (reply_fd, self._child.stderr.fileno()):
                selector.register(stream, selectors.EVENT_READ)
            while b"\n" not in reply:
                if time.monotonic() >= deadline:
                    return None
                for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
                    if key.fd == request_fd:
                        try:
                            pending = pending[os.write(request_fd, pending[:65536]) :]
                        except BrokenPipeError:  # the child is gone: its missing reply says how it ended
                            pending = pending[:0]
                        if not pending:
                            selector.unregister(request_fd)
                        continue
                    chunk = os.read(key.fd, 65536)
                    if key.fd != reply_fd:
                        self._stderr.extend(chunk)
                        del self._stderr[:-TAIL_BYTES]
                        if not chunk:
                            selector.unregister(key.fd)
                    elif not chunk:
                        return bytes(reply)
                    elif len(reply) + len(chunk) > RESULT_CAP:
                        return b"{}\n"  # refused whole: a result that large is no metric input
                    else:
                        reply.extend(chunk)
        return bytes(reply)

    def _end(self) -> None:
        """Kills the child and everything it started, closes the pipes and lets the next call or session run."""
        if not self._open:
            return
        try:
            if self._child is not None:
                if self._child.poll() is None:
                    self._child.kill()
                    self._child.wait()
                if self._child.stderr is not None:
                    self._child.stderr.close()
                _stop_descendants(self._before)
            for fd in (self._request, self._reply):
                if fd is not None:
                    os.close(fd)
        finally:
            self._child, self._request, self._reply, self._open = None, None, None, False
            _LOCK.release()


def _readable(fd: int) -> bool:
    """Returns whether fd has something to read now (or is at its end)."""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        return bool(selector.select(0))


def scorer_paths(environ: Mapping[str, str]) -> list[str]:
    """Returns what the candidate sees read-only in an evaluation: its tree, the report's folder and $HOME, where a
    file it planted could change the scorer's later imports, reads or Python processes ([] run by hand)."""
    if "AUTOLOOP_REPO_ROOT" not in environ:
        return []
    paths = [environ["AUTOLOOP_REPO_ROOT"], os.path.dirname(environ.get("AUTOLOOP_RESULT", "")), environ.get("HOME")]
    scratch = os.path.realpath(tempfile.gettempdir())
    real = [os.path.realpath(path) for path in paths if path and os.path.isdir(path)]
    return [path for path in real if path != "/" and not (scratch + "/").startswith(path + "/")]


def child_environment(environ: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Returns the child's environment: the allow-listed variables of environ (never AUTOLOOP_*), then extra."""
    kept = {
        name: value for name, value in environ.items()
        if not name.startswith("AUTOLOOP_") and any(fnmatch.fnmatchcase(name, pattern) for pattern in KEPT_ENV)
    }  # fmt: skip
    return {**kept, **(extra or {}), "PYTHONDONTWRITEBYTECODE": "1"}


def _result(raw: bytes, what: str, stderr: str) -> Any:
    """Returns the value of the child's reply line, or raises CandidateError saying why there is none."""
    try:
        reply = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise CandidateError(f"{what} sent a reply that is not JSON ({err})", stderr) from None
    if isinstance(reply, dict) and isinstance(reply.get("raised"), dict):
        raised = reply["raised"]
        kind, message = str(raised.get("type", "?"))[:100], str(raised.get("message", ""))[:MESSAGE_CHARS]
        raise CandidateError(f"{what} raised {kind}: {message}", stderr)
    values = reply.get("results") if isinstance(reply, dict) else None
    if not isinstance(values, list) or len(values) != 1:
        raise CandidateError(f"{what} sent a reply without its result", stderr)
    return values[0]


def _quoted(stderr: str) -> str:
    """Returns the last line of the child's stderr as a suffix of an error message ('' when it wrote none)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return f" ({lines[-1].strip()[:300]})" if lines else ""


def _guard_scorer() -> None:
    """Makes this process unreachable through /proc (non-dumpable) and the subreaper of what its children leave."""
    libc = _libc()
    if libc is None:
        return
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _libc() -> Any:
    """Returns the C library (None off Linux, where prctl and unshare do not exist)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _stop_descendants(before: set[int]) -> None:
    """Kills and reaps every process below this one that was not there before: the child's whole tree.

    A daemon that called setsid was reparented here (this process is their subreaper), so it is found too;
    the scan repeats until a round finds nothing, so a process forking while it is killed is caught.
    """
    for _ in range(_KILL_ROUNDS):
        found = [(pid, state) for pid, state in _descendants(os.getpid()) if pid not in before]
        if not found:
            return
        for pid, state in found:
            if state != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid, _ in found:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours yet: reparented here once its parent is reaped
                pass
        time.sleep(0.001)


def _descendants(root: int) -> list[tuple[int, str]]:
    """Returns (pid, state letter) of every process below root, read from /proc ([] where there is none)."""
    children: dict[int, list[tuple[int, str]]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append((int(entry), fields[0].decode()))
    found: list[tuple[int, str]] = []
    queue = [root]
    while queue:
        for pid, state in children.get(queue.pop(), []):
            found.append((pid, state))
            queue.append(pid)
    return found


# The child: everything below runs in the candidate's process, before (and around) the candidate's code.


def _serve(request_fd: int, reply_fd: int) -> None:
    """Reads the request line, then calls the candidate's function once per further line (its args), writing one
    JSON reply line each, until the scorer closes the pipe; never returns."""
    requests = os.fdopen(request_fd, "rb")
    request = json.loads(requests.readline())
    _own_pid_namespace(request.get("read_only", []))
    _drop_capabilities()
    path = Path(request["path"])
    sys.path[0] = str(path.parent)  # as `python3 path` would: the candidate's siblings import
    sys.dont_write_bytecode = True
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        function = getattr(module, request["function"])
    except BaseException as err:  # SystemExit too: the scorer turns it into an error, never a score
        function = _raiser(err)
    kwargs = request["kwargs"]
    for line in requests:
        _reply(reply_fd, lambda: [function(*json.loads(line), **kwargs)])
    os.close(reply_fd)
    os._exit(0)


def _raiser(error: BaseException) -> Any:
    """Returns a function that raises error: what each call gets when the module did not load."""

    def raise_it(*args: Any, **kwargs: Any) -> Any:
        raise error

    return raise_it


def _reply(reply_fd: int, compute: Any) -> None:
    """Writes one reply line: the values compute returns, or the exception it raised."""
    try:
        text = json.dumps({"results": compute()}, default=_plain)
    except BaseException as err:  # SystemExit too: the scorer turns it into an error, never a score
        text = json.dumps({"raised": {"type": type(err).__name__, "message": str(err)[:MESSAGE_CHARS]}})
    data = text.encode() + b"\n"
    while data:
        data = data[os.write(reply_fd, data[: 1 << 20]) :]


def _plain(value: Any) -> Any:
    """Returns a numpy-like value as plain lists and numbers (json calls this for what it cannot write)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"returned a {type(value).__name__}, which is not JSON (return numbers, strings, lists, dicts)")


def _drop_capabilities() -> None:
    """Leaves the candidate no capability, now or after an exec (a root scorer's child could otherwise ptrace it,
    non-dumpable or not), and kills it when the scorer dies."""
    libc = _libc()
    if libc is None:
        return
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for capability in range(64):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    libc.capset(header, (ctypes.c_uint32 * 6)())


def _own_pid_namespace(read_only: list[str]) -> None:
    """Moves the candidate into a PID namespace of its own where the kernel allows one (else nothing changes).

    There the scorer has no pid the candidate could signal, and when the candidate (its init) ends, the kernel
    kills all it started. This process stays outside, runs nothing of the candidate, and exits with its status.
    The namespace's view of the read_only paths is read-only: the candidate can write none of them, nor undo that.
    """
    libc = _libc()
    if libc is None or libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNS) != 0:
        return
    libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None)
    for path in read_only:
        kept = sum(flag for st_flag, flag in _KEPT_FLAGS if os.statvfs(path).f_flag & st_flag)
        if libc.mount(path.encode(), path.encode(), None, _MS_BIND | _MS_REC, None) == 0:
            libc.mount(None, path.encode(), None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | kept, None)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # this process too dies with the scorer
    pid = os.fork()
    if pid == 0:
        return
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
