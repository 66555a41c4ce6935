"""End to end: a `models:` list of two loopback servers, one whose edits improve the metric and one whose edits do not.

The servers are OpenAI-compatible (tests/fake_openai.py) and scripted: each reads the current `x = N` from
the prompt it is sent and answers with an edit block. `autoloop run` draws the model of each iteration
from the state file's Models table; the tests assert what the servers received and what the table holds.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from autoloop_py.cli import main
from autoloop_py.state.model_stats import parse_models_section
from tests.e2e.test_run import PROG, _state, counter_repo  # noqa: F401 - the counter program fixture
from tests.fake_openai import fake_openai

_X_RE = re.compile(r"^x = (-?[0-9.]+)$", re.MULTILINE)


def _edit(step: float) -> Callable[[dict[str, Any]], str]:
    """Returns a server script that moves x by `step` (an improvement when positive)."""
    def reply(body: dict[str, Any]) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")
        found = _X_RE.search(prompt)
        x = float(found.group(1)) if found else 1.0
        return (f"SUMMARY: move x by {step:g}\n\n{PROG}/code/value.py\n<<<<<<< SEARCH\nx = {found.group(1) if found else x}\n"
                f"=======\nx = {x + step:g}\n>>>>>>> REPLACE\n")
    return reply


def _configure(repo: Path, frontmatter: str, folder: str = PROG) -> None:
    program = repo / folder / "program.md"
    program.write_text(program.read_text().replace("---\n", "---\n" + frontmatter, 1))
    subprocess.run(["git", "commit", "-qam", "models"], cwd=repo, check=True, capture_output=True)
    if subprocess.run(["git", "remote"], cwd=repo, check=True, capture_output=True, text=True).stdout.strip():
        subprocess.run(["git", "push", "-q", "origin", "main"], cwd=repo, check=True, capture_output=True)


def _run(repo: Path, iterations: int) -> int:
    return main(["run", "--repo", str(repo), "--program", "counter", "--proposer", "llm",
                 "--iterations", str(iterations)])


def _models(repo: Path) -> dict[str, Any]:
    state = _state(repo)
    table = parse_models_section(state.section_text("models"), state.path)
    return {row.name: row for row in table.rows}


def _two_models(good: str, bad: str, selection: str) -> str:
    return (
        f"model-selection: {selection}\n"
        "models:\n"
        f"  - model: openai/good\n    api-base: {good}\n    temperature: 0.3\n    max-tokens: 256\n    top-p: 0.9\n"
        "    input-cost-per-token: 0.000001\n    output-cost-per-token: 0.000002\n"
        f"  - model: openai/bad\n    api-base: {bad}\n"
        "    input-cost-per-token: 0.00001\n    output-cost-per-token: 0.00002\n"
    )


@pytest.mark.parametrize("selection", ["ucb", "thompson"])
def test_the_bandit_moves_the_draw_to_the_model_that_improves(
    counter_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    selection: str,
) -> None:
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    with fake_openai("reply", monkeypatch, _edit(+1), tokens=100) as good, \
            fake_openai("reply", monkeypatch, _edit(-5), tokens=100) as bad:
        _configure(counter_repo, _two_models(good.base_url, bad.base_url, selection))
        assert _run(counter_repo, 12) == 0
    rows = _models(counter_repo)
    assert rows["openai/good"].calls + rows["openai/bad"].calls == 12
    # Each model is tried; after that the improving one gets most of the draws.
    assert rows["openai/bad"].calls >= 1 and rows["openai/good"].calls >= 8
    assert rows["openai/good"].accepted == rows["openai/good"].calls and rows["openai/bad"].accepted == 0
    assert rows["openai/good"].improvement == rows["openai/good"].calls
    assert good.requests == rows["openai/good"].calls and bad.requests == rows["openai/bad"].calls
    # Spend per model: 200 tokens a call, priced by each entry's own per-token prices.
    assert rows["openai/good"].tokens == 200 * good.requests
    assert rows["openai/good"].usd == pytest.approx(good.requests * 100 * (0.000001 + 0.000002))
    assert rows["openai/bad"].usd == pytest.approx(bad.requests * 100 * (0.00001 + 0.00002))
    machine = _state(counter_repo).machine
    assert machine.spent is not None
    assert machine.spent.usd == pytest.approx(rows["openai/good"].usd + rows["openai/bad"].usd)
    _shows_the_figures(counter_repo, rows, capsys, tmp_path)


def _shows_the_figures(repo: Path, rows: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`status`, `analyze --json` and `report` show per model: calls, accepted share, improvement, spend."""
    good, bad = rows["openai/good"], rows["openai/bad"]
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "200")  # the rich table's cells on one line each
        assert main(["status", "--repo", str(repo), "counter"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"openai/good\s*│\s*{good.calls}\s*│\s*{good.calls} \(100%\)\s*│\s*{good.calls}\s*│"
                     rf"\s*{good.tokens} tokens, \${good.usd:.4f}", out), out
    assert re.search(rf"openai/bad\s*│\s*{bad.calls}\s*│\s*0 \(0%\)\s*│\s*0\s*│", out), out
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "200")
        assert main(["analyze", "--repo", str(repo), "counter"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"openai/good\s*│\s*{good.calls}\s*│\s*{good.calls} \(100%\)\s*│", out), out
    assert main(["analyze", "--repo", str(repo), "counter", "--json"]) == 0
    figures = {m["model"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    assert (figures["openai/good"]["calls"], figures["openai/good"]["accepted_share"]) == (good.calls, 1.0)
    assert figures["openai/good"]["improvement"] == pytest.approx(good.improvement)
    assert figures["openai/good"]["cost"] == pytest.approx(good.usd)
    assert (figures["openai/bad"]["accepted"], figures["openai/bad"]["improvement"]) == (0, 0)
    page = tmp_path / "report.html"
    assert main(["report", "--repo", str(repo), "counter", "--out", str(page)]) == 0
    data = re.search(r'<script type="application/json" id="run-data">(.*?)</script>', page.read_text(), re.DOTALL)
    assert data is not None
    assert {m["model"]: m["calls"] for m in json.loads(data.group(1))["models"]} == {
        "openai/good": good.calls, "openai/bad": bad.calls}


def test_sampling_controls_reach_the_request_body(counter_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    with fake_openai("reply", monkeypatch, _edit(+1)) as good, fake_openai("reply", monkeypatch, _edit(-5)) as bad:
        _configure(counter_repo, _two_models(good.base_url, bad.base_url, "weighted"))
        assert _run(counter_repo, 4) == 0
    assert good.bodies, "the weighted draw never picked openai/good in 4 iterations"
    for body in good.bodies:
        assert (body["model"], body["temperature"], body["max_tokens"], body["top_p"]) == ("good", 0.3, 256, 0.9)
    for body in bad.bodies:  # the other entry sets none: the provider's defaults
        assert "temperature" not in body and "max_tokens" not in body and "top_p" not in body
    entry = _state(counter_repo).history[0]
    assert "- **Model**: openai/" in entry.text and "- **Model spend**: openai/" in entry.text


def test_a_hand_set_weight_of_zero_keeps_a_model_out(counter_repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                     run_git) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    with fake_openai("reply", monkeypatch, _edit(+1)) as good, fake_openai("reply", monkeypatch, _edit(-5)) as bad:
        _configure(counter_repo, _two_models(good.base_url, bad.base_url, "ucb"))
        assert _run(counter_repo, 2) == 0  # ucb tries each model once
        _edit_state(counter_repo, run_git, lambda text: re.sub(r"\| `openai/good` \| — \|", "| `openai/good` | 0 |", text))
        before = bad.requests
        assert _run(counter_repo, 3) == 0
    assert good.requests == 1 and bad.requests == before + 3
    assert _models(counter_repo)["openai/good"].weight == 0


def test_a_malformed_models_row_stops_the_run_naming_its_line(
    counter_repo: Path, monkeypatch: pytest.MonkeyPatch, run_git, capsys: pytest.CaptureFixture[str]  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    with fake_openai("reply", monkeypatch, _edit(+1)) as good, fake_openai("reply", monkeypatch, _edit(-5)) as bad:
        _configure(counter_repo, _two_models(good.base_url, bad.base_url, "ucb"))
        assert _run(counter_repo, 1) == 0
        text = _edit_state(counter_repo, run_git, lambda t: re.sub(r"(\| `openai/\w+` \| — \|) 1 \|", r"\1 many |", t))
        requests = good.requests + bad.requests
        assert _run(counter_repo, 1) != 0
        assert good.requests + bad.requests == requests  # no model was asked
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "| many |" in row)
    assert f"counter.md:{line}: Calls is 'many', which is not a whole number >= 0" in capsys.readouterr().err


def _edit_state(repo: Path, run_git, change: Callable[[str], str]) -> str:  # type: ignore[no-untyped-def]
    """Edits the state file on the memory branch as a person would (a commit pushed to the remote); returns its text."""
    run_git(repo, "fetch", "-q", "origin", "memory/autoloop")
    run_git(repo, "checkout", "-q", "-B", "hand", "origin/memory/autoloop")
    path = repo / "counter.md"
    edited = change(path.read_text())
    assert edited != path.read_text()
    path.write_text(edited)
    run_git(repo, "commit", "-qam", "hand edit of the Models table")
    run_git(repo, "push", "-q", "origin", "hand:memory/autoloop")
    run_git(repo, "checkout", "-q", "main")
    return edited


def test_a_strategys_guide_calls_go_to_the_guide_model_and_are_counted(  # type: ignore[no-untyped-def]
    git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from autoloop_py.loop.iteration.iteration import run_iteration
    from autoloop_py.loop.iteration.options import RunOptions
    from autoloop_py.program.model import load_program
    from autoloop_py.state import file as statefile
    from autoloop_py.state.memory import MemoryStore
    from tests.e2e.test_evox_run import LABELS_REPLY, NAME, PROGRAM, STATE, _install

    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    repo = _install(git_repo, run_git, "switch_interval: 2\nimprovement_threshold: 0.5\nmeta_attempts: 1\n")
    with fake_openai("reply", monkeypatch, "SUMMARY: nothing\n", tokens=10) as proposer, \
            fake_openai("reply", monkeypatch, LABELS_REPLY, tokens=50) as guide:
        _configure(repo, "models:\n"
                   f"  - model: openai/solver\n    api-base: {proposer.base_url}\n"
                   f"  - model: openai/meta\n    api-base: {guide.base_url}\n    role: guide\n"
                   "    input-cost-per-token: 0.001\n    output-cost-per-token: 0.001\n", PROGRAM)
        program = load_program(repo, Path(PROGRAM) / "program.md")
        for _ in range(3):  # 1 scores the Target as it is and asks the guide for labels; 2 and 3 propose
            run_iteration(repo, program, RunOptions(proposer="llm"))
    assert guide.requests == 1 and proposer.requests >= 1
    state = statefile.parse_state(MemoryStore(repo).read(STATE) or "", STATE)
    rows = {row.name: row for row in parse_models_section(state.section_text("models"), STATE).rows}
    assert (rows["openai/meta"].calls, rows["openai/meta"].tokens, rows["openai/meta"].usd) == (0, 100, 0.1)
    assert rows["openai/solver"].calls == 2 and rows["openai/solver"].tokens == 20 * proposer.requests
    # The guide's tokens and dollars count in the program's spend, which its budgets are checked against.
    assert state.machine.spent is not None
    assert state.machine.spent.tokens == 100 + 20 * proposer.requests and state.machine.spent.usd == pytest.approx(0.1)
    # EvoX asks for its labels in the first iteration, which scores the Target as it is: no model proposed there.
    first = state.history[-1]
    assert "- **Model spend**: openai/meta: 100 tokens, $0.1\n" in first.text and "- **Model**:" not in first.text
    # The trace-based views count the guide's spend too (on the trace row of the iteration that paid it).
    capsys.readouterr()
    assert main(["analyze", "--repo", str(repo), NAME, "--json"]) == 0
    figures = {m["model"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    assert (figures["openai/meta"]["calls"], figures["openai/meta"]["tokens"]) == (0, 100)
    assert figures["openai/meta"]["cost"] == pytest.approx(0.1)
    page = tmp_path / "report.html"
    assert main(["report", "--repo", str(repo), NAME, "--out", str(page)]) == 0
    data = re.search(r'<script type="application/json" id="run-data">(.*?)</script>', page.read_text(), re.DOTALL)
    assert data is not None
    shown = {m["model"]: m for m in json.loads(data.group(1))["models"]}
    assert (shown["openai/meta"]["tokens"], shown["openai/meta"]["cost"]) == (100, pytest.approx(0.1))


def test_judge_replay_and_customize_calls_count_in_the_programs_spend(  # type: ignore[no-untyped-def]
    git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from autoloop_py.state import file as statefile
    from autoloop_py.state.memory import MemoryStore
    from tests.e2e.test_replay_judge import VERDICT
    from tests.e2e.test_replay_judge import _edit as edit
    from tests.e2e.test_replay_judge import run_demo

    repo = run_demo(git_repo, run_git, monkeypatch, capsys)

    def spend() -> tuple[int, int, int]:
        state = statefile.parse_state(MemoryStore(repo).read("demo.md") or "", "demo.md")
        (row,) = statefile.models_of(state).rows
        assert state.machine.spent is not None and row.name == "gpt-4o-mini"
        return state.machine.spent.tokens, row.tokens, row.calls

    total, tokens, calls = spend()
    assert calls == 3 and tokens == total > 0
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", VERDICT)
    assert main(["judge", "demo", "--repo", str(repo), "--cache", str(tmp_path / "cache")]) == 0
    after_judge = spend()
    # Three judge calls: more tokens in the program's Spent and the model's row; no more proposals.
    assert after_judge[0] > total and after_judge[1] - tokens == after_judge[0] - total and after_judge[2] == 3
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", edit(2, 5))
    assert main(["replay", "demo", "--repo", str(repo), "--repeats", "2"]) == 0
    after_replay = spend()
    assert after_replay[0] > after_judge[0] and after_replay[1] - after_judge[1] == after_replay[0] - after_judge[0]
    # customize: a reply that cannot be used is refused, and still paid for.
    (repo / ".autoloop/programs/demo/program.md").write_text(
        (repo / ".autoloop/programs/demo/program.md").read_text() + "\n<CUSTOMIZE: a note>\n")
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", "not json")
    assert main(["customize", "demo", "--model", "gpt-4o-mini", "--repo", str(repo)]) == 1
    after_customize = spend()
    assert after_customize[0] > after_replay[0] and after_customize[2] == 3
    log = run_git(repo, "log", "--format=%s", "memory/autoloop")
    for what in ("judge", "replay", "customize"):
        assert f"[Autoloop: demo] spend of {what}" in log


def test_a_reached_budget_stops_judge_replay_and_customize_before_any_call(  # type: ignore[no-untyped-def]
    git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.e2e.test_replay_judge import VERDICT, run_demo

    repo = run_demo(git_repo, run_git, monkeypatch, capsys)
    program = repo / ".autoloop/programs/demo/program.md"
    program.write_text("---\nbudget-tokens: 10\n---\n" + program.read_text() + "\n<CUSTOMIZE: a note>\n")
    log = run_git(repo, "log", "--format=%s", "memory/autoloop")
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", VERDICT)
    capsys.readouterr()
    for argv in (["judge", "demo", "--cache", str(tmp_path / "cache")], ["replay", "demo", "--repeats", "1"],
                 ["customize", "demo", "--model", "gpt-4o-mini"]):
        assert main([*argv, "--repo", str(repo)]) == 1
        err = capsys.readouterr().err
        assert f"demo: no {argv[0]} call: budget reached: spent " in err and "(budget-tokens)" in err
    assert run_git(repo, "log", "--format=%s", "memory/autoloop") == log  # nothing spent, nothing recorded


def test_an_iteration_killed_after_its_candidate_push_still_counts_in_the_models_table(
    counter_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal
    import sys

    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    with fake_openai("reply", monkeypatch, _edit(+1), tokens=100) as good:
        _configure(counter_repo, "models:\n"
                   f"  - model: openai/good\n    api-base: {good.base_url}\n"
                   "    input-cost-per-token: 0.000001\n    output-cost-per-token: 0.000002\n")
        killed = subprocess.run(
            [sys.executable, "-m", "autoloop_py", "run", "--repo", str(counter_repo), "--program", "counter",
             "--proposer", "llm", "--iterations", "1"],
            env={**os.environ, "AUTOLOOP_FAULT": "after-candidate-push"}, capture_output=True, text=True, timeout=120,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert good.requests == 1
        assert _run(counter_repo, 1) == 0  # records the killed run's candidate, then runs its own iteration
    state = _state(counter_repo)
    recovered = next(entry for entry in state.history if "interrupted run" in entry.text)
    assert "- **Model**: openai/good\n" in recovered.text
    assert "- **Model spend**: openai/good: 200 tokens, $0.0003\n" in recovered.text
    row = _models(counter_repo)["openai/good"]
    assert (row.calls, row.accepted, row.tokens) == (2, 2, 400) and good.requests == 2
    assert row.usd == pytest.approx(2 * 100 * (0.000001 + 0.000002))
    assert state.machine.spent is not None and state.machine.spent.usd == pytest.approx(row.usd)


def test_prices_in_scientific_notation_price_the_run_and_a_word_is_refused_naming_the_entry(
    counter_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    with fake_openai("reply", monkeypatch, _edit(+1), tokens=100) as good:
        # `5e-07` is a string to PyYAML (YAML 1.1 wants `5.0e-07`); a price is written this way all the same.
        _configure(counter_repo, "models:\n"
                   f"  - model: openai/good\n    api-base: {good.base_url}\n"
                   "    input-cost-per-token: 5e-07\n    output-cost-per-token: 1.5E-6\n")
        assert main(["check", "--repo", str(counter_repo)]) == 0
        assert _run(counter_repo, 2) == 0
    row = _models(counter_repo)["openai/good"]
    assert row.calls == 2 == good.requests
    assert row.usd == pytest.approx(2 * 100 * (5e-07 + 1.5e-06))
    program = counter_repo / PROG / "program.md"
    program.write_text(program.read_text().replace("1.5E-6", "1.5E-6 dollars"))
    line = next(n for n, text in enumerate(program.read_text().splitlines(), 1) if "dollars" in text)
    capsys.readouterr()
    assert main(["check", "--repo", str(counter_repo)]) == 1
    assert (f"{PROG}/program.md:{line}: frontmatter `models`: item 1 (openai/good): `output-cost-per-token` "
            "must be a finite number >= 0, got '1.5E-6 dollars'") in " ".join(capsys.readouterr().out.split())


def _guide_run(git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch, mode: str):  # type: ignore[no-untyped-def]
    """Runs one EvoX iteration through the CLI whose guide (labels) call goes to a server in `mode`; returns
    (exit code, the guide server, the memory branch's state file or None)."""
    from autoloop_py.state import file as statefile
    from autoloop_py.state.memory import MemoryStore
    from tests.e2e.test_evox_run import NAME, PROGRAM, STATE, _install

    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    repo = _install(git_repo, run_git, "switch_interval: 2\nimprovement_threshold: 0.5\nmeta_attempts: 1\n")
    with fake_openai("reply", monkeypatch, "SUMMARY: nothing\n") as proposer, fake_openai(mode, monkeypatch) as guide:
        _configure(repo, "models:\n"
                   f"  - model: openai/solver\n    api-base: {proposer.base_url}\n"
                   f"  - model: openai/meta\n    api-base: {guide.base_url}\n    role: guide\n", PROGRAM)
        code = main(["run", "--repo", str(repo), "--program", NAME, "--proposer", "llm", "--llm-retries", "0"])
    text = MemoryStore(repo).read(STATE)
    return code, guide, (statefile.parse_state(text, STATE) if text else None)


def test_a_guide_model_the_server_does_not_know_stops_the_run_naming_it(  # type: ignore[no-untyped-def]
    git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, guide, state = _guide_run(git_repo, run_git, monkeypatch, "no-model")
    assert code == 1 and guide.requests == 1 and state is None  # nothing recorded, no pause counted
    err = " ".join(capsys.readouterr().err.split())
    assert ("the strategy's guide call (the `role: guide` entry of `models:`) failed: model 'openai/meta': the "
            f"server at {guide.base_url}/chat/completions says the model does not exist") in err
    assert "Traceback" not in err


def test_a_guide_server_that_fails_for_now_leaves_the_iteration_running(  # type: ignore[no-untyped-def]
    git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, guide, state = _guide_run(git_repo, run_git, monkeypatch, "server-error")
    assert code == 0 and guide.requests == 1 and state is not None
    entry = state.history[0]
    # The Target as it is, scored (no better than its baseline) with EvoX's default labels instead of the guide's.
    assert (entry.iteration, entry.status) == (1, "rejected") and "the Target as it is" in entry.text
