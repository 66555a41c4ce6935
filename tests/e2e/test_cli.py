"""End to end: the status, schedule, pause/resume, check and state commands on a real repository."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autoloop_py.cli import build_parser, main
from autoloop_py.sandbox import process_limit
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore

PROGRAM = """\
---
schedule: every 6h
{extra}---

# {name}

## Goal

Improve {name}.

## Target

- `code/value.py`

## Evaluation

```bash
python3 -c "print('{{\\"score\\": 1}}')"
```

The metric is `score`. Higher is better.
"""

NOW = datetime.now(timezone.utc)


def _program(repo: Path, name: str, extra: str = "") -> None:
    folder = repo / ".autoloop/programs" / name
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(PROGRAM.format(name=name, extra=extra))
    (folder / "code/value.py").write_text("x = 1\n")


def _state(name: str, **machine: object) -> str:
    state = statefile.new_state(name, f"Improve {name}.", "score", "higher", None)
    return statefile.render_state(statefile.with_machine(state, dataclasses.replace(state.machine, **machine)))


@pytest.fixture
def fleet(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    """A repository with programs in every state the dashboard shows."""
    for name in ("active", "brandnew", "completed", "erroring", "paused", "plateau", "fresh"):
        _program(git_repo, name)
    (git_repo / ".autoloop/programs/template.md").write_text("<!-- AUTOLOOP:UNCONFIGURED -->\n# Template\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "programs")
    old = NOW - timedelta(hours=8)
    files = {
        "active.md": _state("active", last_run=old, iteration_count=4, best_metric=0.8, initial_metric=0.5,
                            recent_statuses=("accepted", "rejected", "error", "accepted")),
        "completed.md": _state("completed", last_run=old, iteration_count=9, best_metric=1.0, completed=True,
                               completed_reason="target metric 1 reached with value 1"),
        "erroring.md": _state("erroring", last_run=old, iteration_count=2, consecutive_errors=2,
                              recent_statuses=("error", "error")),
        "paused.md": _state("paused", last_run=old, iteration_count=3, paused=True, pause_reason="evaluator flaky"),
        "plateau.md": _state("plateau", last_run=old, iteration_count=5, recent_statuses=("rejected",) * 5),
        "fresh.md": _state("fresh", last_run=NOW - timedelta(hours=1), iteration_count=1, recent_statuses=("accepted",)),
    }
    MemoryStore(git_repo).commit(files, "arrange states")
    return git_repo


def _rows(output: str) -> dict[str, str]:
    """Returns each program's two table lines by name (the second: its strategy, its recent statuses)."""
    body = output.split("━╸", 1)[1].split("╵", 1)[0]
    lines = [line for line in body.splitlines() if "│" in line]
    return {first.split("│")[0].strip(): f"{first}\n{second}" for first, second in zip(lines[::2], lines[1::2])}


