"""Lanes: the k long-lived processes of a run without a barrier, each running one slot's iteration at a time.

A lane's process runs the iterations it is handed one after the other, so its imports are paid once;
a lane whose process dies (killed, out of memory) loses only the iteration it was running, and the
next slot started on it gets a new process. Each lane process leads its own process group: Ctrl-C at
the terminal reaches the run, which decides whether the slots in flight finish or are abandoned.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from autoloop_py.errors import AutoloopError
from autoloop_py.loop.iteration.iteration import IterationOutcome, run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import Program
from autoloop_py.sandbox.runner import Terminated, sigterm_interrupts

log = logging.getLogger(__name__)

STOP_SECONDS = 10.0  # how long an idle lane may take to leave before it is terminated


@dataclass(frozen=True)
class Finished:
    """A lane whose iteration ended.

    Attributes:
      lane: the lane's index.
      account: the iteration's account (None when its process gave none).
      failure: why there is no account: the exception the iteration raised, or how its process died.
      setting: the failure is an AutoloopError (a setting, a refused repository: every slot would fail alike).
    """

    lane: int
    account: IterationOutcome | None
    failure: str | None = None
    setting: bool = False


class Lanes:
    """k lane processes; `start` hands a lane an iteration, `wait` returns the lanes whose iteration ended."""

    def __init__(self, count: int, start_method: Callable[[], str]) -> None:
        """start_method: returns how to start a lane's process now (fork, spawn), asked at each start."""
        self._start_method = start_method
        self._processes: list[BaseProcess | None] = [None] * count
        self._pipes: list[Connection | None] = [None] * count
        self.busy: set[int] = set()

    def __enter__(self) -> Lanes:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    @property
    def count(self) -> int:
        """How many lanes there are."""
        return len(self._processes)

    def free(self) -> int | None:
        """Returns the lowest lane not running an iteration (None when all are busy)."""
        return next((lane for lane in range(len(self._processes)) if lane not in self.busy), None)

    def start(self, lane: int, root: Path, program: Program, options: RunOptions) -> None:
        """Hands the lane one iteration (a new process when the lane has none or its process died)."""
        process, pipe = self._processes[lane], self._pipes[lane]
        if process is None or pipe is None or not process.is_alive():
            context = multiprocessing.get_context(self._start_method())
            pipe, child = context.Pipe()
            process = context.Process(target=_serve, args=(child,), name=f"autoloop-lane-{lane}", daemon=True)
            process.start()
            child.close()
            self._processes[lane], self._pipes[lane] = process, pipe
        pipe.send((root, program, options))
        self.busy.add(lane)

    def wait(self) -> list[Finished]:
        """Blocks until at least one busy lane's iteration ended; returns those, in lane order."""
        watched: dict[Any, int] = {}
        for lane in self.busy:
            process, pipe = self._processes[lane], self._pipes[lane]
            assert process is not None and pipe is not None
            watched[pipe] = lane
            watched[process.sentinel] = lane
        ready = {watched[item] for item in wait(list(watched))}
        finished = [self._result(lane) for lane in sorted(ready)]
        self.busy.difference_update(f.lane for f in finished)
        return finished

    def _result(self, lane: int) -> Finished:
        process, pipe = self._processes[lane], self._pipes[lane]
        assert process is not None and pipe is not None
        try:
            kind, value = pipe.recv()
        except (EOFError, OSError):
            process.join(STOP_SECONDS)
            self._processes[lane] = self._pipes[lane] = None
            return Finished(lane, None, f"the slot's process died (exit code {process.exitcode})")
        if kind == "done":
            return Finished(lane, value)
        return Finished(lane, None, value, setting=kind == "setting")

    def abandon(self) -> list[int]:
        """Terminates the lanes still running an iteration; returns them."""
        lanes = sorted(self.busy)
        for lane in lanes:
            process = self._processes[lane]
            if process is not None:
                process.terminate()
        for lane in lanes:
            process = self._processes[lane]
            if process is not None:
                process.join(STOP_SECONDS)
            self._processes[lane] = self._pipes[lane] = None
        self.busy.clear()
        return lanes

    def close(self) -> None:
        """Lets every idle lane leave and terminates the busy ones (whose iterations are abandoned)."""
        self.abandon()
        for pipe in self._pipes:
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.send(None)
                pipe.close()
        for process in self._processes:
            if process is not None:
                process.join(STOP_SECONDS)
                if process.is_alive():
                    process.terminate()
                    process.join(STOP_SECONDS)
        self._processes = [None] * len(self._processes)
        self._pipes = [None] * len(self._pipes)


def _serve(pipe: Connection) -> None:
    """A lane's process: runs each iteration it receives and sends back its account, until told to stop."""
    os.setpgrp()  # the terminal's Ctrl-C goes to the run, which decides about the slots in flight
    # Terminated: the run abandoned the slot; the iteration unwound (its finally blocks ran), the lane leaves quietly.
    with contextlib.suppress(Terminated), sigterm_interrupts():
        while True:
            try:
                job = pipe.recv()
            except EOFError:
                return  # the run is gone
            if job is None:
                return
            root, program, options = job
            try:
                reply: tuple[str, object] = ("done", run_iteration(root, program, options))
            except AutoloopError as err:
                reply = ("setting", str(err))
            except Exception as err:  # noqa: BLE001 - the run records the slot as an error and goes on
                log.exception("the slot's iteration failed")
                reply = ("failed", f"{type(err).__name__}: {err}")
            pipe.send(reply)
