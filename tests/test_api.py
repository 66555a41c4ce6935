"""The Python API: evolve without a repository, run a program of one (the same state as `autoloop run`), load."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import autoloop_py as al
from autoloop_py.cli import main
from autoloop_py.state.file import parse_state
from tests.fake_openai import fake_openai

CODE = "X = 3.0\nY = -2.0\n\n\ndef point():\n    return X, Y\n"
PROG = ".autoloop/programs/evolved"


def score(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x, y = module.point()
    return {"closeness": -math.hypot(x - 1.0, y - 0.5)}


def test_evolve_with_a_scorer_function_keeps_only_better_code_and_returns_the_best(
        tmp_path: Path, isolated_git_config: None) -> None:
    seen: list[al.IterationOutcome] = []
    result = al.evolve(CODE, evaluate=score, iterations=4, proposer="tune", workdir=tmp_path / "w",
                       on_iteration=seen.append, quiet=True)
    assert [o.iteration for o in seen] == [1, 2, 3, 4] and list(result.outcomes) == seen
    baseline = -math.hypot(3.0 - 1.0, -2.0 - 0.5)
    kept = [o.metric for o in seen if o.status == "accepted"]
    assert kept == sorted(kept) and all(metric > baseline for metric in kept)
    assert result.best_metric == pytest.approx(max([baseline, *kept]))
    # The best code is the branch's tip: scoring it here gives the best metric.
    best = tmp_path / "best.py"
    best.write_text(result.best_code)
    assert score(str(best))["closeness"] == pytest.approx(result.best_metric)
    assert result.state_file == tmp_path / "w" / "evolved.md"
    state = parse_state(result.state_file.read_text())
    assert state.machine.best_metric == result.best_metric
    assert [row.id for row in result.record.trace] == ["seed", "it1", "it2", "it3", "it4"]
    assert result.record.program.evaluation.metric == "closeness"  # the scorer's only key


def test_evolve_with_a_shell_command_scores_the_candidate_file(tmp_path: Path, isolated_git_config: None) -> None:
    scorer = tmp_path / "score.py"
    scorer.write_text("import json, sys\nvalues = {}\nexec(open(sys.argv[1]).read(), values)\n"
                      "print(json.dumps({'combined_score': -abs(values['X'] - 1.0)}))\n")
    result = al.evolve("X = 4.0\n", evaluate="python3 score.py", files={"score.py": scorer}, iterations=3,
                       direction="higher", workdir=tmp_path / "w", quiet=True)
    assert result.record.program.evaluation.metric == "combined_score"
    assert result.best_metric is not None and result.best_metric >= -3.0
    assert result.best_code.startswith("X = ")


def test_evolve_through_a_model_on_loopback(tmp_path: Path, isolated_git_config: None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    reply = (f"SUMMARY: move X to 1\n\n{PROG}/code/solution.py\n<<<<<<< SEARCH\nX = 3.0\n=======\nX = 1.0\n"
             ">>>>>>> REPLACE\n")
    with fake_openai("reply", monkeypatch, reply=reply) as server:
        result = al.evolve(CODE, evaluate=score, iterations=1, proposer="llm", model="openai/test-model",
                           workdir=tmp_path / "w", quiet=True)
    assert server.requests, "the model was asked"
    assert [o.status for o in result.outcomes] == ["accepted"]
    assert "X = 1.0" in result.best_code


@pytest.mark.parametrize("bad, says", [
    (lambda path: {"x": 1.0}, "lambda"),
    (42, "function taking the candidate file's path"),
    (len, "cannot be read"),
])
def test_evolve_refuses_a_scorer_whose_source_cannot_be_copied(tmp_path: Path, bad, says: str) -> None:
    with pytest.raises(al.AutoloopError, match=re.escape(says)):
        al.evolve(CODE, evaluate=bad, workdir=tmp_path / "w")


LIMIT = 2.0


def uses_a_global(path):
    return {"x": LIMIT}


def test_evolve_names_the_globals_a_scorer_would_lose(tmp_path: Path) -> None:
    with pytest.raises(al.AutoloopError, match="global names LIMIT"):
        al.evolve(CODE, evaluate=uses_a_global, workdir=tmp_path / "w")


def test_api_run_gives_the_state_file_the_command_line_gives(tmp_path: Path, isolated_git_config: None) -> None:
    results = {}
    for way in ("api", "cli"):
        work = tmp_path / way
        shutil.copytree(Path(__file__).parents[1] / ".autoloop/programs/function_minimization",
                        work / "repo/.autoloop/programs/function_minimization")
        _repository(work)
        root = work / "repo"
        if way == "api":
            al.run("function_minimization", repo=root, iterations=3, quiet=True)
        else:
            assert main(["run", "--repo", str(root), "--program", "function_minimization", "--iterations", "3"]) == 0
        results[way] = al.load("function_minimization", repo=root)
    assert _comparable(results["api"].text) == _comparable(results["cli"].text)
    assert [r.metrics for r in results["api"].trace] == [r.metrics for r in results["cli"].trace]


def test_api_errors_are_the_command_lines(tmp_path: Path, git_repo: Path) -> None:
    with pytest.raises(al.AutoloopError, match="no program named 'nothing'|nothing"):
        al.run("nothing", repo=git_repo, quiet=True)
    with pytest.raises(al.AutoloopError, match="--parallel"):
        al.run("nothing", repo=git_repo, parallel=999, quiet=True)


def test_the_package_shows_its_api() -> None:
    assert {"run", "evolve", "load", "RunResult"} <= set(dir(al))
    assert al.evolve.__doc__ and al.run.__doc__ and al.load.__doc__
    with pytest.raises(AttributeError):
        al.nothing_here  # noqa: B018


def _repository(work: Path) -> None:
    root, origin = work / "repo", work / "origin.git"
    for args, cwd in ((["init", "-q", "--bare", "-b", "main", str(origin)], work),
                      (["init", "-q", "-b", "main"], root), (["config", "user.name", "T"], root),
                      (["config", "user.email", "t@example.invalid"], root),
                      (["remote", "add", "origin", str(origin)], root),
                      (["add", "-A"], root), (["commit", "-q", "-m", "programs"], root),
                      (["push", "-q", "origin", "main"], root)):
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _comparable(text: str) -> str:
    """Returns the state file without what differs between two runs of the same seed: times, keys, durations."""
    text = re.sub(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?(\.\d+)?(Z|[+-]\d{2}:?\d{2}| UTC)?", "TIME", text)
    text = re.sub(r"function_minimization:\d+:[0-9a-f]+", "KEY", text)
    text = re.sub(r"\b[0-9a-f]{40}\b", "SHA", text)  # commits carry their times
    return re.sub(r"\d+(\.\d+)?\s?(s|ms|seconds)\b", "DURATION", text)


def test_the_example_in_docs_api_runs_as_written(tmp_path: Path, isolated_git_config: None) -> None:
    page = (Path(__file__).parents[1] / "docs" / "api.md").read_text()
    example = re.search(r"```python\n(.*?)```", page, re.DOTALL).group(1)
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(Path(__file__).parents[1])}
    (tmp_path / "example.py").write_text(example)  # a scorer's source is read from its file, as in a notebook cell
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    best, *code, statuses = done.stdout.strip().splitlines()
    baseline = sum(abs((3.0 * x - 2.0) - (0.5 * x + 1.0)) for x in range(5))
    assert float(best) <= baseline and "def fit(x):" in "\n".join(code)
    assert statuses.startswith("[") and statuses.count("'") == 10  # five statuses
