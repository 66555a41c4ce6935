"""End to end: `autoloop init` in a fresh git repository, then `autoloop check` on what it wrote."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import yaml

from autoloop_py.cli import main
from autoloop_py.commands import ci_install
from autoloop_py.commands.init import DEFAULT_PIP_SPEC
from tests.programs import without_process_limit

WORKFLOWS = (".github/workflows/autoloop.yml", ".github/workflows/autoloop.md")
SAMPLE = (
    ".autoloop/programs/example/program.md",
    ".autoloop/programs/example/code/solution.py",
    ".autoloop/programs/example/code/evaluate.py",
)


pytestmark = pytest.mark.usefixtures("installed_from_an_index")


def bundled_strategy_files() -> dict[str, str]:
    """Returns autoloop's strategy playbooks (markdown) as `.autoloop/strategies/...` path -> text."""
    root = Path(str(resources.files("autoloop_py") / "templates" / "strategies"))
    return {
        f".autoloop/strategies/{p.relative_to(root).as_posix()}": p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*.md"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def written(repo: Path) -> set[str]:
    """Returns the files under .github and .autoloop, repository-relative."""
    found = [p for base in (".github", ".autoloop") for p in (repo / base).rglob("*") if p.is_file()]
    return {p.relative_to(repo).as_posix() for p in found}


def test_init_installs_workflows_strategies_and_a_sample_that_check_accepts(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "--repo", str(git_repo)]) == 0
    out = capsys.readouterr().out
    strategies = bundled_strategy_files()
    assert ".autoloop/strategies/alphaevolve/strategy.md" in strategies
    assert not (git_repo / ".autoloop/strategies/evox/initial_strategy.py").exists()  # the runner's, not a playbook
    assert written(git_repo) == {*WORKFLOWS, *SAMPLE, *strategies}
    for rel in (*WORKFLOWS, *SAMPLE, *strategies):
        assert f"wrote {rel}\n" in out
    for rel, text in strategies.items():
        assert (git_repo / rel).read_text(encoding="utf-8") == text
    assert "Next steps:" in out and "OPENAI_API_KEY" in out and "autoloop check" in out and "git commit" in out
    assert "COPILOT_GITHUB_TOKEN" in out  # the agentic variant's engine secret (upstream issue #65)
    workflow = yaml.safe_load((git_repo / WORKFLOWS[0]).read_text())
    assert workflow["env"] == {"AUTOLOOP_PIP_SPEC": DEFAULT_PIP_SPEC}
    assert workflow.get("on", workflow.get(True))["schedule"] == [{"cron": "17 */6 * * *"}]

    assert main(["check", "--repo", str(git_repo)]) == 0
    out = without_process_limit(capsys.readouterr().out)
    assert re.fullmatch(r"evaluating example \(its baseline; timeout \d+ s\)…\n"
                        r"✓ example \(baseline \w+ [-+.\de]+\)\n", out), out


def test_the_sample_evaluator_prints_its_score(git_repo: Path) -> None:
    assert main(["init", "--repo", str(git_repo)]) == 0
    folder = git_repo / ".autoloop/programs/example"
    done = subprocess.run([sys.executable, "code/evaluate.py"], cwd=folder, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"score": -1.5}
    text = (folder / "program.md").read_text()
    assert "CUSTOMIZE" not in text and "AUTOLOOP:UNCONFIGURED" not in text


def test_a_second_init_refuses_without_force_and_overwrites_with_it(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "--repo", str(git_repo)]) == 0
    workflow = git_repo / WORKFLOWS[0]
    original = workflow.read_text()
    workflow.write_text("# edited by hand\n")
    capsys.readouterr()

    assert main(["init", "--repo", str(git_repo), "--every", "1d"]) == 1
    err = capsys.readouterr().err
    assert "nothing written; these files exist already (pass --force to overwrite them):" in err
    for rel in (*WORKFLOWS, *SAMPLE):
        assert f"  {rel}\n" in err
    assert workflow.read_text() == "# edited by hand\n"

    assert main(["init", "--repo", str(git_repo), "--force"]) == 0
    assert f"overwrote {WORKFLOWS[0]}\n" in capsys.readouterr().out
    assert workflow.read_text() == original


