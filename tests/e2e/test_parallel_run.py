"""End to end: `autoloop run --parallel 4 --barrier` runs ticks of 4 slots against a bare origin, for every strategy.

Each tick records 4 iterations with distinct numbers (and, for strategies with islands, distinct
islands), the program branch holds the tick's best, the state file parses, and the same tick run
again from a copy of the same origin decides the same.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.errors import GitError
from autoloop_py.loop.record.outcome import read_outcome
from autoloop_py.loop.slots import barrier_publish
from autoloop_py.state import file as statefile
from autoloop_py.state.population import population_of
from tests.e2e.test_funsearch_run import funsearch_repo  # noqa: F401
from tests.e2e.test_publish import _clone, _relist
from tests.e2e.test_publish_strategies import STRATEGIES, _number_the_caps
from tests.programs import REPO, install_strategy_program

pytest.importorskip("numpy")

NAME = "function_minimization"
PROGRAM = f".autoloop/programs/{NAME}"
SLOTS = 4
_DECISION_RE = re.compile(r"^- \*\*(Operator|Parent\(s\)|Island)\*\*: .*$", re.MULTILINE)
_ISLAND_RE = re.compile(r"^- \*\*Island\*\*: (\S+)", re.MULTILINE)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _state(origin: Path) -> statefile.StateFile:
    return _state_at(origin, "memory/autoloop")


def _state_at(origin: Path, rev: str) -> statefile.StateFile:
    return statefile.parse_state(_git(origin, "show", f"{rev}:{NAME}.md") + "\n", f"{NAME}.md")


def _decisions(state: statefile.StateFile) -> list[tuple[object, ...]]:
    """Returns what each recorded iteration decided and measured, newest first (timestamps left out)."""
    return [(e.iteration, e.status, e.metric, e.change, tuple(m.group(0) for m in _DECISION_RE.finditer(e.text)))
            for e in state.history]


def _tick(origin: Path, work: Path) -> None:
    assert main(["run", "--repo", str(_clone(origin, work)), "--program", NAME, "--proposer", "tune",
                 "--parallel", str(SLOTS), "--barrier"]) == 0


def _run_ticks(repo: Path, tmp_path: Path, plain: int = 0) -> tuple[Path, Path]:
    """Runs `plain` single iterations, then one tick, against a bare origin made from repo, then the same tick again
    against a copy of the origin as the tick found it; checks both and returns the two origins."""
    origin, again = tmp_path / "origin.git", tmp_path / "again.git"
    _git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    if plain:
        work = _clone(origin, tmp_path / "plain")
        assert main(["run", "--repo", str(work), "--program", NAME, "--proposer", "tune", "--iterations", str(plain)]) == 0
    _git(tmp_path, "clone", "-q", "--mirror", str(origin), str(again))  # the tick's starting point
    _tick(origin, tmp_path / "tick")
    _tick(again, tmp_path / "again")
    for copy in (origin, again):
        _check_tick(copy, plain)
    assert _decisions(_state(again))[:SLOTS] == _decisions(_state(origin))[:SLOTS]
    return origin, again


def _check_tick(origin: Path, before: int) -> None:
    """Checks the tick that followed `before` recorded iterations."""
    state = _state(origin)
    numbers = [e.iteration for e in state.history[:SLOTS]]
    assert sorted(numbers) == list(range(before + 1, before + SLOTS + 1))
    assert [int((e.key or "::").split(":")[1]) for e in state.history[:SLOTS]] == numbers  # each under its own key
    assert state.machine.iteration_count == before + SLOTS
    statefile.parse_state(statefile.render_state(state), f"{NAME}.md")
    first = not _git(origin, "rev-list", "--max-count=1", "--skip=1", "memory/autoloop")
    before_tick = state.machine.initial_metric if first else _state_at(origin, "memory/autoloop~1").machine.best_metric
    improvers = [e for e in state.history[:SLOTS] if e.metric is not None and before_tick is not None
                 and e.metric > before_tick]
    accepted = [e for e in state.history[:SLOTS] if e.status == "accepted"]
    assert len(accepted) == (1 if improvers else 0)  # the tick's best improver takes the branch
    if accepted:
        best = accepted[0]
        assert best.metric == max(e.metric for e in improvers) == state.machine.best_metric
        subject = _git(origin, "log", "-1", "--format=%s", f"autoloop/{NAME}")
        assert f"Iteration {best.iteration}:" in subject
    for entry in improvers:  # every other improver is recorded as lost, its commit kept on a side ref
        if entry is not accepted[0]:
            assert entry.status == "rejected" and "did better" in entry.text
            ref = f"refs/autoloop/slots/{NAME}/{entry.iteration}"
            assert f"Iteration {entry.iteration} (lost to a sibling)" in _git(origin, "log", "-1", "--format=%s", ref)
    # One memory commit records the whole tick.
    assert _git(origin, "log", "-1", "--format=%s", "memory/autoloop").startswith(f"[Autoloop: {NAME}] tick of {SLOTS}")


def _islands(state: statefile.StateFile) -> list[str]:
    return [found.group(1) for e in state.history[:SLOTS] if (found := _ISLAND_RE.search(e.text))]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_parallel_ticks_of_a_strategy(strategy: str, git_repo: Path, run_git, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pointer, config = STRATEGIES[strategy]
    if strategy == "adaevolve":
        config = "population_size: 6\nnum_islands: 4\nmax_islands: 4\n"  # an island for each slot
    install_strategy_program(git_repo, run_git, PROGRAM, strategy, pointer, config)
    if strategy == "alphaevolve":
        _number_the_caps(git_repo / PROGRAM / "strategy/alphaevolve.md")
        run_git(git_repo, "commit", "-qam", "caps")
    origin, _ = _run_ticks(git_repo, tmp_path, plain=0 if strategy == "alphaevolve" else 1)  # the others begin with the seed
    state = _state(origin)
    population = population_of(state)
    assert len(population.candidates) >= SLOTS
    # Every candidate the tick evaluated joined the Population, the losing improvers' included.
    evaluated = {e.iteration for e in state.history[:SLOTS] if e.metric is not None}
    assert evaluated <= {c.gen for c in population.candidates}, (evaluated, [c.gen for c in population.candidates])
    if strategy != "evox":  # EvoX gives each slot an independent proposal from the best: no islands
        islands = _islands(state)
        assert len(set(islands)) == len(islands) == SLOTS, islands


def test_parallel_ticks_of_funsearch(funsearch_repo: Path, tmp_path: Path) -> None:  # noqa: F811
    origin, _ = _run_ticks(funsearch_repo, tmp_path, plain=1)  # the first iteration evaluates the seed
    islands = _islands(_state(origin))
    assert len(set(islands)) == len(islands) == SLOTS, islands


def test_parallel_ticks_of_the_default_flow(git_repo: Path, tmp_path: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    _default_flow(git_repo, run_git)
    _run_ticks(git_repo, tmp_path)


def _default_flow(git_repo: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    """Commits function_minimization without its strategy section into git_repo."""
    shutil.copytree(REPO / PROGRAM, git_repo / PROGRAM, ignore=shutil.ignore_patterns("__pycache__"))
    text = (git_repo / PROGRAM / "program.md").read_text(encoding="utf-8")
    (git_repo / PROGRAM / "program.md").write_text(text[: text.index("## Evolution Strategy")], encoding="utf-8")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "default flow")


def test_the_actions_split_publishes_the_slots_that_arrived_without_a_gap(
    git_repo: Path, tmp_path: Path, run_git, capsys: pytest.CaptureFixture[str]  # type: ignore[no-untyped-def]
) -> None:
    """The workflow's jobs: `run --slot I/4 --outcome-dir` per slot, then one `publish DIR…` (slot 1's job failed)."""
    _default_flow(git_repo, run_git)
    origin = tmp_path / "origin.git"
    _git(tmp_path, "clone", "-q", "--bare", str(git_repo), str(origin))
    assert main(["schedule", "--repo", str(git_repo), "--matrix", "--slots", str(SLOTS)]) == 0
    matrix = json.loads(capsys.readouterr().out)
    assert matrix["program"] == [NAME]
    placement = {"runs-on": ["ubuntu-latest"], "container": ""}
    assert matrix["include"] == [{"program": NAME, "slot": i, "slots": SLOTS, **placement} for i in range(SLOTS)]
    dirs = []
    for entry in matrix["include"]:
        dirs.append(tmp_path / f"outcome{entry['slot']}")
        work = _clone(origin, tmp_path / f"slot{entry['slot']}")
        assert main(["run", "--repo", str(work), "--program", NAME, "--proposer", "tune",
                     "--slot", f"{entry['slot']}/{entry['slots']}", "--outcome-dir", str(dirs[-1])]) == 0
    assert sorted(read_outcome(d).iteration for d in dirs) == [1, 2, 3, 4]
    arrived = [dirs[0], *dirs[2:]]
    # One slot's outcome forged (a file outside the Target): refused, nothing is written (test_publish_fields.py:
    # beside honest slots, those are published).
    forged = tmp_path / "forged"
    shutil.copytree(dirs[3], forged)
    _relist(forged, f"{PROGRAM}/code/evaluate.py", b"print('{\"combined_score\": 1e9}')\n")
    refs = _git(origin, "for-each-ref")
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "refused")), str(forged)]) == 1
    assert _git(origin, "for-each-ref") == refs
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "publish")), *map(str, arrived)]) == 0
    state = _state(origin)
    assert [e.iteration for e in state.history] == [3, 2, 1]
    assert [int((e.key or "::").split(":")[1]) for e in state.history] == [3, 2, 1]
    # Published again (a retried job): nothing is recorded twice.
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "again")), *map(str, arrived)]) == 0
    assert _state(origin).machine.iteration_count == 3
    # The next plain iteration takes the next number: no gap, no repeat, no complaint about lost records.
    assert main(["run", "--repo", str(_clone(origin, tmp_path / "next")), "--program", NAME, "--proposer", "tune"]) == 0
    assert _state(origin).history[0].iteration == 4


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--parallel", "2", "--dry-run"], "--parallel runs and records its slots on this machine; it cannot go "
                                           "with --dry-run"),
        (["--parallel", "2", "--outcome-dir", "out"], "cannot go with --outcome-dir"),
        (["--slot", "1/2"], "--slot 1/2 proposes one slot of a tick: give --outcome-dir DIR"),
    ],
)
def test_slot_flags_that_cannot_work_are_refused(
    flags: list[str], message: str, git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--repo", str(git_repo), "--program", NAME, *flags]) == 1
    assert message in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize("slot", ["4/4", "x", "1/0"])
def test_a_bad_slot_is_an_argument_error(slot: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--slot", slot, "--outcome-dir", "out"])
    assert "--slot" in capsys.readouterr().err


def test_a_tick_pushes_its_losers_side_refs_only_after_its_record(
    git_repo: Path, tmp_path: Path, run_git, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    # A tick whose record fails (the winner's publish, the memory push) leaves nothing of its slots on origin.
    _default_flow(git_repo, run_git)
    origin = tmp_path / "origin.git"
    _git(tmp_path, "clone", "-q", "--bare", str(git_repo), str(origin))
    order: list[str] = []
    real_record, real_push = barrier_publish._record_all, barrier_publish.push_aside

    def failing_record(*args, **kwargs):  # type: ignore[no-untyped-def]
        order.append("record")
        raise GitError("the memory push was refused")

    monkeypatch.setattr(barrier_publish, "_record_all", failing_record)
    monkeypatch.setattr(barrier_publish, "push_aside", lambda *a, **k: order.append("push") or real_push(*a, **k))
    assert main(["run", "--repo", str(_clone(origin, tmp_path / "tick")), "--program", NAME, "--proposer", "tune",
                 "--parallel", str(SLOTS), "--barrier"]) != 0
    assert order == ["record"]
    assert _git(origin, "for-each-ref", "--format=%(refname)", "refs/autoloop/") == ""

    # When the record lands, the side refs follow it.
    monkeypatch.setattr(barrier_publish, "_record_all", lambda *a, **k: order.append("record") or real_record(*a, **k))
    order.clear()
    _tick(origin, tmp_path / "again")
    assert order == ["record", "push"]
