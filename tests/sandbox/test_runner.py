"""Tests for autoloop_py.sandbox.runner: the runner's own process and how signals stop it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from autoloop_py.sandbox.runner import Terminated, first_interrupt_deferred, sigterm_interrupts


def _ctrl_c() -> None:
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)


def test_a_first_ctrl_c_is_held_until_the_block_ends_then_raised() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt):
        with first_interrupt_deferred():
            _ctrl_c()
            done.append("the rest of the block ran")
    assert done == ["the rest of the block ran"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the usual handler is back


def test_a_second_ctrl_c_inside_the_block_raises_at_once() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt):
        with first_interrupt_deferred():
            _ctrl_c()
            _ctrl_c()
            done.append("not reached")
    assert done == []


def test_a_block_without_ctrl_c_raises_nothing() -> None:
    with first_interrupt_deferred():
        pass


def test_sigterm_unwinds_as_terminated() -> None:
    with pytest.raises(Terminated):
        with sigterm_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between bytecodes
                pass