def test_init_options_reach_the_workflow(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["init", "--repo", str(git_repo), "--every", "45m", "--model", "openai/gpt-4o-mini"]
    argv += ["--max-parallel", "2", "--timeout-minutes", "30", "--pip-spec", "git+https://github.com/o/r@main"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "note: the workflow wakes up every 30m, the closest even cron step\n" in out
    assert "AUTOLOOP_MODEL names the litellm model (default openai/gpt-4o-mini)" in out
    workflow = yaml.safe_load((git_repo / WORKFLOWS[0]).read_text())
    propose = workflow["jobs"]["propose"]
    assert workflow.get("on", workflow.get(True))["schedule"] == [{"cron": "17-59/30 * * * *"}]
    assert (propose["strategy"]["max-parallel"], propose["timeout-minutes"]) == (2, 30)
    run = next(s["run"] for s in propose["steps"] if s.get("name") == "Propose and evaluate")
    assert run.endswith('--ci --proposer llm --outcome-dir "$AUTOLOOP_OUTCOME"')
    assert workflow["env"]["AUTOLOOP_PIP_SPEC"] == "git+https://github.com/o/r@main"
    assert "  schedule: every 30 minutes\n" in (git_repo / WORKFLOWS[1]).read_text()


def test_init_outside_a_repository_or_with_bad_flags_writes_nothing(
    tmp_path: Path, git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert main(["init", "--repo", str(plain)]) == 1
    assert "is not inside a git repository" in capsys.readouterr().err
    assert main(["init", "--repo", str(git_repo), "--every", "1m"]) == 1
    assert "--every '1m' is under 5 minutes" in capsys.readouterr().err
    assert not (git_repo / ".github").exists() and not (git_repo / ".autoloop").exists()


def test_init_from_a_vanished_local_checkout_says_so_and_writes_nothing_and_pip_spec_overrides(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = tmp_path / "deleted clone"

    class LocalCheckout:
        version = "0.1.0"

        def read_text(self, name: str) -> str | None:
            return json.dumps({"url": gone.as_uri(), "dir_info": {"editable": True}})

    monkeypatch.setattr(ci_install.metadata, "distribution", lambda name: LocalCheckout())
    assert main(["init", "--repo", str(git_repo)]) == 1
    captured = capsys.readouterr()
    assert f"building a wheel of autoloop 0.1.0 from {gone} …" in captured.out
    err = " ".join(captured.err.split())
    assert f"autoloop was installed from {gone}, which no longer exists" in err and "--pip-spec" in err
    assert not (git_repo / ".github").exists() and not (git_repo / ".autoloop").exists()

    assert main(["init", "--repo", str(git_repo), "--pip-spec", "git+https://github.com/me/autoloop_py@0123abcd"]) == 0
    workflow = yaml.safe_load((git_repo / WORKFLOWS[0]).read_text())
    assert workflow["env"] == {"AUTOLOOP_PIP_SPEC": "git+https://github.com/me/autoloop_py@0123abcd"}
    assert not (git_repo / ".autoloop/wheels").exists()


def test_upgrade_switches_only_the_install_spec(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--upgrade", "--repo", str(git_repo)]) == 1
    assert "nothing to upgrade: no .github/workflows/autoloop.yml or .github/workflows/autoloop.md here" in \
        capsys.readouterr().err
    assert main(["init", "--repo", str(git_repo), "--every", "1d", "--model", "openai/gpt-4o-mini"]) == 0
    before = {rel: (git_repo / rel).read_text() for rel in WORKFLOWS}
    capsys.readouterr()

    assert main(["init", "--upgrade", "--repo", str(git_repo), "--pip-spec", "git+https://github.com/me/a@0123"]) == 0
    out = capsys.readouterr().out
    assert f"updated {WORKFLOWS[0]}: installs git+https://github.com/me/a@0123 (was {DEFAULT_PIP_SPEC})\n" in out
    after = {rel: (git_repo / rel).read_text() for rel in WORKFLOWS}
    for rel in WORKFLOWS:
        changed = [(a, b) for a, b in zip(before[rel].splitlines(), after[rel].splitlines()) if a != b]
        assert len(changed) == (2 if rel.endswith(".yml") else 1), changed  # the spec (and the yml's init line)
    assert yaml.safe_load(after[WORKFLOWS[0]])["env"] == {"AUTOLOOP_PIP_SPEC": "git+https://github.com/me/a@0123"}
    assert "python3 -m pip install --quiet git+https://github.com/me/a@0123\n" in after[WORKFLOWS[1]]

    # Back to the installed autoloop (an index install here: its pin).
    assert main(["init", "--upgrade", "--repo", str(git_repo)]) == 0
    assert {rel: (git_repo / rel).read_text() for rel in WORKFLOWS} == before


def test_upgrade_of_a_workflow_without_its_install_step_names_the_file(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "--repo", str(git_repo)]) == 0
    (git_repo / WORKFLOWS[0]).write_text("name: autoloop\non: push\njobs: {}\n")
    capsys.readouterr()
    assert main(["init", "--upgrade", "--repo", str(git_repo), "--pip-spec", "autoloop-py==9"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"{WORKFLOWS[0]}: finds no `Install autoloop` spec to switch" in err and "init --force" in err
    assert "autoloop-py==9" not in (git_repo / WORKFLOWS[1]).read_text()


def test_tune_cannot_game_the_sample_by_moving_its_problem_constant(
    git_repo_with_origin: Path, run_git, capsys: pytest.CaptureFixture[str]  # type: ignore[no-untyped-def]
) -> None:
    from autoloop_py.proposers.tune import find_literals

    repo = git_repo_with_origin
    assert main(["init", "--repo", str(repo)]) == 0
    solution = ".autoloop/programs/example/code/solution.py"
    text = (repo / solution).read_text()
    # The sample used to keep its goal in `-abs(WIDTH - 3.0)`, inside the EVOLVE-BLOCK: tune moved the 3.0 (and
    # never WIDTH, which reads as a problem constant). Now the goal is outside the block, pinned.
    assert "GOAL = 3.0  # autoloop: fixed" in text and "-abs(GUESS - GOAL)" in text
    assert [literal.name for literal in find_literals(solution, text)] == ["GUESS"]
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "autoloop init")
    run_git(repo, "push", "-q", "origin", "main")
    assert main(["run", "--repo", str(repo), "--program", "example", "--proposer", "tune", "--iterations", "4"]) == 0
    evolved = run_git(repo, "show", f"origin/autoloop/example:{solution}")
    assert "GOAL = 3.0  # autoloop: fixed" in evolved and "GUESS = 1.5" not in evolved  # the guess moved
    capsys.readouterr()
