"""End to end: `autoloop status` at 100 columns shows every figure whole; a long pause reason takes one line."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.commands.common import format_metric
from autoloop_py.state import file as statefile
from autoloop_py.state.machine import Spend
from autoloop_py.state.memory import MemoryStore

PROGRAM = """\
---
schedule: every 6h
budget-usd: 5
budget-tokens-per-day: 250000
---

# {name}

## Goal

Improve {name}.

## Target

- `code/value.py`

## Evaluation

```bash
python3 -c "print('{{\\"score\\": 1}}')"
```

The metric is `score`. Lower is better.
"""
REASON = ("evaluation failed 5 times in a row: ModuleNotFoundError: No module named 'numpy' while importing "
          "code/evaluate.py from the repository root; install it with `autoloop deps long_figures_program --install` "
          "and then resume the program with `autoloop resume long_figures_program`")
NOW = datetime.now(timezone.utc).replace(microsecond=0)


@pytest.fixture
def repo(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    """Two programs whose figures are as long as they get: tiny and negative metrics, a long pause reason."""
    for name in ("long_figures_program", "negative_figures"):
        folder = git_repo / ".autoloop/programs" / name
        (folder / "code").mkdir(parents=True)
        (folder / "program.md").write_text(PROGRAM.format(name=name))
        (folder / "code/value.py").write_text("x = 1\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "programs")
    files = {}
    for name, best, initial, paused in (("long_figures_program", 4.61234e-05, 0.0687432, True),
                                        ("negative_figures", -123456.7, -0.000123457, False)):
        state = statefile.new_state(name, f"Improve {name}.", "score", "lower", None)
        machine = dataclasses.replace(
            state.machine, last_run=NOW - timedelta(hours=8), iteration_count=12345, best_metric=best,
            initial_metric=initial, paused=paused, pause_reason=REASON if paused else None,
            recent_statuses=("accepted", "rejected", "error", "accepted", "rejected") * 2,
            spent=Spend(tokens=1234567, usd=4.56), spent_today=Spend(tokens=234567, usd=0.81, day=NOW.date()),
        )
        files[f"{name}.md"] = statefile.render_state(statefile.with_machine(state, machine))
    MemoryStore(git_repo).commit(files, "arrange states")
    return git_repo


def _status(repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *words: str) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["status", *words, "--repo", str(repo)]) == 0
    return capsys.readouterr().out


def test_every_figure_is_whole_at_100_columns(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _status(repo, capsys, monkeypatch)
    lines = out.split("\nsandbox:")[0].splitlines()  # the table (the sandbox lines wrap as the terminal does)
    assert max(len(line) for line in lines) <= 100, out
    ran = NOW - timedelta(hours=8)
    last_run = ran.strftime("%m-%d %H:%M" if ran.year == NOW.year else "%Y-%m-%d")  # the column says UTC
    figures = [format_metric(value) for value in (4.61234e-05, 0.0687432, -123456.7, -0.000123457)]
    for figure in [*figures, "12345", last_run, "$4.56/$5", "234567/250000"]:
        assert any(figure in line for line in lines), f"{figure} is not whole in:\n{out}"
    assert "…" not in "".join(line for line in lines if "negative_figures" in line), out


def test_a_long_pause_reason_takes_one_line_and_status_program_shows_it_whole(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _status(repo, capsys, monkeypatch)
    table = out.split("\nsandbox:")[0].splitlines()
    row = [line for line in table if "⏸️ paused:" in line]
    assert len(row) == 1 and "…" in row[0], out  # cut on its own line
    # The paused program is not due (until resumed); the other one, run 8 hours ago every 6 hours, is.
    assert " now " not in row[0] and " — " in row[0], out
    assert [line for line in table if line.startswith(" negative_figures") and " now " in line], out
    words = ("failed", "numpy", "repository", "resume")
    assert not [line for line in table if any(word in line for word in words)], out  # and not wrapped further
    out = _status(repo, capsys, monkeypatch, "long_figures_program")
    assert f"Status: ⏸️ paused: {REASON}" in " ".join(out.split()), out


def test_status_program_shows_the_prompts_table_with_its_figures_whole_at_100_columns(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = ("| `terse` | — | 12345 | 6789 | 0.000123457 | 98765432 | Change one constant at a time, " + "and say why, " * 40
            + "|\n| `never_drawn_variant` | 0 | 0 | 0 | 0 | 0 | — |\n")
    table = "## 🧪 Prompts\n\n| Variant | Weight | Calls | Accepted | Improvement | Tokens | Instruction |\n|---|---|---|---|---|---|---|\n"
    MemoryStore(repo).update("long_figures_program.md", lambda text: (text or "").replace(
        "## 📊", table + rows + "\n## 📊", 1), "by hand")
    out = _status(repo, capsys, monkeypatch, "long_figures_program")
    lines = out.split("prompts", 1)[1].splitlines()
    assert lines and max(len(line) for line in lines) <= 100, out
    terse = next(line for line in lines if "terse" in line)
    for figure in ("12345", "6789 (55%)", f"{0.000123457 / 12345:.6g}", "98765432"):
        assert figure in terse, f"{figure} is not whole in:\n{out}"
    assert any("never_drawn_variant" in line and " 0 " in line and "—" in line for line in lines), out
    assert "say why" in out and out.count("say why") < 40  # the instruction is cut
