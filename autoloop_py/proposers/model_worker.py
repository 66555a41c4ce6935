"""The model worker: a process that makes the run's model calls, importing litellm only when one needs it.

`import litellm` is seconds of CPU (3.7 s on an idle 2-core machine, litellm 1.110) and ~200 MB. An `openai/…`
model's requests are sent, and its plain replies read, without it (openai_direct.py); checking a model of another
provider or a priced one (the run's setup check, beside its baseline evaluation) starts it in a thread, and a
request litellm must make or read waits for it. The runner writes one JSON request per line to the worker's
stdin and reads one JSON answer per line, in order; litellm's own prints go to stderr. An answer carries the
log records of our modules, which the runner logs again through its own handlers (and their redaction).

The slots of `run --parallel k` (processes of their own) share the worker: it listens on a UNIX socket in
a private folder, with a random key, and answers each slot's connection in a thread, so their calls
overlap and litellm is imported once per run.

The worker dies with the runner: the kernel kills it when the runner dies (PR_SET_PDEATHSIG), it
stops when its requests end (the runner closed the pipe), and Ctrl-C stops it too. Like the runner it
is not dumpable, and it lacks the runner's GitHub and Actions tokens, which no model call reads.
"""

from __future__ import annotations

import abc
import ctypes
import dataclasses
import fnmatch
import importlib.util
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, TYPE_CHECKING, Any, Callable, Mapping, Sequence

from autoloop_py.errors import AutoloopError, ConfigurationError, error_line
from autoloop_py.proposers.llm_call import CallLimits, ModelCallError
from autoloop_py.proposers.model_calls import ModelCheck, Reply, Vectors, call, check_model, embed
from autoloop_py.proposers.model_calls import import_litellm
from autoloop_py.sandbox.runner import make_non_dumpable

if TYPE_CHECKING:
    from multiprocessing.connection import Connection, Listener

# The runner imports this module before it starts the worker (__main__.py): what only the worker (the HTTP client of
# openai_direct) or the slots' socket (multiprocessing) use is imported where it is used.

logger = logging.getLogger("autoloop_py.proposers.model_worker")  # also when run as __main__

# The runner's own credentials (it pushes, comments and reads checks with them). litellm reads none of
# them: its `github/` models take GITHUB_API_KEY.
RUNNER_ONLY = ("GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN", "*_GITHUB_TOKEN",
               "ACTIONS_*")
_PR_SET_PDEATHSIG = 1
_ERRORS: dict[str, type[AutoloopError]] = {
    "configuration": ConfigurationError, "model-call": ModelCallError, "autoloop": AutoloopError,
}


