"""End to end: autoloop installed without its `llm` extra (what the workflow's plan and publish jobs install).

Everything but a model call works without litellm; the llm proposer says which extra installs it.
"""

from __future__ import annotations

import json

import sys
from pathlib import Path
from typing import Callable

import pytest

from autoloop_py.cli import main


@pytest.fixture
def without_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes `import litellm` fail as it does where it is not installed."""
    monkeypatch.setitem(sys.modules, "litellm", None)


@pytest.mark.usefixtures("installed_from_an_index", "without_litellm")
def test_init_schedule_run_and_status_need_no_litellm_and_the_llm_proposer_names_the_extra(
    git_repo_with_origin: Path, run_git: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_repo_with_origin
    assert main(["init", "--repo", str(repo)]) == 0
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "autoloop")
    run_git(repo, "push", "-q", "origin", "main")
    capsys.readouterr()

    assert main(["schedule", "--repo", str(repo), "--matrix"]) == 0
    assert json.loads(capsys.readouterr().out)["program"] == ["example"]
    assert main(["run", "--repo", str(repo), "--program", "example", "--proposer", "tune"]) == 0
    assert main(["status", "--repo", str(repo)]) == 0
    assert "example" in capsys.readouterr().out

    assert main(["run", "--repo", str(repo), "--program", "example", "--proposer", "llm", "--model", "openai/x"]) == 1
    err = capsys.readouterr().err
    assert "the llm proposer needs litellm: python3 -m pip install litellm" in " ".join(err.split())
    assert "cannot tell the provider" not in err  # the setup check says what is missing, not a wrong provider


def test_litellm_is_the_llm_extra_and_the_test_extra_keeps_it() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert not any(dep.startswith("litellm") for dep in project["dependencies"])
    extras = project["optional-dependencies"]
    assert extras["llm"] == ["litellm>=1.40"] and "litellm>=1.40" in extras["test"]