def test_status_shows_each_state(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--repo", str(fleet)]) == 0
    rows = _rows(capsys.readouterr().out)
    assert "🟢 active" in rows["active"] and "0.8" in rows["active"] and "0.5" in rows["active"]
    assert "✅❌⚠️✅" in rows["active"]
    assert "🟢 new" in rows["brandnew"] and "never" in rows["brandnew"]
    assert "✅ completed" in rows["completed"]
    assert "⚠️ 2 error(s)" in rows["erroring"]
    assert "⏸️ paused: evaluator flaky" in rows["paused"]
    assert "⏸️ plateau: 5 consecutive rejections" in rows["plateau"]
    assert "📝 unconfigured" in rows["template"]
    due_at = NOW - timedelta(hours=1) + timedelta(hours=6)
    due = due_at.strftime("%m-%d %H:%M" if due_at.year == NOW.year else "%Y-%m-%d")  # the column says UTC
    assert due in rows["fresh"]


def test_schedule_json_and_matrix(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedule", "--repo", str(fleet), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["selected"] == "brandnew"
    assert plan["due"] == ["brandnew", "active", "erroring"]
    reasons = {s["name"]: s["reason"] for s in plan["skipped"]}
    assert reasons == {
        "completed": "completed: target metric reached",
        "paused": "paused: evaluator flaky",
        "plateau": "plateau: 5 consecutive rejections",
        "fresh": "not due yet",
    }
    assert plan["unconfigured"] == ["template"]
    assert main(["schedule", "--repo", str(fleet), "--matrix", "--max", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["program"] == ["brandnew", "active"]


def test_pause_and_resume(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pause", "active", "--repo", str(fleet), "--reason", "holiday"]) == 0
    assert main(["status", "active", "--repo", str(fleet)]) == 0
    assert "⏸️ paused: holiday" in _rows(capsys.readouterr().out)["active"]
    assert main(["resume", "plateau", "--repo", str(fleet)]) == 0
    assert main(["resume", "active", "--repo", str(fleet)]) == 0
    assert main(["schedule", "--repo", str(fleet), "--json"]) == 0
    out = capsys.readouterr().out
    plan = json.loads(out[out.index("{"):])
    assert "plateau" in plan["due"] and "active" in plan["due"]
    memory = MemoryStore(fleet)
    active = statefile.parse_state(memory.read("active.md") or "").machine
    assert active.recent_statuses == ("accepted", "rejected", "error", "accepted")
    assert not active.paused and active.pause_reason is None
    # Resume invents no statuses: the plateau's rejections stay, and only statuses after the resume count.
    plateau = statefile.parse_state(memory.read("plateau.md") or "").machine
    assert plateau.recent_statuses == ("rejected",) * 5 and plateau.resumed_at == 5


def test_state_prints_the_file(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["state", "paused", "--repo", str(fleet)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Autoloop: paused\n")
    assert "| Pause Reason | evaluator flaky |" in out
    assert main(["state", "brandnew", "--repo", str(fleet)]) == 1
    assert "brandnew has no state file yet" in capsys.readouterr().err


def test_check_reports_file_and_line(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--repo", str(fleet)]) == 0
    program = fleet / ".autoloop/programs/active/program.md"
    program.write_text(program.read_text().replace("every 6h", "every fortnight"))
    assert main(["check", "--repo", str(fleet)]) == 1
    out = capsys.readouterr().out
    assert "✗ .autoloop/programs/active/program.md:2: frontmatter `schedule`: unparseable schedule 'every fortnight'" in out


def test_bad_input_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--repo", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "not inside a git repository" in err and "\n" not in err


def test_every_command_has_help_with_an_example() -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, sub in commands.items():
        text = sub.format_help()
        assert "example:" in text, name
        assert "--repo" in text, name


def test_verbose_before_the_command(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-v", "status", "--repo", str(fleet)]) == 0
    assert "autoloop programs" in capsys.readouterr().out
    assert main(["--verbose", "schedule", "--repo", str(fleet), "--json"]) == 0


def test_a_closed_pipe_is_not_an_error(fleet: Path) -> None:
    import subprocess
    import sys

    # The reader is gone before autoloop writes a byte, as with `autoloop status | head -0`.
    run = subprocess.Popen([sys.executable, "-m", "autoloop_py", "status", "--repo", str(fleet)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert run.stdout is not None and run.stderr is not None
    run.stdout.close()
    err = run.stderr.read().decode()
    assert run.wait(timeout=60) == 0
    assert "Traceback" not in err and "Broken" not in err and "error" not in err.lower()


def test_the_cli_starts_without_loading_pygithub_or_litellm() -> None:
    import subprocess
    import sys

    code = "import sys, autoloop_py.cli; print(sorted(m for m in ('github', 'requests', 'litellm') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_check_and_status_say_how_the_process_limit_holds(
    fleet: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    here = process_limit.describe(process_limit.resolve("auto"))
    for command in ("check", "status"):
        main([command, "--repo", str(fleet)])
        assert here in " ".join(capsys.readouterr().out.split())
    monkeypatch.setenv("AUTOLOOP_PROCESS_LIMIT", "off")
    for command in ("check", "status"):
        main([command, "--repo", str(fleet)])
        out = " ".join(capsys.readouterr().out.split())
        assert "NOT ENFORCED: the process limit of evaluations and agents (AUTOLOOP_PROCESS_LIMIT=off)" in out
    monkeypatch.setenv("AUTOLOOP_PROCESS_LIMIT", "jail")
    assert main(["check", "--repo", str(fleet)]) == 1
    assert "✗ AUTOLOOP_PROCESS_LIMIT must be one of auto, cgroup, uid, off, got 'jail'" in capsys.readouterr().out


@pytest.mark.skipif(os.geteuid() != 0 or process_limit.facts().setpriv is False or not process_limit.facts().can_setuid,
                    reason="a root runner that can start commands as a uid of their own")
def test_check_and_status_say_when_a_slot_uid_would_get_another_python3(
    fleet: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hidden = tmp_path / "home" / "bin"  # pytest's temporary folders are closed to other users
    hidden.mkdir(parents=True)
    (hidden / "python3").write_text("#!/bin/sh\nexec /usr/bin/env python3 \"$@\"\n")
    (hidden / "python3").chmod(0o755)
    program = fleet / ".autoloop/programs/active/program.md"
    program.write_text(program.read_text().replace("---\n", "---\nisolation: none\n", 1))
    monkeypatch.setenv("PATH", f"{hidden}:{os.environ['PATH']}")
    monkeypatch.delenv("AUTOLOOP_SLOT_USER", raising=False)  # the suite's default outside the sandbox tests is off
    for command in (["check", "--no-evaluate"], ["status"]):  # this python3 runs itself: never evaluate with it
        main([*command, "--repo", str(fleet)])
        out = " ".join(capsys.readouterr().out.split())
        assert f"NOT the runner's python3: evaluations and agents run as a uid of their own, which cannot reach " \
               f"{hidden}/python3, the first python3 on PATH" in out, out