class _WorkerCalls(abc.ABC):
    """The ModelCalls of a worker's end: each call is a request whose answer `_submit`'s call waits for."""

    @abc.abstractmethod
    def _submit(self, request: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        """Sends a request; returns the call that waits for its answer (each end sends its own way)."""

    def completion(self, kwargs: dict[str, Any], limits: CallLimits) -> Reply:
        """Returns the reply to one request (litellm's arguments), made by the worker within the limits."""
        return Reply(**self._submit(_request("completion", kwargs, limits))()["reply"])

    def embedding(self, kwargs: dict[str, Any], limits: CallLimits) -> Vectors:
        """Returns the vectors of one embedding request, made by the worker within the limits."""
        found = self._submit(_request("embedding", kwargs, limits))()["vectors"]
        return Vectors(tuple(tuple(v) for v in found["vectors"]), found["prompt_tokens"], found["cost"])

    def check(self, model: str) -> Callable[[], ModelCheck]:
        """Sends a model's setup check; returns the call that waits for its answer."""
        wait = self._submit({"op": "check", "model": model})

        def answer() -> ModelCheck:
            found = wait()["check"]
            return ModelCheck(found["problem"], tuple(found["missing"]))

        return answer


class ModelWorker(_WorkerCalls):
    """The runner's end of the model worker (a ModelCalls): starts it, sends requests, reads the answers.

    Requests may be sent before earlier answers are read (a setup check runs while the baseline is
    evaluated); answers come in order. A worker that stopped is started again by the next request.
    """

    def __init__(self, command: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> None:
        self.command = tuple(command) or (sys.executable, "-m", __name__)
        self.environ = environ  # None: this process's environment when the worker starts
        self._process: subprocess.Popen[str] | None = None
        self._sent = 0
        self._read = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._shared: tuple[int | None, str, bytes] | None = None  # (worker pid, socket address, key)

    def __enter__(self) -> ModelWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        # A slot's process (its options are pickled) cannot share this pipe: it reaches the worker through the
        # socket the worker listens on, so one litellm import serves every slot. Without it, it calls itself.
        try:
            address, key = self.share()
        except AutoloopError as err:
            logger.warning("the slots make their own model calls (each imports litellm): %s", err)
            from autoloop_py.proposers.model_calls import InProcess

            return (InProcess, ())
        return (SharedWorker, (address, key))

    def share(self) -> tuple[str, bytes]:
        """Returns the address and key of the worker's socket for other processes, listening from the first call.

        Raises ModelCallError when the worker cannot listen.
        """
        if self._shared is None or self._shared[0] != self.pid:
            folder = tempfile.mkdtemp(prefix="autoloop-models-")  # 0700: only this user reaches the socket
            address, key = os.path.join(folder, "socket"), secrets.token_bytes(32)
            try:
                self._submit({"op": "share", "address": address, "key": key.hex()})()
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            self._shared = (self.pid, address, key)
        return self._shared[1], self._shared[2]

    @property
    def pid(self) -> int | None:
        """Returns the worker's process id (None when it is not running)."""
        return self._process.pid if self._process is not None else None

    def start(self) -> ModelWorker:
        """Starts the worker process (it imports litellm once a request needs it)."""
        self.close()
        env = worker_environment(os.environ if self.environ is None else self.environ)
        self._process = subprocess.Popen(
            [*self.command, str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            text=True, encoding="utf-8",
        )  # fmt: skip
        self._sent = self._read = 0
        self._answers.clear()
        return self

    def close(self) -> None:
        """Stops the worker (a call in flight is abandoned: nothing waits for it any more)."""
        process, self._process = self._process, None
        shared, self._shared = self._shared, None
        if shared is not None:
            shutil.rmtree(os.path.dirname(shared[1]), ignore_errors=True)  # the socket's private folder
        if process is None:
            return
        process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()

    def kill(self) -> None:
        """Sends the worker its kill signal without waiting for it to end (close() waits)."""
        if self._process is not None:
            self._process.kill()

    def _submit(self, request: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        """Sends a request; returns the call that waits for its answer (and raises the error it carries)."""
        if self._process is None or self._process.poll() is not None:
            self.start()
        process = self._process
        assert process is not None and process.stdin is not None
        ticket = self._sent
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
        except OSError:
            pass  # it stopped: the wait reads its end and says so
        self._sent += 1
        return lambda: self._wait(process, ticket)

    def _wait(self, process: subprocess.Popen[str], ticket: int) -> dict[str, Any]:
        """Returns the answer to request `ticket`, reading the earlier ones first; raises the error it carries."""
        try:
            while ticket not in self._answers:
                if process is not self._process:
                    raise ModelCallError("the model worker was stopped before it answered")
                assert process.stdout is not None
                line = process.stdout.readline()
                if not line:
                    self.close()
                    raise ModelCallError(f"the model worker stopped (exit status {process.returncode}) "
                                         "before it answered; its error, if any, is on stderr above")
                self._answers[self._read] = json.loads(line)
                self._read += 1
        except BaseException:
            if process is self._process and ticket not in self._answers:
                self.close()  # interrupted mid-answer (Ctrl-C): the pipe's order is lost, start afresh next time
            raise
        return _unpacked(self._answers.pop(ticket))


def _request(op: str, kwargs: dict[str, Any], limits: CallLimits) -> dict[str, Any]:
    return {"op": op, "kwargs": kwargs, "limits": [limits.timeout, limits.retries, limits.deadline]}


def _unpacked(answer: dict[str, Any]) -> dict[str, Any]:
    """Logs the records an answer carries; returns it, or raises the error it carries."""
    for name, level, message in answer.get("logs", ()):
        logging.getLogger(name).log(level, "%s", message)  # shown, or not, by the runner's logging
    error = answer.get("error")
    if error is not None:
        raise _ERRORS.get(error["kind"], ModelCallError)(error["message"])
    return answer


class SharedWorker(_WorkerCalls):
    """A slot process's end of the run's model worker (a ModelCalls): requests over the worker's socket.

    Each process connects once, at its first call, and makes one call at a time; the worker answers every
    connection in a thread of its own, so the slots' calls overlap.
    """

    def __init__(self, address: str, key: bytes) -> None:
        self.address, self.key = address, key
        self._connection: Connection | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (SharedWorker, (self.address, self.key))

    def _submit(self, request: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        """Sends a request and reads its answer now (one call at a time); returns the call that hands it over."""
        import multiprocessing.connection

        try:
            if self._connection is None:
                self._connection = multiprocessing.connection.Client(self.address, family="AF_UNIX", authkey=self.key)
            self._connection.send(request)
            answer = self._connection.recv()
        except (OSError, EOFError, multiprocessing.AuthenticationError) as err:
            self._connection = None
            raise ModelCallError(f"the run's model worker cannot be reached ({type(err).__name__}: {err}); "
                                 "it stops with the run") from None
        answer = _unpacked(answer)
        return lambda: answer


def start_worker(wanted: bool) -> ModelWorker | None:
    """Returns a started worker when model calls are wanted, litellm is installed and not yet imported here
    (then the calls cost no import: they are made in this process)."""
    if not wanted or "litellm" in sys.modules or importlib.util.find_spec("litellm") is None:
        return None
    return ModelWorker().start()


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """Returns the worker's environment: the runner's without its own credentials, litellm on its bundled prices."""
    env = {name: value for name, value in environ.items()
           if not any(fnmatch.fnmatchcase(name.upper(), pattern) for pattern in RUNNER_ONLY)}
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


class _Records(logging.Handler):
    """Keeps our modules' log records, per thread, until the answer that carries them is written."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: dict[int, list[tuple[str, int, str]]] = {}
        self.serving: set[int] = set()  # the threads that answer a slot process's connection

    def emit(self, record: logging.LogRecord) -> None:
        self.kept.setdefault(record.thread or 0, []).append((record.name, record.levelno, record.getMessage()))

    def drain(self) -> list[tuple[str, int, str]]:
        """Returns (and forgets) this thread's records; the runner's answers also carry other threads' (the warm-up)."""
        me = threading.get_ident()
        if me in self.serving:
            return self.kept.pop(me, [])
        return [r for ident in [i for i in self.kept if i not in self.serving] for r in self.kept.pop(ident)]


def main(argv: Sequence[str]) -> int:
    """Runs the worker: `python -m autoloop_py.proposers.model_worker RUNNER_PID`."""
    _die_with(int(argv[0]))
    make_non_dumpable()
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # litellm prints some messages: they go to stderr, never among the answers
    records = _Records()
    ours = logging.getLogger("autoloop_py")
    ours.setLevel(logging.DEBUG)  # every record goes to the runner, whose logging decides what is shown
    ours.addHandler(records)
    ours.propagate = False
    try:
        _serve(sys.stdin, answers, records)
    except (KeyboardInterrupt, BrokenPipeError):
        return 130  # Ctrl-C, or a runner that stopped reading: it stops too, without a traceback
    return 0


class _Litellm:
    """litellm, imported in a thread once something needs it; reading one of its names waits for the import."""

    def __init__(self) -> None:
        self._module: Any = None
        self._missing = ""
        self._loaded = threading.Event()
        self._started = threading.Lock()  # held once the import has begun

    def start(self, why: str) -> None:
        """Begins importing litellm in a thread (once), saying why."""
        if self._started.acquire(blocking=False):
            logger.debug("the model worker imports litellm: %s", why)
            threading.Thread(target=self._load, name="import-litellm", daemon=True).start()

    def _load(self) -> None:
        started = time.monotonic()
        try:
            self._module = import_litellm()
        except AutoloopError as err:
            self._missing = err.message
        except Exception as err:  # noqa: BLE001 - a broken install: each request says so
            self._missing = f"litellm could not be imported: {type(err).__name__}: {error_line(err)}"
        finally:
            self._loaded.set()
        logger.debug("the model worker imported litellm in %.2f s", time.monotonic() - started)
        if self._module is not None:
            _warm_up(self._module)

    def loaded(self) -> bool:
        """Returns whether the import is over."""
        return self._loaded.is_set()

    def module(self) -> Any:
        """Returns litellm, imported now if it is not yet; raises AutoloopError when it cannot be."""
        self.start("a request needs it")
        self._loaded.wait()
        if self._module is None:
            raise AutoloopError(self._missing)
        return self._module

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module(), name)


def _serve(requests: IO[str], answers: IO[str], records: _Records) -> None:
    """Answers each request line with one answer line until the requests end."""
    litellm = _Litellm()
    import autoloop_py.proposers.openai_direct  # noqa: F401 - now, not in the first request's time

    for line in requests:
        request = json.loads(line)
        if request["op"] == "share":
            answer = _share(request["address"], bytes.fromhex(request["key"]), litellm, records)
        else:
            answer = _answer(litellm, request)
        answer["logs"] = records.drain()
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def _share(address: str, key: bytes, litellm: _Litellm, records: _Records) -> dict[str, Any]:
    """Listens on a UNIX socket for slot processes (SharedWorker), each connection answered in a thread."""
    from multiprocessing.connection import Listener

    try:
        listener = Listener(address, family="AF_UNIX", authkey=key)
    except OSError as err:
        return _error("model-call", f"the model worker cannot listen on {address}: {err}")
    threading.Thread(target=_accept, args=(listener, litellm, records), name="share", daemon=True).start()
    return {"shared": address}


def _accept(listener: Listener, litellm: _Litellm, records: _Records) -> None:
    import multiprocessing

    while True:
        try:
            connection = listener.accept()
        except (OSError, EOFError, multiprocessing.AuthenticationError) as err:
            logger.debug("a connection to the model worker was refused: %s", err)
            continue
        threading.Thread(target=_answer_connection, args=(connection, litellm, records), daemon=True).start()


def _answer_connection(connection: Connection, litellm: _Litellm, records: _Records) -> None:
    """Answers one slot process's requests, one at a time, until it closes the connection."""
    records.serving.add(threading.get_ident())
    with connection:
        while True:
            try:
                request = connection.recv()
            except (EOFError, OSError):
                return
            answer = _answer(litellm, request)
            answer["logs"] = records.drain()
            connection.send(answer)


def _warm_up(litellm: Any) -> None:
    """Makes one call answered offline (litellm's `mock_response`), beside the requests.

    litellm's first call imports more of litellm (0.3 s of CPU, 0.17 s of it taken here); done while the
    worker waits for the run's first request, the request does not pay it. A request that comes sooner
    shares the imports already made (Python's per-module import locks), so it never waits longer.
    """
    try:
        litellm.completion(model="openai/warm-up", messages=[{"role": "user", "content": "warm-up"}],
                           mock_response="ok", api_key="warm-up")
    except Exception as err:  # noqa: BLE001 - only a head start: the real call reports its own errors
        logger.debug("the model worker's warm-up call failed: %s", err)


def _answer(litellm: _Litellm, request: dict[str, Any]) -> dict[str, Any]:
    """Returns the answer to one request: its result, or the error to raise in the runner.

    Until litellm is loaded, an `openai/…` model is checked, and its request sent, without it (openai_direct).
    Checking a model that will need litellm (another provider, a priced model) begins its import.
    """
    from autoloop_py.proposers.openai_direct import PREFIX, direct_sender, listed, quick_check

    try:
        if request["op"] == "check":
            model = request["model"]
            early = None if litellm.loaded() else quick_check(model)
            if early is None or listed(model.removeprefix(PREFIX)):
                litellm.start(f"the run's model {model} needs it")
            found = early or check_model(litellm.module(), model)
            return {"check": {"problem": found.problem, "missing": list(found.missing)}}
        kwargs, (timeout, retries, deadline) = request["kwargs"], request["limits"]
        limits = CallLimits(timeout, retries, deadline)
        if request["op"] == "embedding":
            return {"vectors": dataclasses.asdict(embed(litellm.module(), kwargs, limits))}
        first = None if litellm.loaded() else direct_sender(litellm, kwargs)
        reply = call(litellm if first else litellm.module(), kwargs, limits, first)
        return {"reply": dataclasses.asdict(reply)}
    except AutoloopError as err:  # its kind by _ERRORS, so that the runner raises the same class
        kind = next(kind for kind, cls in _ERRORS.items() if isinstance(err, cls))
        return _error(kind, str(err) if kind == "autoloop" else err.message)
    except Exception as err:  # noqa: BLE001 - any other failure is this call's, said in one line
        return _error("model-call", f"the model worker failed: {type(err).__name__}: {error_line(err)}")


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"kind": kind, "message": message}}


def _die_with(runner: int) -> None:
    """Asks the kernel to kill this process when its parent dies; exits now if the runner is already gone."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError) as err:
            logger.debug("no parent-death signal: %s", err)
    if os.getppid() != runner:
        raise SystemExit(0)  # the runner died before the kernel was asked: it would never be told


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
