"""End to end: `autoloop run --parallel 2` keeps two slots in flight and records each as soon as it ends.

The evaluation appends to a log outside the worktree (so it runs unsandboxed, `isolation: none`): the
first candidate to start holds its evaluation until two other evaluations ended, so the order of the
log and of the records shows that a fast slot was recorded, and a new slot started and ended, while
the slow one was still running, without timing anything. A slot whose process dies, or whose
iteration raises, is recorded as an error and the run goes on.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.terminal import EXIT_INTERRUPT
from autoloop_py.commands.common import format_metric
from autoloop_py.errors import AutoloopError
from autoloop_py.loop.iteration.iteration import IterationOutcome, run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.record import island_claims
from autoloop_py.loop.slots import async_slots, lanes
from autoloop_py.program.model import load_program
from autoloop_py.state import file as statefile
from autoloop_py.state.population import population_of
from tests.conftest import GitRunner
from tests.e2e.test_publish import _relist
from tests.e2e.test_publish_strategies import STRATEGIES, _number_the_caps
from tests.programs import install_strategy_program

NAME = "slow_and_fast"
PROGRAM_MD = """\
---
evaluation-timeout: 300
isolation: none
novelty_filter: false
---

# Slow and fast

## Goal

Bring x near 4.

## Target

- `code/value.py`

Do NOT modify:
- `code/evaluate.py`

## Evaluation

```bash
cd "$AUTOLOOP_PROGRAM_DIR" && python3 code/evaluate.py
```

