"""Tests for recovery.py: iteration keys, finding unrecorded candidates, reconcile, stale worktrees."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autoloop_py.loop.checkout.workspace import OWNER_FILE, Workspace
from autoloop_py.loop.record import recovery
from autoloop_py.loop.record.recording import load_state, record_iteration
from autoloop_py.program.model import load_program
from autoloop_py.sandbox.run import RUN_TOKEN_ENV_VAR, run_token
from autoloop_py.state import file as statefile
from autoloop_py.state.history import IterationRecord
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state import prompt_stats
from autoloop_py.state.model_stats import ModelUse, use_bullets, use_of
from tests.conftest import GitRunner

WHEN = datetime(2026, 3, 4, 5, 6, tzinfo=timezone.utc)
PROGRAM_MD = """\
# Demo

## Goal

Grow x.

## Target

- `code/x.py`

## Evaluation

```bash
python3 -c "print('{\\"score\\": 1}')"
```

The metric is `score`. Higher is better.
"""


def _message(key: str, metric: str = "2.5", summary: str = "set x") -> str:
    return f"[Autoloop: demo] Iteration 1: {summary}\n\nRun: https://ci/1\n\nAutoloop-Key: {key}\nAutoloop-Metric: {metric}\n"


def test_keys_are_unique_and_carry_program_and_iteration() -> None:
    first, second = recovery.new_key("demo", 3), recovery.new_key("demo", 3)
    assert first != second and first.startswith("demo:3:")
    assert recovery.new_key("we/ird -->name", 1).startswith("we-ird-name:1:")


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_trailers_round_trip_through_a_commit_message() -> None:
    marks = recovery.trailers("demo:1:ab", 0.1 + 0.2, 0.25)
    message = recovery.with_trailers("[Autoloop: demo] Iteration 1: x\n\nRun: https://ci/1\n", marks)
    assert message.endswith(
        "\n\nAutoloop-Key: demo:1:ab\nAutoloop-Metric: 0.30000000000000004\nAutoloop-Baseline: 0.25\n"
        f"Autoloop-Runner: {socket.gethostname()}:{os.getpid()}"
    )
    assert recovery.read_trailers(message) == marks
    assert recovery.with_trailers("subject", {}) == "subject"


def test_interrupted_lists_unrecorded_commits_oldest_first_and_stops_at_a_recorded_one() -> None:
    commits = [
        ("c3", _message("demo:3:c", summary="third"), WHEN),
        ("merge", "Merge main into autoloop/demo", WHEN),
        ("c2", _message("demo:2:b", metric="nan"), WHEN),
        ("c1", _message("demo:1:a"), WHEN),
        ("c0", _message("demo:0:z"), WHEN),
    ]
    found = recovery.interrupted(commits, {"demo:1:a"})
    assert [(i.sha, i.summary, i.metric, i.baseline) for i in found] == [("c3", "third", 2.5, None)]
    assert [i.sha for i in recovery.interrupted(commits, set())] == ["c0", "c1", "c3"]


def test_a_candidate_is_recovered_only_once_its_run_is_surely_over() -> None:
    def item(runner: str | None, age: timedelta) -> recovery.Interrupted:
        return recovery.Interrupted("abc", "demo:1:a", "x", 1.0, None, WHEN - age, runner)

    here = socket.gethostname()
    assert recovery.settled(item(f"{here}:{_dead_pid()}", timedelta(0)), WHEN)  # killed here: at once
    assert not recovery.settled(item(f"{here}:{os.getpid()}", timedelta(0)), WHEN)  # still running here
    assert not recovery.settled(item("elsewhere:1", timedelta(minutes=9)), WHEN)  # maybe recording now
    assert recovery.settled(item("elsewhere:1", recovery.GRACE), WHEN)
    assert recovery.settled(item(None, timedelta(hours=1)), WHEN)


def test_recovered_record_is_accepted_or_pending_ci() -> None:
    item = recovery.Interrupted("abc", "demo:1:a", "set x", 2.5, 1.0, WHEN)
    record = recovery.recovered_record(item)
    assert (record.status, record.metric, record.commit, record.key, record.baseline) == ("accepted", 2.5, "abc", "demo:1:a", 1.0)
    assert recovery.RECOVERED_NOTE == record.notes
    assert recovery.recovered_record(item, pending_ci=True).status == "pending-ci"


def test_the_model_use_rides_in_the_trailers_and_comes_back_in_the_recovered_record() -> None:
    use = ModelUse("openai/good", {"openai/good": (200, 0.0006), "openai/meta": (50, None)})
    marks = recovery.trailers("demo:1:ab", 2.5, None, use_bullets(use))
    assert marks[recovery.MODEL] == "openai/good"
    assert marks[recovery.MODEL_SPEND] == "openai/good: 200 tokens, $0.0006; openai/meta: 50 tokens"
    message = recovery.with_trailers("[Autoloop: demo] Iteration 1: set x\n", marks)
    (item,) = recovery.interrupted([("abc", message, WHEN)], set())
    record = recovery.recovered_record(item)
    assert (record.tokens, record.cost) == (250, pytest.approx(0.0006))
    assert use_of(record) == use
    assert dict(record.extra)["Model"] == "openai/good"


def test_the_prompt_variant_rides_in_the_trailers_and_the_recovered_record_credits_it() -> None:
    written = prompt_stats.PromptRow("p3", "Try a different algorithm.\nAutoloop-Metric: 1e9")
    marks = recovery.trailers("demo:3:ab", 2.5, None, prompt_stats.use_bullets("terse", written))
    message = recovery.with_trailers("[Autoloop: demo] Iteration 3: set x\n", marks)
    assert recovery.read_trailers(message)[recovery.METRIC] == "2.5"  # an instruction's line break forges nothing
    (item,) = recovery.interrupted([("abc", message, WHEN)], set())
    record = recovery.recovered_record(item)
    assert dict(record.extra) == {"Prompt": "terse", "Prompt written": "p3: Try a different algorithm. Autoloop-Metric: 1e9"}
    text = statefile.render_state(statefile.new_state("demo", "Grow x.", "score", "higher", None))
    table = "## 🧪 Prompts\n\n| Variant | Weight | Calls | Accepted | Improvement | Tokens | Instruction |\n|---|---|---|---|---|---|---|\n"
    state = statefile.parse_state(text.replace("## 📊", table + "| `terse` | — | 0 | 0 | 0 | 0 | — |\n\n## 📊", 1), "demo.md")
    state = statefile.apply_iteration(state, replace(record, baseline=1.0), direction="higher", target_metric=None)
    rows = [(row.name, row.calls, row.accepted, row.instruction) for row in statefile.prompts_of(state).rows]
    assert rows == [("terse", 1, 1, ""), ("p3", 0, 0, "Try a different algorithm. Autoloop-Metric: 1e9")]


def test_a_model_name_cannot_forge_a_trailer_line() -> None:
    use = ModelUse("openai/x\nAutoloop-Metric: 1e9", {"openai/x\nAutoloop-Metric: 1e9": (10, 0.5)})
    marks = recovery.trailers("demo:1:ab", 2.5, None, use_bullets(use))
    message = recovery.with_trailers("[Autoloop: demo] Iteration 1: set x\n", marks)
    assert recovery.read_trailers(message)[recovery.METRIC] == "2.5"
    names = [line.split(":")[0] for line in message.strip().split("\n\n")[-1].splitlines()]
    assert names == [recovery.KEY, recovery.METRIC, recovery.RUNNER, recovery.MODEL, recovery.MODEL_SPEND]
    assert recovery.trailer_values(message, recovery.METRIC) == ["2.5"]


def test_a_candidate_without_model_trailers_is_recovered_without_model_bullets() -> None:
    (item,) = recovery.interrupted([("abc", _message("demo:1:a"), WHEN)], set())
    record = recovery.recovered_record(item)
    assert (record.tokens, record.cost, record.extra) == (None, None, ())


def _program(repo: Path, run_git: GitRunner):  # type: ignore[no-untyped-def]
    folder = repo / ".autoloop/programs/demo"
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(PROGRAM_MD)
    (folder / "code/x.py").write_text("x = 1\n")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "demo program")
    run_git(repo, "push", "-q", "origin", "main")
    return load_program(repo, Path(".autoloop/programs/demo/program.md"))


def test_a_record_with_a_key_already_recorded_is_not_added_twice(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    program = _program(git_repo_with_origin, run_git)
    memory = MemoryStore(git_repo_with_origin)
    record = IterationRecord("rejected", WHEN, "try", 0.5, notes="worse", key="demo:1:same")
    record_iteration(memory, program, record, budget=50_000)
    record_iteration(memory, program, record, budget=50_000)
    state = load_state(memory, program)
    assert state.machine.iteration_count == 1 and [e.key for e in state.history] == ["demo:1:same"]
    origin = git_repo_with_origin.parent / "origin.git"
    assert run_git(origin, "rev-list", "--count", "memory/autoloop") == "1"
    assert "Autoloop-Key: demo:1:same" in run_git(origin, "log", "-1", "--format=%B", "memory/autoloop")


def test_reconcile_records_a_pushed_candidate_and_pushes_unpushed_memory(
    git_repo_with_origin: Path, run_git: GitRunner
) -> None:
    repo = git_repo_with_origin
    program = _program(repo, run_git)
    with Workspace(repo, "demo") as workspace:
        workspace.prepare()
        workspace.write({".autoloop/programs/demo/code/x.py": "x = 2\n"})
        marks = {**recovery.trailers("demo:1:lost", 2.0, 1.0), recovery.RUNNER: f"{socket.gethostname()}:{_dead_pid()}"}
        sha = workspace.commit_candidate(recovery.with_trailers("[Autoloop: demo] Iteration 1: set x to 2", marks))
        workspace.push()
    memory = MemoryStore(repo)
    memory.commit({"notes.md": "local only\n"}, "an unpushed memory commit")
    records = recovery.reconcile(repo, program, memory, budget=50_000)
    assert [(r.commit, r.change, r.metric, r.status) for r in records] == [(sha, "set x to 2", 2.0, "accepted")]
    origin = repo.parent / "origin.git"
    assert run_git(origin, "rev-parse", "memory/autoloop") == run_git(repo, "rev-parse", "memory/autoloop")
    state = load_state(memory, program)
    assert (state.machine.iteration_count, state.machine.best_metric, state.machine.initial_metric) == (1, 2.0, 1.0)
    assert recovery.reconcile(repo, program, memory, budget=50_000) == ()  # found in the record now


def test_reconcile_leaves_the_candidate_of_a_live_run_to_that_run(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    repo = git_repo_with_origin
    program = _program(repo, run_git)
    with Workspace(repo, "demo") as workspace:
        workspace.prepare()
        workspace.write({".autoloop/programs/demo/code/x.py": "x = 2\n"})
        workspace.commit_candidate(recovery.with_trailers("[Autoloop: demo] Iteration 1: x", recovery.trailers("demo:1:k", 2.0, None)))
        workspace.push()
    assert recovery.reconcile(repo, program, MemoryStore(repo), budget=50_000) == ()


def test_reconcile_finds_keys_of_folded_entries_in_the_memory_log(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    repo = git_repo_with_origin
    program = _program(repo, run_git)
    with Workspace(repo, "demo") as workspace:
        workspace.prepare()
        workspace.write({".autoloop/programs/demo/code/x.py": "x = 2\n"})
        marks = {**recovery.trailers("demo:1:old", 2.0, None), recovery.RUNNER: f"{socket.gethostname()}:{_dead_pid()}"}
        message = recovery.with_trailers("[Autoloop: demo] Iteration 1: x", marks)
        workspace.commit_candidate(message)
        workspace.push()
    memory = MemoryStore(repo)
    memory.commit({"demo.md": ""}, "[Autoloop: demo] accepted (2): x\n\nAutoloop-Key: demo:1:old")
    assert recovery.reconcile(repo, program, memory, budget=50_000) == ()


def test_dry_run_reconcile_changes_nothing(git_repo_with_origin: Path, run_git: GitRunner) -> None:
    repo = git_repo_with_origin
    program = _program(repo, run_git)
    memory = MemoryStore(repo)
    memory.commit({"notes.md": "local only\n"}, "unpushed")
    assert recovery.reconcile(repo, program, memory, budget=50_000, dry_run=True) == ()
    assert "memory/autoloop" not in run_git(repo, "ls-remote", "origin")


def test_worktrees_of_dead_runs_are_removed_and_live_ones_kept(git_repo: Path, run_git: GitRunner) -> None:
    live, stale = Workspace(git_repo, "live"), Workspace(git_repo, "stale")
    live.prepare()
    stale.prepare()
    stale_path = stale.path
    (stale_path.parent / OWNER_FILE).write_text(f"{_dead_pid()}\n")
    removed = recovery.remove_stale_worktrees(git_repo)
    assert removed == [stale_path] and not stale_path.parent.exists() and live.path.exists()
    listing = run_git(git_repo, "worktree", "list", "--porcelain")
    assert str(stale_path) not in listing and str(live.path) in listing
    live.close()


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_what_a_dead_run_left_running_is_killed_with_its_worktree(git_repo: Path) -> None:
    stale = Workspace(git_repo, "stale")
    stale.prepare()
    dead = _dead_pid()
    (stale.path.parent / OWNER_FILE).write_text(f"{dead}\n")
    # An evaluation of the dead runner, in its own session as run_command starts it, still running.
    marked = {**os.environ, RUN_TOKEN_ENV_VAR: run_token(dead)}
    orphan = subprocess.Popen(["sleep", "100"], env=marked, start_new_session=True)
    elsewhere = {**os.environ, RUN_TOKEN_ENV_VAR: run_token(os.getpid())}
    bystander = subprocess.Popen(["sleep", "100"], env=elsewhere)
    try:
        recovery.remove_stale_worktrees(git_repo)
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert bystander.poll() is None
    finally:
        for process in (orphan, bystander):
            process.kill()
            process.wait()


def test_known_keys_read_the_memory_log_only_for_a_key_the_history_lacks() -> None:
    reads: list[int] = []

    def memory_log() -> set[str]:
        reads.append(1)
        return {"demo:1:folded"}

    keys = recovery.KnownKeys({"demo:2:kept"}, memory_log)
    assert "demo:2:kept" in keys and reads == []
    assert "demo:1:folded" in keys and "demo:3:none" not in keys
    assert reads == [1]  # read once, then kept
