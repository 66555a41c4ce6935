"""End to end: `autoloop new`, `autoloop customize` and `autoloop check` on temporary repositories.

`customize` talks to litellm's mock (AUTOLOOP_MOCK_RESPONSE), so nothing reaches the network.
The proof-of-concept program is copied into a temporary repository, checked and evaluated once.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoloop_py.cli import main
from autoloop_py.loop.evaluation.evaluate import evaluate
from autoloop_py.program.model import UNCONFIGURED_SENTINEL, load_program
from autoloop_py.program.playbook import customize_markers, resolve_markers
from tests.programs import without_process_limit

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = Path(".autoloop/programs")
SPECIAL = {
    "strategy/alphaevolve.md:41": ["greedy", "build the answer greedily"],
    "strategy/alphaevolve.md:42": ["local search", "improve by small moves"],
    "strategy/alphaevolve.md:43": ["exact", "branch and bound"],
    "strategy/alphaevolve.md:44": ["random restarts", "restart from random points"],
    "population_size": "40",
    "archive_size": "10",
    "e.g. `approach_family`": "`approach_family`",
    "e.g. `code_complexity`": "`code_complexity`",
    "e.g. <40 / 40–100 / >100 lines of the evolved block": "<40 / 40–100 / >100 lines of the evolved block",
}


def program_files(repo: Path, name: str) -> dict[str, str]:
    """Returns the markdown files of a program folder, program-folder relative."""
    folder = repo / PROGRAMS / name
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*.md"))}


def complete_answers(files: dict[str, str]) -> dict[str, Any]:
    """Returns answers for every marker of files: SPECIAL ones, else `file:line` keys with filler text."""
    answers: dict[str, Any] = dict(SPECIAL)
    for rel, text in files.items():
        for marker in customize_markers(text, Path(rel)):
            place = f"{rel}:{marker.line}"
            if place in answers or marker.label in answers:
                continue
            same_line = [m for m in customize_markers(text, Path(rel)) if m.line == marker.line]
            answers[place] = [f"answer {i}" for i in range(len(same_line))] if len(same_line) > 1 else "an answer"
    return answers


def test_new_alphaevolve_scaffolds_and_check_lists_the_markers(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "x", "--strategy", "alphaevolve", "--repo", str(git_repo)]) == 0
    out = capsys.readouterr().out
    folder = git_repo / PROGRAMS / "x"
    created = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert created == [
        "code/evaluate.py", "code/solution.py", "program.md",
        "strategy/alphaevolve.md", "strategy/prompts/crossover.md", "strategy/prompts/mutation.md",
    ]
    assert "22 <CUSTOMIZE…> markers are left to resolve:" in out
    assert "  .autoloop/programs/x/strategy/alphaevolve.md:7: <CUSTOMIZE: 2–4 sentences" in out
    assert "Resolve them with `autoloop customize x`" in out
    program = (folder / "program.md").read_text()
    assert program.startswith(UNCONFIGURED_SENTINEL + "\n")
    assert "## Evolution Strategy\nThis program uses the **AlphaEvolve** strategy." in program
    assert (folder / "strategy/alphaevolve.md").read_text().startswith("# AlphaEvolve Strategy — x\n")
    assert main(["check", "--repo", str(git_repo)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "✗ .autoloop/programs/x/program.md:12: unresolved <CUSTOMIZE: goal" in lines[0]
    assert lines[1].startswith(
        "✗ .autoloop/programs/x/strategy/alphaevolve.md:7: unresolved <CUSTOMIZE: 2–4 sentences describing"
    )
    assert sum(line.startswith("✗ ") for line in lines) == 22
    assert not any(line.startswith("✓ x") for line in lines)


def test_a_complete_answers_file_yields_a_program_that_passes_check(
    git_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "draft", "--strategy", "alphaevolve", "--repo", str(git_repo)]) == 0
    answers = tmp_path / "answers.yaml"
    answers.write_text(yaml.safe_dump(complete_answers(program_files(git_repo, "draft")), allow_unicode=True))
    shutil.rmtree(git_repo / PROGRAMS / "draft")
    capsys.readouterr()
    assert main(["new", "sorter", "--strategy", "alphaevolve", "--answers", str(answers), "--repo", str(git_repo)]) == 0
    assert "every <CUSTOMIZE…> marker is resolved" in capsys.readouterr().out
    folder = git_repo / PROGRAMS / "sorter"
    assert UNCONFIGURED_SENTINEL not in (folder / "program.md").read_text()
    assert "- **Island 3 — random restarts**: restart from random points" in (folder / "strategy/alphaevolve.md").read_text()
    assert main(["check", "--repo", str(git_repo)]) == 0
    out = without_process_limit(capsys.readouterr().out)
    assert re.fullmatch(r"evaluating sorter \(its baseline; timeout 300 s\)…\n"
                        r"✓ sorter \(baseline score [-+.\de]+\)\n", out), out


def test_new_refuses_to_overwrite_and_names_bad_input(
    git_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "x", "--repo", str(git_repo)]) == 0
    assert "1 <CUSTOMIZE…> marker is left to resolve:" in capsys.readouterr().out  # the Goal's, in the singular
    assert main(["new", "x", "--strategy", "alphaevolve", "--repo", str(git_repo)]) == 1
    assert "program 'x' already exists at .autoloop/programs/x; pick another name" in capsys.readouterr().err
    assert main(["new", "y", "--strategy", "evolution", "--repo", str(git_repo)]) == 1
    assert ("no strategy template named 'evolution'; choose one of: adaevolve, alphaevolve, evox, funsearch, none"
            in capsys.readouterr().err)
    answers = tmp_path / "answers.yaml"
    answers.write_text("program-name: y\nno such marker: text\n")
    assert main(["new", "y", "--strategy", "alphaevolve", "--answers", str(answers), "--repo", str(git_repo)]) == 1
    assert "`no such marker` matched no <CUSTOMIZE…> marker" in capsys.readouterr().err
    assert not (git_repo / PROGRAMS / "y").exists()


def test_new_without_strategy_writes_prose_and_a_goal_marker(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "plain", "--strategy", "none", "--repo", str(git_repo)]) == 0
    folder = git_repo / PROGRAMS / "plain"
    assert not (folder / "strategy").exists()
    assert "## Evolution Strategy\n\nPlain hill climbing" in (folder / "program.md").read_text()
    assert main(["check", "--repo", str(git_repo)]) == 1
    assert "plain/program.md:12: unresolved <CUSTOMIZE: goal" in capsys.readouterr().out


def test_check_names_the_sentinel_line_left_after_markers_resolved_by_hand(
        git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "plain", "--strategy", "none", "--repo", str(git_repo)]) == 0
    program = git_repo / PROGRAMS / "plain" / "program.md"
    program.write_text(re.sub(r"<CUSTOMIZE:[^>]*>", "filled in by hand", program.read_text()))
    capsys.readouterr()
    assert main(["check", "--repo", str(git_repo)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("plain (unconfigured template: no CUSTOMIZE marker is left; delete the <!-- AUTOLOOP:UNCONFIGURED --> "
            f"line at {PROGRAMS}/plain/program.md:1 and the note under it, and it runs)") in out


def test_strategy_templates_come_from_the_repository_first(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = git_repo / ".autoloop/strategies/tiny"
    (template / "prompts").mkdir(parents=True)
    (template / "strategy.md").write_text("# Tiny — <CUSTOMIZE: program-name>\n\nAlways exploit.\n")
    (template / "prompts/only.md").write_text("# Only prompt\n")
    assert main(["new", "t", "--strategy", "tiny", "--repo", str(git_repo)]) == 0
    folder = git_repo / PROGRAMS / "t"
    assert (folder / "strategy/tiny.md").read_text() == "# Tiny — t\n\nAlways exploit.\n"
    assert (folder / "strategy/prompts/only.md").is_file()
    assert "read `strategy/tiny.md` and follow it literally" in (folder / "program.md").read_text()
    assert "- `strategy/prompts/only.md`" in (folder / "program.md").read_text()
    capsys.readouterr()
    assert main(["new", "u", "--strategy", "nope", "--repo", str(git_repo)]) == 1
    assert "choose one of: adaevolve, alphaevolve, evox, funsearch, tiny, none" in capsys.readouterr().err


def test_customize_shows_a_diff_and_writes_only_with_write(
    git_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["new", "x", "--strategy", "alphaevolve", "--repo", str(git_repo)]) == 0
    before = program_files(git_repo, "x")
    resolved, _ = resolve_markers(before, complete_answers(before), Path("mock"))
    reply = "Here you go:\n```json\n" + json.dumps(resolved) + "\n```\n"
    monkeypatch.setenv("AUTOLOOP_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", reply)
    capsys.readouterr()
    assert main(["customize", "x", "--repo", str(git_repo)]) == 0
    out = capsys.readouterr().out
    assert "--- a/.autoloop/programs/x/strategy/alphaevolve.md\n+++ b/.autoloop/programs/x/strategy/alphaevolve.md\n" in out
    assert "-- **Island 0 — <CUSTOMIZE: family name>**: <CUSTOMIZE: one-line description>\n" in out
    assert "+- **Island 0 — greedy**: build the answer greedily\n" in out
    assert f"-{UNCONFIGURED_SENTINEL}\n" in out
    assert out.rstrip().endswith("nothing written: review the diff, then run again with --write to apply it")
    assert program_files(git_repo, "x") == before
    assert main(["customize", "x", "--write", "--repo", str(git_repo)]) == 0
    assert "wrote 4 files" in capsys.readouterr().out
    assert main(["check", "--repo", str(git_repo)]) == 0
    assert main(["customize", "x", "--repo", str(git_repo)]) == 0
    assert "nothing to customize" in capsys.readouterr().out


def test_customize_refuses_a_reply_that_leaves_markers(
    git_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["new", "x", "--strategy", "alphaevolve", "--repo", str(git_repo)]) == 0
    before = program_files(git_repo, "x")
    monkeypatch.setenv("AUTOLOOP_MOCK_RESPONSE", json.dumps({"strategy/alphaevolve.md": "# done\n", "notes.md": "x"}))
    capsys.readouterr()
    assert main(["customize", "x", "--model", "gpt-4o-mini", "--repo", str(git_repo)]) == 1
    err = capsys.readouterr().err
    assert "gpt-4o-mini's reply could not be used (`notes.md` is not one of the files to rewrite; program.md:12 still has" in err
    assert program_files(git_repo, "x") == before
    monkeypatch.delenv("AUTOLOOP_MODEL", raising=False)
    assert main(["customize", "x", "--repo", str(git_repo)]) == 1
    assert "no model configured: pass --model" in capsys.readouterr().err


def test_the_package_ships_the_repository_templates_verbatim() -> None:
    shipped = REPO / "autoloop_py/templates/strategies/alphaevolve"
    source = REPO / ".autoloop/strategies/alphaevolve"
    names = sorted(p.relative_to(source).as_posix() for p in source.rglob("*.md"))
    assert names == ["CUSTOMIZE.md", "prompts/crossover.md", "prompts/mutation.md", "strategy.md"]
    for name in names:
        assert (shipped / name).read_bytes() == (source / name).read_bytes(), name


def test_the_proof_of_concept_passes_check_and_evaluates(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pandas")
    shutil.copytree(REPO / PROGRAMS / "groupby_evolve", git_repo / PROGRAMS / "groupby_evolve",
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert main(["check", "--repo", str(git_repo)]) == 0
    out = without_process_limit(capsys.readouterr().out)
    # Its evaluator times the candidate's calls from its own process: check has nothing to warn about.
    assert re.fullmatch(r"evaluating groupby_evolve \(its baseline; timeout \d+ s\)…\n"
                        r"✓ groupby_evolve \(baseline speedup [-+.\de]+\)\n", out), out
    program = load_program(git_repo, PROGRAMS / "groupby_evolve/program.md")
    result = evaluate(program, git_repo)
    assert result.ok, result.error
    assert result.metric is not None and math.isfinite(result.metric) and result.metric > 0
    assert set(result.metrics) == {"speedup", "narrow", "medium", "sparse"}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("sums[present].astype(np.int64)", "sums[present].astype(np.int64) + 1", "one row: sums differ from pandas (at position 0: -2 instead of -3)"),
        ("import numpy as np\n", "import numpy as np\nimport pandas\n", "groupby.py imports pandas"),
    ],
    ids=["wrong sums", "forbidden import"],
)
def test_the_proof_of_concept_rejects_invalid_candidates(tmp_path: Path, old: str, new: str, expected: str) -> None:
    pytest.importorskip("pandas")
    code = tmp_path / "code"
    shutil.copytree(REPO / PROGRAMS / "groupby_evolve/code", code, ignore=shutil.ignore_patterns("__pycache__"))
    target = code / "groupby.py"
    target.write_text(target.read_text().replace(old, new, 1))
    done = subprocess.run([sys.executable, "code/evaluate.py"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1
    assert expected in json.loads(done.stdout.strip().splitlines()[-1])["error"]


def test_new_help_lists_every_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["new", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "adaevolve | alphaevolve | evox | funsearch (autoloop's own)" in shown and "--target PATH" in shown


def test_new_target_writes_no_stubs_and_customize_answers_resolves_the_markers(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (git_repo / "lib").mkdir()
    (git_repo / "lib/fast.py").write_text("def f():\n    return 2\n")
    assert main(["new", "fast", "--target", "lib/fast.py", "--repo", str(git_repo)]) == 0
    folder = git_repo / PROGRAMS / "fast"
    assert sorted(p.name for p in folder.iterdir()) == ["program.md"]
    text = (folder / "program.md").read_text()
    assert "Only modify:\n- `lib/fast.py`\n" in text and "code/evaluate.py" not in text
    labels = [m.label for m in customize_markers(text, Path("program.md"))]
    assert labels == ["goal", "evaluation command", "metric name", "direction"]
    answers = git_repo / "answers.yaml"
    answers.write_text("goal: Make f faster.\nevaluation command: python3 bench.py\n")
    capsys.readouterr()
    assert main(["customize", "fast", "--answers", str(answers), "--repo", str(git_repo)]) == 0
    out = capsys.readouterr().out
    assert "still to resolve: .autoloop/programs/fast/program.md:25:" in out
    answers.write_text("metric name: seconds\ndirection: Lower\n")
    assert main(["customize", "fast", "--answers", str(answers), "--repo", str(git_repo)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "every <CUSTOMIZE…> marker is resolved" in said and "then commit and push it" in said
    program = load_program(git_repo, PROGRAMS / "fast" / "program.md")
    assert program.evaluation is not None and program.evaluation.metric == "seconds"
    assert program.direction == "lower" and program.target.include == ("lib/fast.py",)
    assert UNCONFIGURED_SENTINEL not in (folder / "program.md").read_text()
    # Once every marker is resolved, there is nothing left to answer.
    answers.write_text("nonsense: x\n")
    assert main(["customize", "fast", "--answers", str(answers), "--repo", str(git_repo)]) == 0
    assert "nothing to customize" in capsys.readouterr().out


def test_customize_answers_refuses_an_answer_that_matches_nothing(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "p", "--repo", str(git_repo)]) == 0
    answers = git_repo / "answers.yaml"
    answers.write_text("gaol: typo\n")
    before = (git_repo / PROGRAMS / "p/program.md").read_text()
    assert main(["customize", "p", "--answers", str(answers), "--repo", str(git_repo)]) == 1
    assert "`gaol` matched no <CUSTOMIZE…> marker" in capsys.readouterr().err
    assert (git_repo / PROGRAMS / "p/program.md").read_text() == before


def test_new_target_must_be_an_existing_file(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "x", "--target", "nope.py", "--repo", str(git_repo)]) == 1
    assert "--target nope.py: no such file in the repository" in capsys.readouterr().err
    assert not (git_repo / PROGRAMS / "x").exists()