The metric is `score`. Higher is better.
"""
VALUE = "# EVOLVE-BLOCK-START\nx = 1.5\n# EVOLVE-BLOCK-END\n"
EVALUATE = """\
import json, os, runpy, subprocess, time
x = runpy.run_path("code/value.py")["x"]
if x != 1.5:  # a slot's candidate (the unchanged code is the baseline)
    try:
        os.close(os.open({claim!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        slow = True  # the first candidate to start
    except FileExistsError:
        slow = False
    with open({log!r}, "a") as log:
        log.write(f"{{'slow' if slow else 'fast'}}-start {{x!r}}\\n")
    def recorded():  # the slots origin's memory branch holds a record of
        shown = subprocess.run(["git", "--git-dir", {origin!r}, "log", "--format=%s", "memory/autoloop"],
                               capture_output=True, text=True).stdout
        return shown.count("tick of 1")
    waited = time.time() + 240  # a bound for a broken run, not a measure: the test asserts the order of things
    while slow and time.time() < waited and recorded() < 2:
        time.sleep(0.05)
    with open({log!r}, "a") as log:
        log.write(f"{{'slow' if slow else 'fast'}}-end {{x!r}}\\n")
print(json.dumps({{"score": -abs(x - 4)}}))
"""


# The Ctrl-C tests: each candidate's evaluation holds until the test writes the `go` file.
GATED = """\
import json, os, runpy, time
x = runpy.run_path("code/value.py")["x"]
if x != 1.5:  # a slot's candidate (the unchanged code is the baseline)
    with open({log!r}, "a") as log:
        log.write("start\\n")
    waited = time.time() + 240  # a bound for a broken test, not a measure
    while not os.path.exists({go!r}) and time.time() < waited:
        time.sleep(0.05)
print(json.dumps({{"score": -abs(x - 4)}}))
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _setup(git_repo: Path, run_git: GitRunner, tmp_path: Path, evaluate: str = EVALUATE) -> tuple[Path, Path, Path]:
    """Commits the program, makes a bare origin and a clone of it; returns (origin, clone, evaluation log)."""
    log = tmp_path / "evaluations.log"
    folder = git_repo / ".autoloop/programs" / NAME
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(PROGRAM_MD)
    (folder / "code/value.py").write_text(VALUE)
    (folder / "code/evaluate.py").write_text(evaluate.format(log=str(log), claim=str(tmp_path / "slow.claim"),
                                                          origin=str(tmp_path / "origin.git"), go=str(tmp_path / "go")))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "program")
    origin = tmp_path / "origin.git"
    _git(tmp_path, "clone", "-q", "--bare", str(git_repo), str(origin))
    work = tmp_path / "work"
    _git(tmp_path, "clone", "-q", str(origin), str(work))
    for key, value in (("user.name", "t"), ("user.email", "t@example.invalid")):
        _git(work, "config", key, value)
    return origin, work, log


def _state(origin: Path) -> statefile.StateFile:
    return statefile.parse_state(_git(origin, "show", f"memory/autoloop:{NAME}.md") + "\n", f"{NAME}.md")


def _check_records(origin: Path, count: int) -> statefile.StateFile:
    """Asserts the records are unique and consecutive, each under its own key, and the branch holds the best."""
    state = _state(origin)
    assert state.machine.iteration_count == count
    numbers = [e.iteration for e in state.history]
    assert sorted(numbers) == list(range(1, count + 1))
    keys = [e.key or "" for e in state.history]
    assert len(set(keys)) == count and [int(k.split(":")[1]) for k in keys] == numbers
    statefile.parse_state(statefile.render_state(state), f"{NAME}.md")
    # The memory branch took one commit per slot, newest record last.
    subjects = _git(origin, "log", "--reverse", "--format=%s", "memory/autoloop").splitlines()
    assert [s.split("(iterations ")[1].split("–")[0] for s in subjects if "tick of 1" in s] == [
        str(n) for n in range(1, count + 1)]
    branch = _git(origin, "show", f"autoloop/{NAME}:.autoloop/programs/{NAME}/code/value.py")
    kept = runpy.run_path(str(_write(origin.parent / "kept.py", branch)))["x"]
    assert state.machine.best_metric == pytest.approx(-abs(kept - 4), rel=1e-5)
    return state


def _write(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    return path


def test_a_fast_slot_is_recorded_and_another_starts_while_a_slow_one_runs(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    origin, work, log = _setup(git_repo, run_git, tmp_path)
    assert main(["run", "--repo", str(work), "--program", NAME, "--parallel", "2", "--iterations", "3"]) == 0
    lines = log.read_text().splitlines()
    assert sum(line.startswith("slow-start") for line in lines) == 1
    slow_end = next(i for i, line in enumerate(lines) if line.startswith("slow-end"))
    # While the slow slot ran, two fast ones ran whole and were recorded: the second started on the freed lane.
    assert [line.split()[0] for line in lines[:slow_end]].count("fast-end") == 2
    assert [line.split()[0] for line in lines[:slow_end]].count("fast-start") == 2
    state = _check_records(origin, 3)
    slow_x = float(lines[slow_end].split()[1])
    newest = state.history[0]  # the slow slot, launched first, was recorded last
    assert newest.iteration == 3 and newest.metric == pytest.approx(-abs(slow_x - 4), rel=1e-5)
    out = capsys.readouterr().out
    lines_out = [out.index(f"{NAME} · iteration {n}") for n in (1, 2, 3)]
    assert lines_out == sorted(lines_out)  # each slot printed as it was recorded
    # The slot launched after the first record read the state that holds it: it was judged against its best.
    first = state.history[-1]
    best = first.metric if first.status == "accepted" else state.machine.initial_metric
    second = next(line for line in out.splitlines() if f"{NAME} · iteration 2 ·" in line)
    assert f"(best was {format_metric(best)})" in second, (second, best)
    assert main(["status", "--repo", str(work)]) == 0


def test_a_slot_whose_process_dies_or_raises_is_an_error_and_the_run_goes_on(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin, work, log = _setup(git_repo, run_git, tmp_path)
    (tmp_path / "slow.claim").write_text("")  # no slow slot here

    def hostile(root, program, options, *args, **kwargs):  # type: ignore[no-untyped-def]
        if options.slot.launch == 1:
            os._exit(9)  # the lane's process dies mid-slot
        if options.slot.launch == 2:
            raise RuntimeError("the slot's iteration broke")
        return run_iteration(root, program, options, *args, **kwargs)

    monkeypatch.setattr(lanes, "run_iteration", hostile)
    monkeypatch.setattr(async_slots, "start_method", lambda: "fork")  # the lanes inherit the hostile iteration
    assert main(["run", "--repo", str(work), "--program", NAME, "--parallel", "2", "--iterations", "5"]) == 0
    state = _check_records(origin, 5)
    errors = sorted(e.text for e in state.history if e.status == "error")
    assert len(errors) == 2
    assert any("slot 1 (lane" in text and "process died (exit code 9)" in text for text in errors), errors
    assert any("slot 2 (lane" in text and "RuntimeError: the slot's iteration broke" in text for text in errors), errors
    assert sum(e.status in ("accepted", "rejected") for e in state.history) == 3  # the siblings were unaffected
    assert log.read_text().count("fast-end") == 3
    assert main(["status", "--repo", str(work)]) == 0


def _launching(monkeypatch: pytest.MonkeyPatch, launches: Path, stop_at: int, stop: Exception | str) -> None:
    """Makes launch `stop_at` raise `stop` (an exception) or return a budget pause (a reason), as forked lanes run it;
    every launch is noted in `launches`."""

    def iteration(root, program, options, *args, **kwargs):  # type: ignore[no-untyped-def]
        with open(launches, "a") as log:
            log.write(f"{options.slot.launch}\n")
        if options.slot.launch == stop_at:
            if isinstance(stop, Exception):
                raise stop
            return IterationOutcome(program.name, 0, "paused", "no model call", None, None, reason=stop)
        return run_iteration(root, program, options, *args, **kwargs)

    monkeypatch.setattr(lanes, "run_iteration", iteration)
    monkeypatch.setattr(async_slots, "start_method", lambda: "fork")


def test_a_setting_every_slot_trips_on_stops_the_launches_and_the_slots_in_flight_are_recorded(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    origin, work, _ = _setup(git_repo, run_git, tmp_path)
    (tmp_path / "slow.claim").write_text("")
    launches = tmp_path / "launches.log"
    _launching(monkeypatch, launches, 2, AutoloopError("no model is set for this program"))
    assert main(["run", "--repo", str(work), "--program", NAME, "--parallel", "2", "--iterations", "8"]) == 1
    assert "no model is set for this program" in capsys.readouterr().err
    started = launches.read_text().split()
    assert "2" in started and len(started) < 8  # nothing launched once the setting failed
    _check_records(origin, len(started) - 1)  # every other launch was recorded, the one in flight included


def test_a_budget_pause_stops_the_launches_and_the_slots_in_flight_are_recorded(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    origin, work, _ = _setup(git_repo, run_git, tmp_path)
    (tmp_path / "slow.claim").write_text("")
    launches = tmp_path / "launches.log"
    _launching(monkeypatch, launches, 2, "the daily budget of $1 is spent")
    assert main(["run", "--repo", str(work), "--program", NAME, "--parallel", "2", "--iterations", "8"]) == 0
    assert f"stopping: {NAME} is paused: the daily budget of $1 is spent" in capsys.readouterr().out
    started = launches.read_text().split()
    assert "2" in started and len(started) < 8
    _check_records(origin, len(started) - 1)


def _interrupted_run(work: Path, log: Path) -> subprocess.Popen[str]:
    """Starts `autoloop run --parallel 2` and returns it once both slots' candidates are being evaluated."""
    run = subprocess.Popen([sys.executable, "-m", "autoloop_py", "run", "--repo", str(work), "--program", NAME,
                            "--parallel", "2", "--iterations", "6"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    waited = time.time() + 240  # a bound for a broken run, not a measure
    while (not log.exists() or log.read_text().count("start") < 2) and run.poll() is None and time.time() < waited:
        time.sleep(0.05)
    assert log.read_text().count("start") == 2
    return run


def _wait_for_both_starts(log: Path) -> None:
    """Returns once both slots' candidates are being evaluated (or after a bound for a broken run)."""
    waited = time.time() + 240  # a bound, not a measure
    while (not log.exists() or log.read_text().count("start") < 2) and time.time() < waited:
        time.sleep(0.05)


def _read_until(run: subprocess.Popen[str], text: str) -> str:
    assert run.stdout is not None
    seen = ""
    for line in run.stdout:
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"{text!r} never came:\n{seen}")


def test_the_first_ctrl_c_stops_the_launches_and_records_the_slots_in_flight(
    git_repo: Path, run_git: GitRunner, tmp_path: Path
) -> None:
    origin, work, log = _setup(git_repo, run_git, tmp_path, GATED)
    run = _interrupted_run(work, log)
    run.send_signal(signal.SIGINT)
    seen = _read_until(run, "slot(s) in flight are recorded when they end")
    (tmp_path / "go").write_text("")  # the two evaluations end
    seen += run.communicate(timeout=600)[0]
    assert run.returncode == EXIT_INTERRUPT, seen
    assert log.read_text().count("start") == 2  # no slot started after the Ctrl-C
    _check_records(origin, 2)


def test_a_second_ctrl_c_abandons_the_slots_in_flight_and_names_them(
    git_repo: Path, run_git: GitRunner, tmp_path: Path
) -> None:
    origin, work, log = _setup(git_repo, run_git, tmp_path, GATED)
    run = _interrupted_run(work, log)
    try:
        run.send_signal(signal.SIGINT)
        _read_until(run, "slot(s) in flight are recorded when they end")
        run.send_signal(signal.SIGINT)
        seen = run.communicate(timeout=600)[0]
    finally:
        (tmp_path / "go").write_text("")  # nothing of the test waits on after it
    assert run.returncode == EXIT_INTERRUPT, seen
    assert "abandoned slot 0 (lane" in seen and "abandoned slot 1 (lane" in seen
    assert "Traceback" not in seen  # a terminated lane leaves quietly
    memory = _git(origin, "for-each-ref", "--format=%(refname)", "refs/heads/memory/autoloop")
    assert not memory or "tick of 1" not in _git(origin, "log", "--format=%s", "memory/autoloop")


def test_a_second_ctrl_c_while_the_first_is_being_told_still_abandons_and_names_the_slots(
    git_repo: Path, run_git: GitRunner, tmp_path: Path
) -> None:
    origin, work, log = _setup(git_repo, run_git, tmp_path, GATED)
    program = load_program(work, Path(".autoloop/programs") / NAME / "program.md")
    told: list[str] = []

    def say(text: str) -> None:  # the second Ctrl-C lands while the first one's message is being printed
        told.append(text)
        if text.startswith("stopping:"):
            raise KeyboardInterrupt

    def first_ctrl_c() -> None:
        _wait_for_both_starts(log)
        signal.pthread_kill(runner, signal.SIGINT)  # the main thread's wait for the lanes is interrupted, as at a terminal

    runner = threading.get_ident()  # the test's thread, which runs the slots
    threading.Thread(target=first_ctrl_c, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            async_slots.run_slots(work, program, 6, 2, RunOptions(), say=say)
    finally:
        (tmp_path / "go").write_text("")
    assert told[0].startswith("stopping: 2 slot(s) in flight")
    assert sorted(told[1:]) == [f"abandoned slot {n} (lane {n}): it was interrupted, nothing of it was recorded"
                                for n in (0, 1)]
    assert log.read_text().count("start") == 2
    memory = _git(origin, "for-each-ref", "--format=%(refname)", "refs/heads/memory/autoloop")
    assert not memory or "tick of 1" not in _git(origin, "log", "--format=%s", "memory/autoloop")


def test_a_ctrl_c_while_a_slot_is_being_recorded_lets_that_record_finish(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin, work, log = _setup(git_repo, run_git, tmp_path, GATED)
    program = load_program(work, Path(".autoloop/programs") / NAME / "program.md")
    publish, runner = async_slots.publish_tick, threading.get_ident()
    told: list[str] = []

    def interrupted_publish(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not told:
            told.append("record started")
            signal.pthread_kill(runner, signal.SIGINT)  # the Ctrl-C lands as the first record begins
            time.sleep(0.1)  # it is handled before the record is made
        return publish(*args, **kwargs)

    def go() -> None:
        _wait_for_both_starts(log)
        (tmp_path / "go").write_text("")

    monkeypatch.setattr(async_slots, "publish_tick", interrupted_publish)
    threading.Thread(target=go, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            async_slots.run_slots(work, program, 6, 2, RunOptions(), say=told.append)
    finally:
        (tmp_path / "go").write_text("")
    assert any(text.startswith("stopping:") for text in told), told
    assert log.read_text().count("start") == 2  # nothing started after the Ctrl-C
    _check_records(origin, 2)  # the record it interrupted was made, and the other slot in flight recorded too


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_slots_of_a_strategy_without_a_barrier_each_join_the_population_under_their_own_number(
    strategy: str, git_repo: Path, run_git: GitRunner, tmp_path: Path
) -> None:
    pytest.importorskip("numpy")  # function_minimization's evaluation
    pointer, config = STRATEGIES[strategy]
    program = ".autoloop/programs/function_minimization"
    install_strategy_program(git_repo, run_git, program, strategy, pointer, config)
    if strategy == "alphaevolve":
        _number_the_caps(git_repo / program / "strategy/alphaevolve.md")
        run_git(git_repo, "commit", "-qam", "caps")
    origin = tmp_path / "origin.git"
    _git(tmp_path, "clone", "-q", "--bare", str(git_repo), str(origin))
    work = tmp_path / "work"
    _git(tmp_path, "clone", "-q", str(origin), str(work))
    assert main(["run", "--repo", str(work), "--program", "function_minimization", "--proposer", "tune",
                 "--parallel", "2", "--iterations", "4"]) == 0
    name = "function_minimization.md"
    state = statefile.parse_state(_git(origin, "show", f"memory/autoloop:{name}") + "\n", name)
    assert sorted(e.iteration for e in state.history) == [1, 2, 3, 4] == sorted(
        int((e.key or "::").split(":")[1]) for e in state.history)
    # Every candidate a slot evaluated joined the Population, under the number it was recorded as.
    evaluated = {e.iteration for e in state.history if e.metric is not None}
    assert evaluated and evaluated <= {c.gen for c in population_of(state).candidates}
    accepted = [e.metric for e in state.history if e.status == "accepted" and e.metric is not None]
    assert state.machine.best_metric == (max(accepted) if accepted else state.machine.initial_metric)


def test_adaevolve_slots_without_a_barrier_keep_off_the_islands_the_slots_in_flight_claimed(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("numpy")  # function_minimization's evaluation
    pointer, config = STRATEGIES["adaevolve"]
    install_strategy_program(git_repo, run_git, ".autoloop/programs/function_minimization", "adaevolve", pointer,
                             config)
    origin = tmp_path / "origin.git"
    _git(tmp_path, "clone", "-q", "--bare", str(git_repo), str(origin))
    work = tmp_path / "work"
    _git(tmp_path, "clone", "-q", str(origin), str(work))
    seen = tmp_path / "islands.log"

    def noted(root, program, options, *args, **kwargs):  # type: ignore[no-untyped-def]
        outcome = run_iteration(root, program, options, *args, **kwargs)
        worked = island_claims.claimed([options.outcome_dir])
        with open(seen, "a") as log:
            log.write(json.dumps([options.slot.launch, list(options.slot.busy), list(worked)]) + "\n")
        return outcome

    monkeypatch.setattr(lanes, "run_iteration", noted)
    monkeypatch.setattr(async_slots, "start_method", lambda: "fork")  # the lanes inherit the noting iteration
    assert main(["run", "--repo", str(work), "--program", "function_minimization", "--proposer", "tune",
                 "--parallel", "2", "--iterations", "6"]) == 0
    launches = [json.loads(line) for line in seen.read_text().splitlines()]
    assert len(launches) == 6 and all(len(worked) == 1 for _, _, worked in launches)
    assert all(worked[0] not in busy for _, busy, worked in launches)  # 2 slots, 2+ islands: one is always free
    assert any(busy for launch, busy, _ in launches if launch >= 2)  # the later ones started beside a claim


def test_no_slot_starts_in_the_jobs_last_minutes_and_the_slots_in_flight_are_recorded(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    origin, work, _ = _setup(git_repo, run_git, tmp_path)
    (tmp_path / "slow.claim").write_text("")
    monkeypatch.setenv("AUTOLOOP_JOB_TIMEOUT_MINUTES", "60")
    asked: list[int] = []

    class Clock:  # the run's clock as the slots' launches read it: the job's time is up after the first two
        @staticmethod
        def monotonic() -> float:
            asked.append(1)
            return 0.0 if len(asked) <= 2 else float("inf")

    monkeypatch.setattr(async_slots, "time", Clock)
    assert main(["run", "--repo", str(work), "--program", NAME, "--parallel", "2", "--iterations", "6"]) == 0
    assert "stopping: the job's time is nearly up" in capsys.readouterr().out
    _check_records(origin, 2)


def test_a_slot_that_forges_its_outcome_is_refused_alone_and_nothing_of_it_lands(
    git_repo: Path, run_git: GitRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin, work, _ = _setup(git_repo, run_git, tmp_path)
    (tmp_path / "slow.claim").write_text("")
    forged = f".autoloop/programs/{NAME}/code/evaluate.py"  # outside the Target: the evaluation itself

    def forging(root, program, options, *args, **kwargs):  # type: ignore[no-untyped-def]
        account = run_iteration(root, program, options, *args, **kwargs)
        if options.slot.launch == 1:  # candidate code that reached the slot's outcome rewrites the evaluation
            _relist(options.outcome_dir, forged, b"print('{\"score\": 1e9}')\n")
        return account

    monkeypatch.setattr(lanes, "run_iteration", forging)
    monkeypatch.setattr(async_slots, "start_method", lambda: "fork")
    assert main(["run", "--repo", str(work), "--program", NAME, "--parallel", "2", "--iterations", "4"]) == 0
    state = _check_records(origin, 4)
    refused = [e for e in state.history if "left an outcome that was refused" in e.text]
    assert len(refused) == 1 and refused[0].status == "error" and "slot 1 (lane" in refused[0].text
    assert sum(e.status in ("accepted", "rejected") for e in state.history) == 3  # its siblings were recorded
    assert "1e9" not in _git(origin, "log", "--all", "-p", "--", forged)
    assert state.machine.best_metric is not None and state.machine.best_metric <= 0
