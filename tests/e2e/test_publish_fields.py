"""Hostile: a well-formed outcome whose values are forged is refused by publish before anything is written.

Each case forges one field of a real outcome (`autoloop run --outcome-dir`, the proposing job's own
output) the way candidate code in that job could, then runs `autoloop publish` as the workflow does:
the refusal names the field, and the origin's refs (the memory branch, the program branch, everything)
and the publisher's checkout are byte-identical afterwards. A state file that a forgery or a hand edit
already broke stops only its own program in `schedule`, `status` and `run`.
"""

from __future__ import annotations

import json

import re
import shutil
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import pytest

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from autoloop_py.strategies.slots import MAX_SLOTS
from tests.e2e.test_publish import _clone, _edit_json, _git, _origin_with_counter, _propose, _refs, _state
from tests.e2e.test_run import PROG, _plan, _value


def _origin_with_two(base: Path) -> Path:
    """Returns the counter origin with a second program, `other` (a copy of counter), on main."""
    origin = _origin_with_counter(base)
    work = _clone(origin, base / "seed-other")
    shutil.copytree(work / PROG, work / ".autoloop/programs/other")
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "other")
    _git(work, "push", "-q", "origin", "main")
    return origin


Forgery = Callable[[dict[str, Any], datetime], None]


def _record(field: str, value: Any) -> Forgery:
    return lambda doc, started: doc["record"].update({field: value})


def _iteration(number: int) -> Forgery:
    def forge(doc: dict[str, Any], started: datetime) -> None:
        doc["iteration"] = number
        doc["key"] = re.sub(r":\d+:", f":{number}:", doc["key"])
    return forge


def _program(name: str) -> Forgery:
    def forge(doc: dict[str, Any], started: datetime) -> None:
        doc["program"] = name
        doc["key"] = re.sub(r"^[^:]+:", f"{name}:", doc["key"])
    return forge


def _hour_before(doc: dict[str, Any], started: datetime) -> None:
    doc["record"]["timestamp"] = (started - timedelta(hours=1)).isoformat()


def _other_key(doc: dict[str, Any], started: datetime) -> None:
    doc["key"] = re.sub(r"^[^:]+:", "other:", doc["key"])


YEAR_1, YEAR_1_EAST, YEAR_9999 = "0001-01-01T00:00:00+00:00", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59+00:00"
FORGERIES = {
    "year 1": (_record("timestamp", YEAR_1), f"record.timestamp: {YEAR_1} is before"),
    "year 1 east of UTC": (_record("timestamp", YEAR_1_EAST), f"record.timestamp: {YEAR_1_EAST} is out of range"),
    "year 9999": (_record("timestamp", YEAR_9999), f"record.timestamp: {YEAR_9999} is in the future"),
    "an hour before the run": (_hour_before, "is before this run started"),
    "iteration 999999999": (_iteration(999_999_999), "iteration: 999999999 is not the next iteration of 'counter' (1,"),
    "iteration past any slot": (_iteration(MAX_SLOTS + 1), f"iteration: {MAX_SLOTS + 1} is not the next iteration"),
    "another existing program": (_program("other"), "program: the outcome is for 'other', the workflow publishes"),
    "a key of another program": (_other_key, "key: 'other:1:"),
    "negative cost": (_record("cost", -1e9), "record.cost: -1e+09 is not between 0 and 1e+09"),
    "too many tokens": (_record("tokens", 10**15), "record.tokens: 1000000000000000 is over"),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_field_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    origin = _origin_with_two(tmp_path)
    started = datetime.now(timezone.utc).replace(microsecond=0)
    outcome = tmp_path / "outcome"
    _propose(origin, _clone(origin, tmp_path / "propose"), _plan(tmp_path, [_value(2.0)]), outcome)
    forge, message = FORGERIES[name]
    _edit_json(outcome, lambda doc: forge(doc, started))
    publisher = _clone(origin, tmp_path / "publish")
    before, config = _refs(origin), (publisher / ".git/config").read_bytes()
    local = _git(publisher, "for-each-ref", "--format=%(refname) %(objectname)")
    capsys.readouterr()

    argv = ["publish", "--repo", str(publisher), str(outcome), "--program", "counter",
            "--not-before", started.isoformat()]
    assert main(argv) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "refusing the outcome of 'counter', nothing was written" in err and message in err
    assert _refs(origin) == before
    assert _git(publisher, "for-each-ref", "--format=%(refname) %(objectname)") == local
    assert (publisher / ".git/config").read_bytes() == config
    assert _git(publisher, "status", "--porcelain") == ""


def test_the_unforged_outcome_publishes_with_the_workflows_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the same outcome, untouched, passes every check the forgeries fail (without litellm,
    which the publish job does not install)."""
    origin = _origin_with_two(tmp_path)
    started = str(int(datetime.now(timezone.utc).timestamp()))  # what the plan job's `date -u +%s` writes
    outcome = tmp_path / "outcome"
    _propose(origin, _clone(origin, tmp_path / "propose"), _plan(tmp_path, [_value(2.0)]), outcome)
    publisher = _clone(origin, tmp_path / "publish")
    monkeypatch.setitem(sys.modules, "litellm", None)
    assert main(["publish", "--repo", str(publisher), str(outcome), "--program", "counter",
                 "--not-before", started]) == 0
    assert "Autoloop-Key: counter:1:" in _git(origin, "log", "-1", "--format=%B", "memory/autoloop")


def test_the_one_slot_that_arrived_is_recorded_as_the_next_iteration(tmp_path: Path) -> None:
    """Slot 1 of 2 numbered itself 2; slot 0's job failed: the publish records it as iteration 1, no gap."""
    origin = _origin_with_counter(tmp_path)
    outcome = tmp_path / "slot-1"
    assert main(["run", "--repo", str(_clone(origin, tmp_path / "propose")), "--program", "counter", "--proposer",
                 "agent", "--agent-command", _plan(tmp_path, [_value(2.0)]), "--slot", "1/2",
                 "--outcome-dir", str(outcome)]) == 0
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "publish")), str(outcome),
                 "--program", "counter"]) == 0
    message = _git(origin, "log", "-1", "--format=%B", "memory/autoloop")
    assert "Autoloop-Key: counter:1:" in message and "counter:2:" not in message


