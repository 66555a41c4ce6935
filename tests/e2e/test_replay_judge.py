"""End to end: `autoloop run --proposer llm` on litellm's mock replies, then `autoloop replay` and `autoloop judge`.

Every model call is answered by litellm's `mock_response` (AUTOLOOP_MOCK_RESPONSE), so nothing leaves the machine.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import trace_samples as sample

from autoloop_py.cli import main
from autoloop_py.proposers import llm
from autoloop_py.state import trace
from tests.programs import program_md

PROG = ".autoloop/programs/demo"
PROGRAM_MD = program_md("Demo", "Make `x` as large as possible.", frontmatter={"evaluation-timeout": 20})
EVALUATE = """\
import json
ns = {}
exec(open("code/value.py").read(), ns)
print(json.dumps({"score": ns["x"]}))
"""
VERDICT = json.dumps({"labels": ["hyperparameter_tuning"], "rationale": "Only the value of x changes."})


def _edit(old: int, new: int) -> str:
    return f"SUMMARY: set x to {new}\n\ncode/value.py\n<<<<<<< SEARCH\nx = {old}\n=======\nx = {new}\n>>>>>>> REPLACE\n"


@pytest.fixture
def ran(git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:  # type: ignore[no-untyped-def]
    """A repository whose program `demo` ran three llm iterations: x 1 → 2 (kept) → 5 (kept, the best) → 3 (rejected)."""
    return run_demo(git_repo, run_git, monkeypatch, capsys)


def run_demo(git_repo: Path, run_git, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:  # type: ignore[no-untyped-def]
    """Runs the program `demo` three llm iterations in git_repo (what the `ran` fixture gives); returns git_repo."""
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    (git_repo / PROG / "code").mkdir(parents=True)
    (git_repo / PROG / "program.md").write_text(PROGRAM_MD)
    (git_repo / PROG / "code/value.py").write_text("x = 1\n")
    (git_repo / PROG / "code/evaluate.py").write_text(EVALUATE)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "program")
    for old, new in ((1, 2), (2, 5), (5, 3)):
        monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", _edit(old, new))
        assert main(["run", "--repo", str(git_repo), "--program", "demo", "--proposer", "llm",
                     "--model", "gpt-4o-mini"]) == 0
    capsys.readouterr()
    return git_repo


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_replay_of_the_best_reproduces_it(ran: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", _edit(2, 5))
    report = _json(capsys, "replay", "demo", "--repo", str(ran), "--event", "best", "--repeats", "3")
    assert (report["evaluated_with"], report["repeats"], report["attempts"]) == ("demo", 3, 1)
    (replay,) = report["replays"]
    assert (replay["variant"], replay["prompt_change"], replay["skipped"]) == ("exact", "", None)
    assert replay["event"] == {"id": "it2", "iteration": 2, "parent_id": "it1", "score": 5.0, "parent_score": 2.0,
                               "recorded_model": "gpt-4o-mini", "prompt_key": "iteration"}
    assert replay["model"] == "gpt-4o-mini"
    measures = replay["measures"]
    assert (measures["parse_success_rate"], measures["evaluation_success_rate"]) == (1.0, 1.0)
    assert (measures["exact_solution_match_rate"], measures["exact_response_match_rate"]) == (1.0, 1.0)
    assert (measures["score_mean"], measures["score_ratio"], measures["classes"]["similar"]) == (5.0, 1.0, 3)


def test_replay_with_another_reply_reports_what_differs(ran: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", _edit(2, 4))
    assert main(["replay", "demo", "--repo", str(ran), "--repeats", "2", "--model", "openai/gpt-4o"]) == 0
    out = capsys.readouterr().out
    assert "Replayed it2 of memory/autoloop:traces/demo (iteration 2, parent it1, score 5) 2× with openai/gpt-4o" in out
    for row in ("│ parse success         │ 100%      │", "│ exact solution        │ 0%        │",
                "│ score mean            │ 4         │", "│ replay/original       │ 0.800     │",
                "│ still_improves_parent │ 2         │", "│ prompt                │ unchanged │"):
        assert row in out
    assert "│ 1 │ yes    │ yes       │ 4     │ no          │ still_improves_parent │ 1        │" in out
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", _edit(7, 8))
    failed = _json(capsys, "replay", "demo", "--repo", str(ran), "--event", "it3", "--repeats", "1")["replays"][0]
    assert failed["event"]["parent_id"] == "it2"
    assert failed["trials"][0]["class"] == "parse_failed" and "matches no lines" in failed["trials"][0]["parse_error"]
    assert (failed["measures"]["parse_success_rate"], failed["measures"]["evaluation_success_rate"]) == (0.0, 0.0)
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", _edit(2, 5).replace("x = 5", "x = None"))
    broken = _json(capsys, "replay", "demo", "--repo", str(ran), "--repeats", "1")["replays"][0]["trials"][0]
    assert (broken["parsed"], broken["eval_ok"], broken["class"]) == (True, False, "eval_failed")
    assert broken["eval_error"] == "metric 'score' is not a number: null"


def test_replay_all_events_in_variants_with_attempts(ran: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    prompts: list[str] = []

    def complete(model: str, prompt: str, *, system: str = "", **params: object) -> str:
        prompts.append(prompt)
        # Each replay's first reply misses; the retry, shown why, reproduces the best.
        return _edit(2, 5) if "## Your previous reply" in prompt else _edit(9, 5)

    monkeypatch.setattr(llm, "complete", complete)
    report = _json(capsys, "replay", "demo", "--repo", str(ran), "--event", "all", "--repeats", "1",
                   "--attempts", "2", "--variant", "exact", "--variant", "strict_diff", "--variant", "no_history",
                   "--variant", "no_other_context", "--variant", "alternate_context")
    assert report["attempts"] == 2
    assert [(r["event"]["id"], r["variant"]) for r in report["replays"]] == [
        ("it2", v) for v in ("exact", "strict_diff", "no_history", "no_other_context", "alternate_context")]
    exact, strict, no_history, no_context, alternate = report["replays"]
    assert (strict["prompt_change"], no_history["prompt_change"]) == (
        "asked for SEARCH/REPLACE blocks only", "cut 'Recent history'")
    assert no_context["skipped"].startswith("the prompt has no section of other programs' context")
    assert alternate["skipped"].startswith("the prompt shows no context programs")
    assert (no_context["measures"], no_context["trials"]) == (None, [])
    for replay in (exact, strict, no_history):
        (trial,) = replay["trials"]
        assert (trial["attempts"], trial["class"], trial["exact_match"]) == (2, "similar", True)
        assert "matches no lines" in trial["earlier_errors"][0]
        assert replay["measures"]["attempts_mean"] == 2.0
    assert len(prompts) == 6
    assert "## Recent history" in prompts[0] and "## Recent history" not in prompts[4]
    assert "Output SEARCH/REPLACE edit blocks only" in prompts[2] and "x = 9" in prompts[3]
    assert main(["replay", "demo", "--repo", str(ran), "--repeats", "1", "--variant", "no_other_context"]) == 0
    out = capsys.readouterr().out
    assert "no_other_context skipped: the prompt has no section of other" in out and len(prompts) == 6


def test_judge_prints_label_prevalence(ran: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", VERDICT)
    cache = str(tmp_path / "cache")
    assert main(["judge", "demo", "--repo", str(ran), "--cache", cache]) == 0
    out = capsys.readouterr().out
    assert "Judged 3 of 3 edits of memory/autoloop:traces/demo with gpt-4o-mini (0 from the cache, 0 without" in out
    assert "│ hyperparameter_tuning │ 3     │ 100.0%     │ 0.666667    │ 1             │" in out
    again = _json(capsys, "judge", "demo", "--repo", str(ran), "--cache", cache, "--limit", "2")
    assert (again["summary"]["n_edits"], again["summary"]["n_cache_hits"]) == (2, 2)
    assert [(e["program_id"], e["parent_id"], e["score_change"]) for e in again["edits"]] == [
        ("it1", "seed", 1.0), ("it2", "it1", 3.0)]


def test_replay_of_a_trace_directory_without_its_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", "SUMMARY: D\n\nsolution.py\n```python\n" + sample.D + "```\n")
    run = sample.write_run(tmp_path / "run")
    report = _json(capsys, "replay", str(run), "--repo", str(tmp_path / "nowhere"), "--repeats", "2",
                   "--model", "openai/gpt-4o-mini")
    assert (report["replays"][0]["event"]["id"], report["evaluated_with"]) == ("D", None)
    measures = report["replays"][0]["measures"]
    assert (measures["parse_success_rate"], measures["exact_solution_match_rate"]) == (1.0, 1.0)
    assert (measures["evaluation_success_rate"], measures["classes"]["not_evaluated"]) == (None, 2)
    assert main(["replay", str(run), "--repo", str(tmp_path / "nowhere"), "--repeats", "1", "--model", "openai/x"]) == 0
    assert "not evaluated: the run's program is not in this repository" in capsys.readouterr().out


def test_without_a_model_each_command_names_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    files = {}
    for row, program in zip(sample.rows(), sample.PROGRAMS):
        prompts = {} if row.parent_id is None else {"iteration": {"system": "", "user": "improve", "responses": []}}
        files.update(trace.row_files("anon", replace(row, model=None, model_name=None), program[3], prompts))
    files[f"{trace.trace_dir('anon')}/replay_env.json"] = json.dumps({"evaluation": {"metric": "value"}})
    run = trace.export(files.get, sorted(files), "anon", tmp_path / "run")
    assert main(["replay", str(run), "--repo", str(tmp_path)]) == 1
    assert ("candidate 'D' records no model; pass --model with a litellm model name "
            "(for example --model openai/gpt-4o-mini)") in capsys.readouterr().err
    assert main(["judge", str(run), "--repo", str(tmp_path)]) == 1
    assert "no judge model: pass --model with a litellm model name" in capsys.readouterr().err


def test_a_missing_api_key_is_named_before_any_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AUTOLOOP_MOCK_RESPONSE", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = sample.write_run(tmp_path / "run")
    assert main(["replay", str(run), "--repo", str(tmp_path), "--model", "openai/gpt-4o-mini"]) == 1
    assert ("model 'openai/gpt-4o-mini' needs OPENAI_API_KEY in the environment; set it, or pass --model with a "
            "litellm model whose key you have") in capsys.readouterr().err
    assert main(["judge", str(run), "--repo", str(tmp_path), "--model", "openai/gpt-4o-mini"]) == 1
    assert "needs OPENAI_API_KEY" in capsys.readouterr().err


def test_a_model_litellm_cannot_place_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", "anything")
    run = sample.write_run(tmp_path / "run")
    assert main(["replay", str(run), "--repo", str(tmp_path)]) == 1  # the sample records `test/model`
    err = capsys.readouterr().err
    assert "litellm cannot tell the provider of model 'test/model' (" in err
    assert "pass --model with a provider-prefixed litellm model name such as openai/gpt-4o-mini" in err
