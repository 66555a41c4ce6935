"""End to end: `autoloop run` records a trace, then `autoloop tune` searches a candidate's knobs with gp_minimize."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from autoloop_py.cli import main
from autoloop_py.studies import tuning_run
from tests.programs import example_repo

pytest.importorskip("skopt", reason="scikit-optimize is not installed (pip install 'autoloop-py[tune]')")

SEARCH = ".autoloop/programs/function_minimization/code/search.py"

# A program whose seed is already optimal: no tuning can beat `spread = 5.0`.
PEAK_MD = """\
# Peak

## Goal

Find the best `spread`.

## Target

- `code/value.py`

## Evaluation

```bash
cd "$AUTOLOOP_PROGRAM_DIR" && python3 code/evaluate.py
```

The metric is `score`. Higher is better.
"""
PEAK_VALUE = "# EVOLVE-BLOCK-START\nspread = 5.0\n# EVOLVE-BLOCK-END\n"
PEAK_EVALUATE = """\
import json
namespace = {}
exec(open("code/value.py").read(), namespace)
print(json.dumps({"score": -(namespace["spread"] - 5.0) ** 2}))
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A repository where `autoloop run` has run function_minimization (3 iterations) and peak (1)."""
    with example_repo(tmp_path_factory.mktemp("tune")) as root:
        programs = root / ".autoloop/programs"
        (programs / "peak/code").mkdir(parents=True)
        (programs / "peak/program.md").write_text(PEAK_MD)
        (programs / "peak/code/value.py").write_text(PEAK_VALUE)
        (programs / "peak/code/evaluate.py").write_text(PEAK_EVALUATE)
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "programs")
        assert main(["run", "--repo", str(root), "--program", "function_minimization", "--iterations", "3"]) == 0
        assert main(["run", "--repo", str(root), "--program", "peak"]) == 0
        yield root


def _tune(capsys: pytest.CaptureFixture[str], repo: Path, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["tune", *argv, "--repo", str(repo)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_tune_reports_the_knob_table_the_curve_and_the_ceiling(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _tune(capsys, repo, "function_minimization", "--calls", "8")
    assert status == 0
    assert "5 knobs chosen by the literal finder: iterations, restarts, step_size, cooling, initial_temperature" in out
    assert f"knobs of {SEARCH} (literal finder)" in out
    assert "call 1/8 (original)" in out and "call 8/8 (gp)" in out
    assert "best so far per call (combined_score, higher is better)" in out
    assert ("Tuning ceiling" in out and "gain +" in out) or "no gain: no trial beat the candidate's" in out
    assert "the run's best" in out
    assert _git_status(repo) == ""  # nothing written to the checkout or any branch


def _git_status(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout


def test_tune_json_holds_the_trials_and_the_tuned_values(
    repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    written = tmp_path / "tuned.py"
    status, out, _ = _tune(capsys, repo, "function_minimization", "--calls", "8", "--json", "--write", str(written))
    assert status == 0
    report = json.loads(out)
    assert report["run"]["program"] == "function_minimization" and report["run"]["path"] == SEARCH
    assert [k["name"] for k in report["knobs"]] == ["iterations", "restarts", "step_size", "cooling",
                                                   "initial_temperature"]
    assert len(report["trials"]) == 8 and report["n_initial_points"] == 3
    first = report["trials"][0]
    assert first["kind"] == "original" and first["score"] == pytest.approx(report["baseline"])
    assert report["baseline"] == pytest.approx(report["candidate"]["recorded_score"])  # the evaluation is seeded
    assert report["outcome"] in ("improves", "no change")
    assert report["ceiling"] >= report["baseline"] and report["gain"] >= 0
    assert report["candidate"]["recorded_score"] == pytest.approx(report["run"]["run_best"])  # default: the best
    tuned = _namespace(written)
    assert tuned["PARAMS"] == report["best_values"]
    assert {k["name"]: k["tuned"] for k in report["knobs"]} == report["best_values"]


def _namespace(path: Path) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "tuned"}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return namespace


def test_tune_says_no_gain_when_nothing_beats_the_original(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _tune(capsys, repo, "peak", "--at-iteration", "0", "--calls", "4")
    assert status == 0
    assert "Tuning seed of peak (iteration 0, recorded -0" in out
    assert "no gain: no trial beat the candidate's -0 (recorded -0); tuning ceiling -0 (no change)" in out
    status, out, _ = _tune(capsys, repo, "peak", "--at-iteration", "0", "--calls", "4", "--json")
    report = json.loads(out)
    assert (report["outcome"], report["gain"], report["best_call"]) == ("no change", 0.0, 1)
    assert report["knobs"][0]["name"] == "spread" and report["knobs"][0]["tuned"] == 5.0


def test_ctrl_c_keeps_the_trials_so_far(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def two_then_interrupt(func: Callable[[list[Any]], float], dimensions: list[Any], **kwargs: Any) -> None:
        func(kwargs["x0"])
        func([d.high for d in dimensions])
        raise KeyboardInterrupt

    monkeypatch.setattr(tuning_run, "gp_minimize", lambda: two_then_interrupt)
    status, out, _ = _tune(capsys, repo, "function_minimization", "--calls", "8")
    assert status == 130
    assert "call 2/8 (random)" in out and "call 3/8" not in out
    assert "interrupted after 2 of 8 calls; the report covers the trials so far" in out


def test_the_model_chooses_the_knobs_when_asked(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from autoloop_py.proposers import llm

    knob = {"name": "step", "source_literal": "5.0", "context_line": "spread = 5.0", "low": 1, "high": 9,
            "scale": "linear", "kind": "float", "rationale": "the only constant"}
    asked: list[str] = []

    def complete(model: str, prompt: str) -> str:
        asked.append(model)
        assert "spread = 5.0" in prompt and "Pick at most 8 knobs" in prompt
        return json.dumps({"hparams": [knob, {"name": "bad"}]})

    monkeypatch.setattr(llm, "complete", complete)
    status, out, _ = _tune(capsys, repo, "peak", "--candidate", "seed", "--calls", "2", "--llm", "fake/model", "--json")
    report = json.loads(out)
    assert status == 0 and asked == ["fake/model"]
    assert report["run"]["knob_source"] == "llm fake/model"
    assert report["run"]["notes"] == ["entry 2: missing source_literal, context_line, low, high"]
    assert [(k["name"], k["low"], k["high"], k["rationale"]) for k in report["knobs"]] == [
        ("step", 1.0, 9.0, "the only constant")
    ]


def test_without_scikit_optimize_the_error_names_the_extra(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "skopt", None)
    status, _, err = _tune(capsys, repo, "function_minimization")
    assert status == 1
    assert err.startswith("error: autoloop tune needs scikit-optimize; install it with: pip install 'autoloop-py")


def test_tune_names_what_is_missing(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _tune(capsys, repo, "function_minimization", "--candidate", "it99")
    assert status == 1 and "no program 'it99' in the trace; known ids: seed, it1, it2, it3" in err
    status, _, err = _tune(capsys, repo, "nothing")
    assert status == 1 and "no program named 'nothing'" in err
    status, _, err = _tune(capsys, repo, "peak", "--calls", "1")
    assert status == 1 and "--calls must be at least 2" in err
