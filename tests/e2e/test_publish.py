"""End to end: `autoloop run --outcome-dir` in one clone, `autoloop publish` in another, against a bare origin.

The split gives the same memory branch and program branch as a plain `autoloop run`; the proposing
side writes nothing to the origin; a tampered outcome is refused with nothing written.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.cli import main
from autoloop_py.loop.iteration.iteration import run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.program.model import load_program
from autoloop_py.state import file as statefile
from tests.e2e.test_budget_run import DAY, FOLDER, NAME, _PricedModel, _repo
from tests.e2e.test_budget_run import _state as budget_state
from tests.e2e.test_run import EVALUATE, PROG, PROGRAM_MD, VALUE, _plan, _value


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _origin_with_counter(base: Path) -> Path:
    """Returns a bare origin holding the counter program on main."""
    base.mkdir(parents=True, exist_ok=True)
    origin, work = base / "origin.git", base / "seed"
    _git(base, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(base, "init", "-q", "-b", "main", str(work))
    (work / PROG / "code").mkdir(parents=True)
    (work / PROG / "program.md").write_text(PROGRAM_MD)
    (work / PROG / "code/value.py").write_text(VALUE.format(x=1.0))
    (work / PROG / "code/evaluate.py").write_text(EVALUATE)
    _git(work, "add", "-A")
    _git(work, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-qm", "initial")
    _git(work, "remote", "add", "origin", str(origin))
    _git(work, "push", "-q", "origin", "main")
    return origin


def _clone(origin: Path, target: Path) -> Path:
    _git(origin.parent, "clone", "-q", str(origin), str(target))
    _git(target, "config", "user.name", "Test")
    _git(target, "config", "user.email", "test@example.invalid")
    return target


def _refs(origin: Path) -> str:
    return _git(origin, "for-each-ref", "--format=%(refname) %(objectname)")


def _propose(origin: Path, clone: Path, command: str, outcome: Path) -> None:
    before = _refs(origin)
    assert main(["run", "--repo", str(clone), "--program", "counter", "--proposer", "agent",
                 "--agent-command", command, "--outcome-dir", str(outcome)]) == 0
    assert _refs(origin) == before, "the proposing side pushed something"


def _publish(clone: Path, outcome: Path) -> int:
    return main(["publish", "--repo", str(clone), str(outcome)])


def _state(origin: Path) -> statefile.StateFile:
    return statefile.parse_state(_git(origin, "show", "memory/autoloop:counter.md") + "\n", "counter.md")


def _memory_files(origin: Path) -> list[str]:
    return sorted(_git(origin, "ls-tree", "-r", "--name-only", "memory/autoloop").splitlines())


def _rows(origin: Path) -> tuple[list[str], list[tuple[object, ...]]]:
    """Returns the memory branch's paths (trace blobs only counted: prompts hold times) and its rows' essentials."""
    paths = _memory_files(origin)
    rows = [json.loads(_git(origin, "show", f"memory/autoloop:{path}")) for path in paths if "/rows/" in path]
    kept = [path for path in paths if "/blobs/" not in path] + [f"{sum('/blobs/' in p for p in paths)} blobs"]
    return kept, [(r["id"], r["parent_id"], r["status"], r["metrics"], r["solution_sha256"]) for r in rows]


def test_split_run_records_what_a_plain_run_records(tmp_path: Path) -> None:
    steps = [{**_value(2.0), "lesson": "Larger x scores higher."}, _value(0.5), _value(3.0)]
    plain = _origin_with_counter(tmp_path / "plain")
    assert main(["run", "--repo", str(_clone(plain, tmp_path / "plain/work")), "--program", "counter",
                 "--proposer", "agent", "--agent-command", _plan(tmp_path / "plain", steps), "--iterations", "3"]) == 0

    split = _origin_with_counter(tmp_path / "split")
    command = _plan(tmp_path / "split", steps)
    for n in range(3):
        outcome = tmp_path / f"outcome{n}"
        _propose(split, _clone(split, tmp_path / f"split/propose{n}"), command, outcome)
        assert _publish(_clone(split, tmp_path / f"split/publish{n}"), outcome) == 0

    a, b = _state(plain), _state(split)
    assert b.machine.recent_statuses == a.machine.recent_statuses == ("accepted", "rejected", "accepted")
    assert (b.machine.best_metric, b.machine.initial_metric) == (a.machine.best_metric, a.machine.initial_metric)
    assert [(e.status, e.iteration) for e in b.history] == [(e.status, e.iteration) for e in a.history]
    assert b.lessons == a.lessons
    assert _rows(split) == _rows(plain)
    program_file = f"autoloop/counter:{PROG}/code/value.py"
    assert _git(split, "show", program_file) == _git(plain, "show", program_file)
    assert _git(split, "log", "--format=%s", "autoloop/counter") == _git(plain, "log", "--format=%s", "autoloop/counter")
    assert "Autoloop-Key: counter:3:" in _git(split, "log", "-1", "--format=%B", "autoloop/counter")


def test_a_candidate_judged_against_a_stale_branch_is_not_kept(tmp_path: Path) -> None:
    origin = _origin_with_counter(tmp_path)
    _propose(origin, _clone(origin, tmp_path / "p1"), _plan(tmp_path, [_value(2.0)]), tmp_path / "o1")
    # Another run keeps a candidate before this outcome is published.
    assert main(["run", "--repo", str(_clone(origin, tmp_path / "other")), "--program", "counter", "--proposer",
                 "agent", "--agent-command", _plan(tmp_path / "other", [_value(5.0)])]) == 0
    assert _publish(_clone(origin, tmp_path / "pub"), tmp_path / "o1") == 0
    state = _state(origin)
    assert state.machine.recent_statuses == ("accepted", "rejected")
    assert state.machine.best_metric == 5.0
    assert "judged against a stale base" in state.history[0].text
    assert "x = 5.0" in _git(origin, "show", f"autoloop/counter:{PROG}/code/value.py")


def _relist(outcome: Path, path: str, data: bytes) -> None:
    """Writes files/<path> and lists it in outcome.json with its right hash, as a forger would."""
    target = outcome / "files" / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    doc = json.loads((outcome / "outcome.json").read_text())
    doc["changed"][path] = hashlib.sha256(data).hexdigest()
    (outcome / "outcome.json").write_text(json.dumps(doc))


def _edit_json(outcome: Path, change: Callable[[dict], None]) -> None:
    doc = json.loads((outcome / "outcome.json").read_text())
    change(doc)
    (outcome / "outcome.json").write_text(json.dumps(doc))


def _outside_target(outcome: Path) -> None:
    _relist(outcome, f"{PROG}/code/evaluate.py", b'print(\'{"score": 1e9}\')\n')


def _oversize(outcome: Path) -> None:
    _relist(outcome, f"{PROG}/code/value.py", VALUE.format(x="2.0  # " + "x" * 1_100_000).encode())


def _malformed_record(outcome: Path) -> None:
    _edit_json(outcome, lambda doc: doc["record"].update(metric="1e9"))


def _forged_ref_file(outcome: Path) -> None:
    (outcome / "refs/heads").mkdir(parents=True)
    (outcome / "refs/heads/main").write_text("0" * 40 + "\n")


def _forged_ref_key(outcome: Path) -> None:
    _edit_json(outcome, lambda doc: doc.update(refs={"refs/heads/main": "0" * 40}))


def _unlisted_file(outcome: Path) -> None:
    (outcome / "files/.git").mkdir(parents=True)
    (outcome / "files/.git/config").write_text(f"[core]\n\tfsmonitor = touch {outcome.parent / 'pwned'}\n")


def _dot_dot(outcome: Path) -> None:
    _edit_json(outcome, lambda doc: doc["deleted"].append(f"{PROG}/../../README.md"))


def _evolve_block(outcome: Path) -> None:
    _relist(outcome, f"{PROG}/code/value.py", b"import os\n" + VALUE.format(x=2.0).encode())


def _other_program(outcome: Path) -> None:
    _edit_json(outcome, lambda doc: doc.update(program="other"))


def _forged_decision(outcome: Path) -> None:
    _edit_json(outcome, lambda doc: doc.update(decision={"$dataclass": "os:system", "fields": {"command": "id"}}))


def _decision_without_strategy(outcome: Path) -> None:
    decision = {"$dataclass": "autoloop_py.strategies.base:Decision", "fields": {"operator": "x", "reason": "y"}}
    _edit_json(outcome, lambda doc: doc.update(decision=decision))


def _link(outcome: Path) -> None:
    target = outcome / "files" / PROG / "code/value.py"
    target.unlink()
    target.symlink_to("/etc/passwd")


TAMPERING = {
    "outside Target": (_outside_target, "outside the program's Target"),
    "oversize file": (_oversize, "over the 1048576-byte cap"),
    "malformed record": (_malformed_record, "metric must be a finite number"),
    "forged ref file": (_forged_ref_file, "expected outcome.json and files/ only"),
    "forged ref key": (_forged_ref_key, "unknown ['refs']"),
    "unlisted file": (_unlisted_file, "does not list: .git/config"),
    "parent path": (_dot_dot, "is not a plain relative path"),
    "edit outside EVOLVE-BLOCK": (_evolve_block, "EVOLVE-BLOCK"),
    "another program": (_other_program, "no program named 'other'"),
    "symbolic link": (_link, "a link or a special file is refused"),
    "forged decision type": (_forged_decision, "os:system is not a type a decision may hold"),
    "decision for no strategy": (_decision_without_strategy, "the program runs no strategy"),
}


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_a_tampered_outcome_is_refused_and_nothing_is_written(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    origin = _origin_with_counter(tmp_path)
    outcome = tmp_path / "outcome"
    _propose(origin, _clone(origin, tmp_path / "propose"), _plan(tmp_path, [_value(2.0)]), outcome)
    tamper, message = TAMPERING[name]
    tamper(outcome)
    publisher = _clone(origin, tmp_path / "publish")
    before, config = _refs(origin), (publisher / ".git/config").read_bytes()
    assert _publish(publisher, outcome) == 1
    assert message in capsys.readouterr().err
    assert _refs(origin) == before
    assert (publisher / ".git/config").read_bytes() == config
    assert _git(publisher, "status", "--porcelain") == ""
    assert not (tmp_path / "pwned").exists()  # the marker _unlisted_file's fsmonitor would make


# ---------------------------------------------------------------- in GitHub Actions (loopback GitHub)

from tests.e2e.test_ci import REPO, fake  # noqa: E402,F401
from tests.fakegithub import FakeGitHub  # noqa: E402

_WRITES = ("POST", "PATCH", "PUT", "DELETE")


def _propose_ci(origin: Path, clone: Path, command: str, outcome: Path, fake: FakeGitHub) -> None:
    before, asked = _refs(origin), len(fake.requests)
    assert main(["run", "--repo", str(clone), "--program", "counter", "--proposer", "agent",
                 "--agent-command", command, "--outcome-dir", str(outcome), "--ci"]) == 0
    assert _refs(origin) == before, "the proposing job pushed something"
    assert [r.path for r in fake.requests[asked:] if r.method in _WRITES] == [], "the proposing job wrote to GitHub"


def test_split_ci_run_comments_and_gates_like_a_single_job(tmp_path: Path, fake: FakeGitHub) -> None:
    origin = _origin_with_counter(tmp_path)
    command = _plan(tmp_path, [_value(2.0), _value(3.0)])
    _propose_ci(origin, _clone(origin, tmp_path / "p1"), command, tmp_path / "o1", fake)
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "q1")), str(tmp_path / "o1"),
                 "--ci", "--program", "counter"]) == 0
    state = _state(origin)
    assert state.machine.recent_statuses == ("pending-ci",)  # the CI gate holds it until the checks pass
    [issue] = [i for i in fake.issues[REPO] if i["title"] == "[Autoloop: counter]"]
    comments = fake.comments[REPO][issue["number"]]
    assert sum("<!-- AUTOLOOP:STATUS -->" in c["body"] for c in comments) == 1 and len(comments) == 2
    assert [p["head"]["ref"] for p in fake.pulls[REPO]] == ["autoloop/counter"]

    # Checks still running: the proposing job proposes nothing; publishing records nothing new.
    first = _git(origin, "rev-parse", "autoloop/counter")
    fake.add_check_run(REPO, first, "tests", status="in_progress", conclusion=None)
    _propose_ci(origin, _clone(origin, tmp_path / "p2"), command, tmp_path / "o2", fake)
    assert "waiting for CI" in json.loads((tmp_path / "o2/outcome.json").read_text())["waiting"]
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "q2")), str(tmp_path / "o2"),
                 "--ci", "--program", "counter"]) == 0
    assert _state(origin).machine.recent_statuses == ("pending-ci",)

    # Checks passed: the proposing job sees the verdict (locally), the publishing job writes it and the next record.
    fake.check_runs[(REPO, first)] = []
    fake.add_check_run(REPO, first, "tests", conclusion="success")
    _propose_ci(origin, _clone(origin, tmp_path / "p3"), command, tmp_path / "o3", fake)
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "q3")), str(tmp_path / "o3"),
                 "--ci", "--program", "counter"]) == 0
    state = _state(origin)
    assert state.machine.recent_statuses == ("accepted", "pending-ci")
    assert state.machine.best_metric == 2.0
    assert "x = 3.0" in _git(origin, "show", f"autoloop/counter:{PROG}/code/value.py")


def test_a_tampered_outcome_writes_nothing_to_github(tmp_path: Path, fake: FakeGitHub) -> None:
    origin = _origin_with_counter(tmp_path)
    _propose_ci(origin, _clone(origin, tmp_path / "p"), _plan(tmp_path, [_value(2.0)]), tmp_path / "o", fake)
    _outside_target(tmp_path / "o")
    asked, before = len(fake.requests), _refs(origin)
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "q")), str(tmp_path / "o"),
                 "--ci", "--program", "counter"]) == 1
    assert [r.path for r in fake.requests[asked:] if r.method in _WRITES] == []
    assert _refs(origin) == before


# ---------------------------------------------------------------- budgets


def test_a_budget_reached_pauses_the_program_through_publish(git_repo: Path, run_git, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = _repo(git_repo, run_git, {"budget-usd": 1, "evaluation-timeout": 20})
    program = load_program(repo, Path(FOLDER) / "program.md")
    options = RunOptions(proposer="llm", proposer_factory=lambda name, **_: _PricedModel())
    for minute in range(3):  # $1.20 spent: the next iteration must make no model call
        run_iteration(repo, program, options, DAY + timedelta(minutes=minute))
    outcome = tmp_path / "outcome"
    assert main(["run", "--repo", str(repo), "--program", NAME, "--outcome-dir", str(outcome)]) == 0
    assert "no iteration ran: budget reached" in json.loads((outcome / "outcome.json").read_text())["waiting"]
    assert budget_state(repo).machine.paused is False  # the proposing side wrote nothing
    assert main(["publish", "--repo", str(repo), str(outcome)]) == 0
    machine = budget_state(repo).machine
    assert machine.paused and (machine.pause_reason or "").startswith("budget reached: spent $1.20/$1 (budget-usd)")


def test_a_tick_of_slots_is_published_as_one_update_on_github(tmp_path: Path, fake: FakeGitHub) -> None:
    """Two slots (`run --slot I/2 --outcome-dir --ci`), one `publish DIR… --ci`: one comment, one PR, one commit."""
    origin = _origin_with_counter(tmp_path)
    command = _plan(tmp_path, [_value(2.0), _value(3.0)])
    before, asked = _refs(origin), len(fake.requests)
    dirs = [tmp_path / f"o{i}" for i in range(2)]
    for i, directory in enumerate(dirs):
        assert main(["run", "--repo", str(_clone(origin, tmp_path / f"p{i}")), "--program", "counter", "--proposer",
                     "agent", "--agent-command", command, "--slot", f"{i}/2", "--outcome-dir", str(directory),
                     "--ci"]) == 0
    assert _refs(origin) == before and [r for r in fake.requests[asked:] if r.method in _WRITES] == []
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "q")), *map(str, dirs),
                 "--ci", "--program", "counter"]) == 0
    state = _state(origin)
    assert [(e.iteration, e.status, e.metric) for e in state.history] == [(2, "pending-ci", 3.0), (1, "rejected", 2.0)]
    assert "slot iteration 2 of the same tick did better" in state.history[1].text
    assert "x = 3.0" in _git(origin, "show", f"autoloop/counter:{PROG}/code/value.py")
    assert "x = 2.0" in _git(origin, "show", f"refs/autoloop/slots/counter/1:{PROG}/code/value.py")
    # One memory commit records the tick (the next one remembers the issue and PR numbers, as for one iteration).
    subjects = _git(origin, "log", "--format=%s", "memory/autoloop").splitlines()
    assert subjects[:2] == ["[Autoloop: counter] issue #1, PR #2",
                            "[Autoloop: counter] tick of 2 (iterations 1–2): 1 rejected, 2 pending-ci"]
    [issue] = [i for i in fake.issues[REPO] if i["title"] == "[Autoloop: counter]"]
    comments = fake.comments[REPO][issue["number"]]
    assert sum("<!-- AUTOLOOP:STATUS -->" in c["body"] for c in comments) == 1 and len(comments) == 2
    assert "tick of 2 slots: iteration 1 rejected (2); iteration 2 pending-ci (3)" in (
        " ".join(" ".join(c["body"] for c in comments).split()))
    assert [p["head"]["ref"] for p in fake.pulls[REPO]] == ["autoloop/counter"]


def test_a_stale_candidate_that_beats_the_newer_best_is_kept_with_the_code_that_was_evaluated(tmp_path: Path) -> None:
    origin = _origin_with_counter(tmp_path)
    _propose(origin, _clone(origin, tmp_path / "p1"), _plan(tmp_path, [_value(3.0)]), tmp_path / "o1")
    before = _git(origin, "rev-parse", "main^{tree}")  # the program branch starts from main
    # Another run keeps a candidate (better than the start, worse than this outcome) before it is published.
    assert main(["run", "--repo", str(_clone(origin, tmp_path / "other")), "--program", "counter", "--proposer",
                 "agent", "--agent-command", _plan(tmp_path / "other", [_value(2.0)])]) == 0
    assert _git(origin, "rev-parse", "autoloop/counter^{tree}") != before
    assert _publish(_clone(origin, tmp_path / "pub"), tmp_path / "o1") == 0
    state = _state(origin)
    assert state.machine.recent_statuses == ("accepted", "accepted")
    assert state.machine.best_metric == 3.0
    # The branch holds exactly the tree the candidate was evaluated on: its base with its file written.
    evaluated = _git(origin, "diff", before, "autoloop/counter", "--stat")
    assert f"{PROG}/code/value.py" in evaluated and len(evaluated.splitlines()) == 2
    assert "x = 3.0" in _git(origin, "show", f"autoloop/counter:{PROG}/code/value.py")


def test_a_stale_candidate_worse_than_the_newer_best_says_so(tmp_path: Path) -> None:
    origin = _origin_with_counter(tmp_path)
    _propose(origin, _clone(origin, tmp_path / "p1"), _plan(tmp_path, [_value(2.0)]), tmp_path / "o1")
    assert main(["run", "--repo", str(_clone(origin, tmp_path / "other")), "--program", "counter", "--proposer",
                 "agent", "--agent-command", _plan(tmp_path / "other", [_value(5.0)])]) == 0
    assert _publish(_clone(origin, tmp_path / "pub"), tmp_path / "o1") == 0
    entry = _state(origin).history[0]
    assert entry.status == "rejected" and "does not beat the best recorded since (5)" in " ".join(entry.text.split())
