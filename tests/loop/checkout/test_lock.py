"""Tests for lock.py: one run of a program at a time per repository."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from autoloop_py.errors import AutoloopError
from autoloop_py.loop.checkout.lock import held_program_lock, others_running, program_lock, taken_by


def test_second_holder_waits_for_the_first(git_repo: Path) -> None:
    events: list[str] = []

    def second() -> None:
        with program_lock(git_repo, "demo", wait=5, poll=0.01):
            events.append("second in")

    with program_lock(git_repo, "demo") as path:
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.2)
        events.append("first out")
        assert path.name == "demo.lock" and ".git" in path.parts
    thread.join(5)
    assert events == ["first out", "second in"]


def test_gives_up_with_a_clear_error(git_repo: Path) -> None:
    with program_lock(git_repo, "demo"):
        with pytest.raises(AutoloopError, match="another autoloop run of 'demo' holds .* for more than 0.1 s"):
            with program_lock(git_repo, "demo", wait=0.1, poll=0.02):
                pass


def test_other_programs_do_not_wait(git_repo: Path) -> None:
    with program_lock(git_repo, "one"):
        with program_lock(git_repo, "two", wait=0):
            pass


def test_a_program_named_worktrees_does_not_wait_for_itself(git_repo: Path) -> None:
    # Its program lock was the worktree lock itself: `git worktree add` under it waited forever.
    from autoloop_py.git.command import open_repo
    from autoloop_py.loop.checkout.workspace import worktree_admin

    entered = threading.Event()

    def admin() -> None:
        with worktree_admin(open_repo(git_repo)):
            entered.set()

    with program_lock(git_repo, "worktrees", wait=0):
        thread = threading.Thread(target=admin, daemon=True)
        thread.start()
        thread.join(30)  # a guard against hanging the suite, not a timing assertion
        assert entered.is_set()


def test_a_held_lock_says_whether_it_waited_for_another_run(git_repo: Path) -> None:
    with held_program_lock(git_repo, "demo") as held:
        assert not held.waited and held.path.name == "demo.lock"
    seen: list[bool] = []

    def second() -> None:
        with held_program_lock(git_repo, "demo", wait=5, poll=0.01) as other:
            seen.append(other.waited)

    with program_lock(git_repo, "demo"):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.1)
    thread.join(5)
    assert seen == [True]


def test_others_running_names_the_programs_whose_lock_is_held_now(git_repo: Path) -> None:
    assert others_running(git_repo, "mine") == frozenset()
    with program_lock(git_repo, "mine"), program_lock(git_repo, "other"):
        with program_lock(git_repo, "done"):
            pass
        # This program's own lock is never another run; a released one is none.
        assert others_running(git_repo, "mine") == frozenset({"other"})
    assert others_running(git_repo, "mine") == frozenset()
    with program_lock(git_repo, "other", wait=0.1):  # the probes left no lock behind
        pass


def test_others_running_also_names_a_run_that_took_its_lock_since_and_is_gone(git_repo: Path) -> None:
    start = time.time()
    with program_lock(git_repo, "quick"):
        pass
    assert others_running(git_repo, "mine") == frozenset()
    assert others_running(git_repo, "mine", since=start) == frozenset({"quick"})


def test_taken_by_names_the_process_that_holds_or_took_the_lock(git_repo: Path) -> None:
    start = time.time()
    assert not taken_by(git_repo, "prog", os.getpid(), start)  # never taken
    with program_lock(git_repo, "prog"):
        assert taken_by(git_repo, "prog", os.getpid(), start)
        assert not taken_by(git_repo, "prog", os.getpid() + 1, start)  # another process's
    assert taken_by(git_repo, "prog", os.getpid(), start)  # taken since start
    assert not taken_by(git_repo, "prog", os.getpid(), time.time() + 60)  # not since a later time, not held


def test_a_held_lock_names_the_process_that_took_it_last_before(git_repo: Path) -> None:
    with held_program_lock(git_repo, "demo") as held:
        assert held.previous is None  # never taken before
    with held_program_lock(git_repo, "demo") as held:
        assert held.previous == os.getpid()
    held.path.write_text("4242\n")  # another run took it meanwhile (it writes its pid when it takes it)
    with held_program_lock(git_repo, "demo") as held:
        assert held.previous == 4242
    assert held.path.read_text() == f"{os.getpid()}\n"