def test_a_forged_slot_of_a_tick_is_refused_alone_and_the_others_are_published(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    origin = _origin_with_counter(tmp_path)
    command = _plan(tmp_path, [_value(2.0)])
    slots = [tmp_path / "slot-0", tmp_path / "slot-1"]
    for index, folder in enumerate(slots):
        clone = _clone(origin, tmp_path / f"propose{index}")
        assert main(["run", "--repo", str(clone), "--program", "counter", "--proposer", "agent", "--agent-command",
                     command, "--slot", f"{index}/2", "--outcome-dir", str(folder)]) == 0
    _edit_json(slots[1], lambda doc: _iteration(999_999_999)(doc, datetime.now(timezone.utc)))
    publisher = _clone(origin, tmp_path / "publish")
    capsys.readouterr()
    assert main(["publish", "--repo", str(publisher), *map(str, slots), "--program", "counter"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "refusing 1 of the 2 outcomes of 'counter' (the others were published):" in err
    assert f"slot-1: iteration: 999999999 is not the next iteration of 'counter' (1, or up to {MAX_SLOTS}" in err
    state = _state(origin)
    assert state.machine.iteration_count == 1 and state.machine.best_metric == 2.0  # slot 0's, and nothing of slot 1
    assert "counter:999999999" not in _git(origin, "log", "--format=%B", "memory/autoloop")


def _plant_last_run(origin: Path, work: Path, program: str, when: str) -> None:
    """Rewrites a program's Last Run on the memory branch of origin, as a hand edit would."""
    _git(work, "fetch", "-q", "origin", "memory/autoloop")
    _git(work, "checkout", "-q", "-B", "memory/autoloop", "FETCH_HEAD")
    path = work / f"{program}.md"
    text, count = re.subn(r"(\| Last Run \| )[^|]*\|", rf"\g<1>{when} |", path.read_text())
    assert count == 1
    path.write_text(text)
    _git(work, "commit", "-qam", f"hand edit: {program} Last Run {when}")
    _git(work, "push", "-q", "origin", "memory/autoloop")
    _git(work, "checkout", "-q", "main")


def test_a_last_run_in_the_year_9999_stops_only_its_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    origin = _origin_with_two(tmp_path)
    for name in ("counter", "other"):
        work = _clone(origin, tmp_path / f"run-{name}")
        assert main(["run", "--repo", str(work), "--program", name, "--proposer", "tune"]) == 0
    _plant_last_run(origin, _clone(origin, tmp_path / "editor"), "counter", "9999-12-31T23:59:59Z")
    _plant_last_run(origin, _clone(origin, tmp_path / "editor2"), "other", "2000-01-01T00:00:00Z")
    repo = _clone(origin, tmp_path / "after")
    capsys.readouterr()

    assert main(["schedule", "--repo", str(repo), "--matrix"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["program"] == ["other"]
    assert "skipping counter: its state file cannot be read: counter.md: 'Last Run' is 9999-12-31T23:59:59+00:00" in \
        " ".join(err.split())

    assert main(["status", "--repo", str(repo)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "state file unreadable" in out and "too late to add the schedule (every 6h) to; correct the value" in out

    assert main(["run", "--repo", str(repo), "--program", "counter", "--proposer", "tune"]) == 1
    assert "counter.md: 'Last Run' is 9999-12-31T23:59:59+00:00" in " ".join(capsys.readouterr().err.split())


# ---------------------------------------------------------------- in GitHub Actions (loopback GitHub)

from tests.e2e.test_ci import fake  # noqa: E402,F401
from tests.e2e.test_publish import _WRITES  # noqa: E402
from tests.fakegithub import FakeGitHub  # noqa: E402


@pytest.mark.parametrize("name", ["year 9999", "iteration 999999999", "another existing program"])
def test_a_forged_field_writes_nothing_to_github_either(tmp_path: Path, fake: FakeGitHub, name: str) -> None:
    origin = _origin_with_two(tmp_path)
    outcome = tmp_path / "outcome"
    _propose(origin, _clone(origin, tmp_path / "propose"), _plan(tmp_path, [_value(2.0)]), outcome)
    forge, _ = FORGERIES[name]
    _edit_json(outcome, lambda doc: forge(doc, datetime.now(timezone.utc)))
    asked, before = len(fake.requests), _refs(origin)
    assert main(["publish", "--repo", str(_clone(origin, tmp_path / "publish")), str(outcome), "--ci",
                 "--program", "counter"]) == 1
    assert [r.path for r in fake.requests[asked:] if r.method in _WRITES] == []
    assert _refs(origin) == before


def _model_use(*extra: list[str]) -> Callable[[dict[str, Any]], None]:
    """Returns an edit giving an outcome the model use of an llm run: its record's bullets and its candidate's model."""
    def edit(doc: dict[str, Any]) -> None:
        doc["record"]["extra"] += [list(pair) for pair in extra]
        doc["evaluated"]["model"] = "openai/good"
    return edit


def test_a_forged_model_use_is_refused_alone_and_the_programs_later_runs_still_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forgery that bricked a program: a Model spend of $-1e300 in the Models table stopped every llm run."""
    origin = _origin_with_counter(tmp_path)
    slots = [tmp_path / "slot-0", tmp_path / "slot-1"]
    for index, folder in enumerate(slots):
        clone = _clone(origin, tmp_path / f"propose{index}")
        assert main(["run", "--repo", str(clone), "--program", "counter", "--proposer", "agent", "--agent-command",
                     _plan(tmp_path, [_value(2.0 + index)]), "--slot", f"{index}/2", "--outcome-dir", str(folder)]) == 0
    _edit_json(slots[0], _model_use(["Model", "openai/good"], ["Model spend", "openai/good: 120 tokens, $0.25"]))
    _edit_json(slots[1], _model_use(["Model", "openai/evil"], ["Model spend", "openai/evil: 5 tokens, $-1e300"],
                                    ["Status", "accepted"]))
    monkeypatch.setenv("AUTOLOOP_MODEL", "openai/good")  # the program's model, as the workflow's publish job has it
    publisher = _clone(origin, tmp_path / "publish")
    capsys.readouterr()

    assert main(["publish", "--repo", str(publisher), *map(str, slots), "--program", "counter"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "refusing 1 of the 2 outcomes of 'counter' (the others were published):" in err
    assert "slot-1: record.extra: 'Status' is not a bullet autoloop writes" in err
    assert "record.extra Model: 'openai/evil' is not one of the program's models (openai/good)" in err
    assert "record.extra Model spend: openai/evil's '-1e300' is not a cost between 0 and 1e+09" in err
    state = _state(origin)
    assert state.machine.iteration_count == 1 and state.machine.best_metric == 2.0  # slot 0 only
    assert [(row.name, row.calls, row.tokens, row.usd) for row in statefile.models_of(state).rows] == [
        ("openai/good", 1, 120, 0.25)]
    assert "evil" not in _git(origin, "show", "memory/autoloop:counter.md")
    later = _clone(origin, tmp_path / "later")
    assert main(["run", "--repo", str(later), "--program", "counter", "--proposer", "tune"]) == 0
    assert _state(origin).machine.iteration_count == 2
