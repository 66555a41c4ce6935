"""The runner's own process: not readable by other processes of its user, and stopped cleanly by SIGTERM."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import signal
import sys
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator

logger = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: unwinds like Ctrl-C, so the running evaluation's group is killed on the way out."""


def make_non_dumpable() -> bool:
    """Makes this process non-dumpable (Linux): other processes of the user cannot read its /proc/*/environ or memory.

    Returns whether it worked (False on other systems).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            logger.warning("could not make the runner non-dumpable: errno %d", ctypes.get_errno())
            return False
        return libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError) as err:
        logger.warning("could not make the runner non-dumpable: %s", err)
        return False


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Turns SIGTERM into Terminated (a KeyboardInterrupt) while inside; a no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def first_interrupt_deferred() -> Iterator[None]:
    """Holds a first Ctrl-C back until the block ends, then raises it; a second one inside raises at once.

    A record is then never cut in half by the Ctrl-C that asked for it to be made; a user who insists
    still gets out. A no-op off the main thread (signals reach only the main one).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if caught:
            raise KeyboardInterrupt
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
