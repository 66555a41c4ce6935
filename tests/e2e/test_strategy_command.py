"""End to end: `autoloop strategy add|list|remove` on a program that already ran, then runs with the strategy.

Each of the four strategies is added to function_minimization (one default-flow iteration recorded first)
with an answers file; `check` passes, and two offline `tune` iterations record the strategy's Population:
the first seeds it with the program's current best, the second is an iteration of the strategy itself.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import population_of
from tests.programs import program_md, without_process_limit

REPO = Path(__file__).parents[2]
NAME = "function_minimization"
PROGRAM = f".autoloop/programs/{NAME}"

# Answers with distinctive text: tests/strategies/test_answers_used.py checks that each reaches a prompt or a decision.
ANSWERS: dict[str, dict[str, Any]] = {
    "alphaevolve": {
        "2–4 sentences describing the target artifact": "FRAMING-AE: code/search.py minimises f on [-5, 5]²; the "
        "fitness is combined_score; a valid candidate calls objective for every value.",
        "tune defaults if the problem has known bias": "WEIGHTS-AE: exploitation pays on this smooth landscape",
        "replace with real islands": "ISLANDS-AE: the families of global search",
        "strategy/alphaevolve.md:41": ["annealing", "ISLAND0-AE simulated annealing with restarts"],
        "strategy/alphaevolve.md:42": ["grid", "ISLAND1-AE a coarse grid, then a local polish"],
        "strategy/alphaevolve.md:43": ["gradient", "ISLAND2-AE finite-difference descent"],
        "strategy/alphaevolve.md:44": ["swarm", "ISLAND3-AE a particle swarm"],
        "list the cheap invariants": "VALID1-AE the point is inside the bounds; VALID2-AE at most 20000 calls",
        "strategy/alphaevolve.md:70": "minimal diff",
        "population_size": "12",
        "archive_size": "4",
        "strategy/alphaevolve.md:122": "`approach_family`",
        "strategy/alphaevolve.md:123": ["`reliability`", "4 bins over the running min–max of the metric"],
        "strategy/prompts/mutation.md:9": "DOMAIN-MUT-AE: the global minimum is "
        "near (-1.704, 0.678)",
        "pick one": "DIFF-MUT-AE: a minimal diff of the constants first",
        "same set of domain facts as in mutation.md": "DOMAIN-X-AE: a wide local minimum sits near (1.6, 2.9)",
    },
    "adaevolve": {
        "problem framing": "FRAMING-ADA: code/search.py minimises f on [-5, 5]²; combined_score rewards closeness.",
        "tuning notes": "TUNING-ADA: evaluations take a second, so the reference values stay",
        "island presets": "PRESETS-ADA: the reference presets suit this problem",
        "domain knowledge": "DOMAIN-ADA: the global minimum is near (-1.704, 0.678)",
        "validity checks": "VALID-ADA: at most 20000 objective calls per trial",
        "idea space": "IDEAS-ADA: global optimisation with `scipy.optimize.basinhopping`",
        "dead ends": "DEADENDS-ADA: a finer grid alone",
    },
    "evox": {
        "problem framing": "FRAMING-EVOX: code/search.py minimises f on [-5, 5]²; combined_score rewards closeness.",
        "tuning notes": "TUNING-EVOX: short runs, so the reference values stay",
        "approach families": "FAMILIES-EVOX: basin hopping with `scipy.optimize.basinhopping`",
        "knobs": "KNOBS-EVOX: the cooling rate and the step size",
        "domain knowledge": "DOMAIN-EVOX: the global minimum is near (-1.704, 0.678)",
        "validity checks": "VALID-EVOX: at most 20000 objective calls per trial",
        "search landscape": "LANDSCAPE-EVOX: scores jump when the restart scheme changes",
    },
    "funsearch": {
        "problem framing": "FRAMING-FS: the search rewrites search_algorithm; the evaluator scores ten trials.",
        "function name": "search_algorithm",
        "problem": "PROBLEM-FS: find the global minimum of f on [-5, 5]².",
        "test inputs": "- TESTS-FS: one seeded trial each; the score is combined_score",
        "function skeleton": "def search_algorithm(rng, bounds):\n    \"\"\"SKELETON-FS: returns (x, y, value).\"\"\"",
    },
}
SEEDED_AS_IS = {"alphaevolve": "seed", "adaevolve": "seed", "evox": "seed", "funsearch": "seed"}


@pytest.fixture
def ran_repo(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    """Returns a repository whose function_minimization recorded one default-flow iteration."""
    shutil.copytree(REPO / PROGRAM, git_repo / PROGRAM, ignore=shutil.ignore_patterns("__pycache__"))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "function_minimization")
    assert main(["run", "--repo", str(git_repo), "--program", NAME, "--iterations", "1"]) == 0
    return git_repo


def _answers(tmp_path: Path, strategy: str) -> Path:
    path = tmp_path / f"{strategy}-answers.yaml"
    path.write_text(yaml.safe_dump(ANSWERS[strategy], allow_unicode=True), encoding="utf-8")
    return path


def _state(repo: Path) -> statefile.StateFile:
    return statefile.parse_state(MemoryStore(repo).read(f"{NAME}.md") or "", f"{NAME}.md")


@pytest.mark.parametrize("strategy", ["alphaevolve", "adaevolve", "evox", "funsearch"])
def test_add_to_a_program_that_ran_then_check_and_run(  # type: ignore[no-untyped-def]
    ran_repo: Path, tmp_path: Path, run_git, capsys: pytest.CaptureFixture[str], strategy: str
) -> None:
    best = _state(ran_repo).machine.best_metric
    assert best is not None
    answers = _answers(tmp_path, strategy)
    assert main(["strategy", "add", strategy, "--program", NAME, "--answers", str(answers), "--repo", str(ran_repo)]) == 0
    out = capsys.readouterr().out
    assert f"every <CUSTOMIZE…> marker is answered from {answers}" in out
    assert f"✓ {NAME}; commit and push {PROGRAM} so that runs use it" in out
    folder = ran_repo / PROGRAM
    program = (folder / "program.md").read_text()
    assert f"`strategy/{strategy}.md`" in program.split("## Evolution Strategy", 1)[1]
    assert "Plain hill climbing" not in program
    assert "<CUSTOMIZE" not in "".join(p.read_text() for p in (folder / "strategy").rglob("*.md"))
    assert main(["check", "--repo", str(ran_repo)]) == 0
    out = without_process_limit(capsys.readouterr().out)
    assert re.match(r"evaluating function_minimization \(its baseline; timeout \d+ s\)…\n"
                    r"✓ function_minimization \(baseline combined_score [-+.\de]+\)\n", out), out
    run_git(ran_repo, "add", "-A")
    run_git(ran_repo, "commit", "-qm", f"adopt {strategy}")

    assert main(["run", "--repo", str(ran_repo), "--program", NAME, "--iterations", "2"]) == 0
    state = _state(ran_repo)
    population = population_of(state, MemoryStore(ran_repo).read)
    first = min(population.candidates, key=lambda c: c.id)
    # The Population starts from the program's current best, evaluated as it is, not from nothing.
    assert first.fitness == pytest.approx(best)
    assert first.approach == "the unchanged Target"
    assert first.operator == SEEDED_AS_IS[strategy]
    assert state.machine.iteration_count == 3
    newest = state.history[0]
    assert newest.is_detailed
    assert "- **Operator**: " in newest.text
    assert len({c.gen for c in population.candidates}) == 2
    if strategy == "alphaevolve":
        # Dimension 2 names the evaluator's `reliability` metric in 4 bins: no line count.
        assert {c.cell[1] for c in population.candidates if c.cell} <= {f"reliability {k}/4" for k in range(1, 5)}
        assert "| `reliability` |" in population.strategy_state


def test_list_shows_the_strategies_and_who_uses_which(ran_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["strategy", "list", "--repo", str(ran_repo)]) == 0
    out = capsys.readouterr().out
    for name in ("adaevolve", "alphaevolve", "evox", "funsearch"):
        assert f"\n  {name}, when:\n" in out
    assert f"  {NAME}: default flow\n" in out
    assert main(["strategy", "add", "funsearch", "--program", NAME, "--repo", str(ran_repo)]) == 0
    capsys.readouterr()
    assert main(["strategy", "--repo", str(ran_repo), "list"]) == 0
    assert f"  {NAME}: funsearch ({PROGRAM}/strategy/funsearch.md)\n" in capsys.readouterr().out


def test_without_answers_the_markers_are_listed_and_check_counts_them(
    ran_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["strategy", "add", "evox", "--program", NAME, "--repo", str(ran_repo)]) == 0
    out = capsys.readouterr().out
    assert "7 <CUSTOMIZE…> markers are left to answer" in out
    assert f"  {PROGRAM}/strategy/evox.md:7: <CUSTOMIZE: problem framing" in out
    assert "✗ the 7 unanswered markers above" in out
    assert main(["check", "--repo", str(ran_repo)]) == 1


def test_remove_drops_the_folder_and_the_pointer_and_leaves_the_state(  # type: ignore[no-untyped-def]
    ran_repo: Path, tmp_path: Path, run_git, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = _answers(tmp_path, "alphaevolve")
    assert main(["strategy", "add", "alphaevolve", "--program", NAME, "--answers", str(answers),
                 "--repo", str(ran_repo)]) == 0
    run_git(ran_repo, "add", "-A")
    run_git(ran_repo, "commit", "-qm", "adopt alphaevolve")
    assert main(["run", "--repo", str(ran_repo), "--program", NAME, "--iterations", "1"]) == 0
    before = MemoryStore(ran_repo).read(f"{NAME}.md")
    capsys.readouterr()
    assert main(["strategy", "remove", "alphaevolve", "--program", NAME, "--repo", str(ran_repo)]) == 0
    out = capsys.readouterr().out
    assert f"removed {PROGRAM}/strategy/ and the pointer: {NAME} runs the default flow" in out
    assert "The state file's `## 🧬 Population` (on memory/autoloop) is left alone" in out
    assert not (ran_repo / PROGRAM / "strategy").exists()
    program = (ran_repo / PROGRAM / "program.md").read_text()
    assert program.endswith("## Evolution Strategy\n\nPlain hill climbing: propose one focused change per iteration, "
                            "keep it only if the metric improves.\n")
    assert MemoryStore(ran_repo).read(f"{NAME}.md") == before
    assert main(["check", "--repo", str(ran_repo)]) == 0
    capsys.readouterr()
    # Another strategy cannot read AlphaEvolve's Population: add says so, with the fix, before any run fails.
    assert main(["strategy", "add", "adaevolve", "--program", NAME, "--answers", str(_answers(tmp_path, "adaevolve")),
                 "--repo", str(ran_repo)]) == 0
    out = capsys.readouterr().out
    assert (f"✗ {NAME}.md on memory/autoloop: its `## 🧬 Population` was written by another strategy, which adaevolve "
            "cannot read") in out
    assert f"delete that section with `autoloop edit {NAME}` before the next run" in out


def test_refusals(ran_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = str(ran_repo)
    assert main(["strategy", "add", "alphaevolve", "--program", NAME, "--repo", repo]) == 0
    program_md = (ran_repo / PROGRAM / "program.md").read_text()
    line = program_md.splitlines().index(next(x for x in program_md.splitlines() if "`strategy/alphaevolve.md`" in x)) + 1
    capsys.readouterr()
    # A different strategy is already there: refused with program.md's line of the pointer.
    assert main(["strategy", "add", "evox", "--program", NAME, "--repo", repo]) == 1
    err = capsys.readouterr().err
    assert f"{PROGRAM}/program.md:{line}: {NAME} already uses the alphaevolve strategy (strategy/alphaevolve.md)" in err
    assert "`autoloop strategy remove alphaevolve --program function_minimization`" in err
    assert not (ran_repo / PROGRAM / "strategy/evox.md").exists()
    # The same one again, removing one the program does not use, unknown names, an answer matching no marker.
    assert main(["strategy", "add", "alphaevolve", "--program", NAME, "--repo", repo]) == 1
    assert "already uses the alphaevolve strategy" in capsys.readouterr().err
    assert main(["strategy", "remove", "evox", "--program", NAME, "--repo", repo]) == 1
    assert f"{PROGRAM}/program.md:{line}: {NAME} uses the alphaevolve strategy, not evox" in capsys.readouterr().err
    assert main(["strategy", "add", "nsga", "--program", NAME, "--repo", repo]) == 1
    assert "no strategy template named 'nsga'; choose one of: adaevolve, alphaevolve, evox, funsearch" in capsys.readouterr().err
    assert main(["strategy", "add", "evox", "--program", "nope", "--repo", repo]) == 1
    assert "no program named 'nope'" in capsys.readouterr().err
    assert main(["strategy", "remove", "alphaevolve", "--program", NAME, "--repo", repo]) == 0
    untouched = (ran_repo / PROGRAM / "program.md").read_text()
    typo = tmp_path / "typo.yaml"
    typo.write_text("problem framng: a typo\n")
    assert main(["strategy", "add", "evox", "--program", NAME, "--answers", str(typo), "--repo", repo]) == 1
    assert "`problem framng` matched no <CUSTOMIZE…> marker" in capsys.readouterr().err
    assert (ran_repo / PROGRAM / "program.md").read_text() == untouched
    assert not (ran_repo / PROGRAM / "strategy").exists()


def test_leftover_strategy_files_are_not_overwritten(ran_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    leftover = ran_repo / PROGRAM / "strategy/prompts/solution.md"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("mine\n")
    assert main(["strategy", "add", "adaevolve", "--program", NAME, "--repo", str(ran_repo)]) == 1
    assert f"{PROGRAM}/strategy/prompts/solution.md already exist" in capsys.readouterr().err
    assert leftover.read_text() == "mine\n"
    assert "Plain hill climbing" in (ran_repo / PROGRAM / "program.md").read_text()


def test_a_bare_program_is_refused_with_how_to_make_it_a_folder(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = git_repo / ".autoloop/programs/docs.md"
    bare.parent.mkdir(parents=True)
    bare.write_text(program_md("Docs", "Grow x.", target=("lib/value.py",), protected=()))
    (git_repo / "lib").mkdir()
    (git_repo / "lib/value.py").write_text("x = 1\n")
    assert main(["strategy", "add", "alphaevolve", "--program", "docs", "--repo", str(git_repo)]) == 1
    err = capsys.readouterr().err
    assert ".autoloop/programs/docs.md: docs is a bare program file" in err
    assert "move .autoloop/programs/docs.md to .autoloop/programs/docs/program.md" in err
    assert not (git_repo / "strategy").exists()


def test_a_program_without_the_section_gets_one(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = git_repo / PROGRAM
    shutil.copytree(REPO / PROGRAM, folder, ignore=shutil.ignore_patterns("__pycache__"))
    text = (folder / "program.md").read_text()
    (folder / "program.md").write_text(text[: text.index("## Evolution Strategy")])
    assert main(["strategy", "add", "funsearch", "--program", NAME, "--repo", str(git_repo)]) == 0
    assert "(added the section)" in capsys.readouterr().out
    after = (folder / "program.md").read_text()
    assert after.startswith(text[: text.index("## Evolution Strategy")].rstrip("\n") + "\n\n## Evolution Strategy\n")


def test_add_and_remove_never_write_or_delete_through_a_symlink(  # hostile: a planted strategy/ link
    ran_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    (outside / "prompts").mkdir(parents=True)
    (outside / "keep.md").write_text("not autoloop's\n")
    link = ran_repo / PROGRAM / "strategy"
    link.symlink_to(outside, target_is_directory=True)
    assert main(["strategy", "add", "alphaevolve", "--program", NAME, "--repo", str(ran_repo)]) == 1
    assert "leads out of .autoloop/programs/function_minimization through a symlink" in capsys.readouterr().err
    assert sorted(p.name for p in outside.rglob("*")) == ["keep.md", "prompts"]
    # A pointer already there, with strategy/ a link: remove drops the link, never what it points to.
    program = ran_repo / PROGRAM / "program.md"
    text = program.read_text()
    program.write_text(text.replace("Plain hill climbing: propose one focused change per iteration.",
                                    "This program uses `strategy/alphaevolve.md`."))
    assert main(["strategy", "remove", "alphaevolve", "--program", NAME, "--repo", str(ran_repo)]) == 0
    assert not link.exists() and not link.is_symlink()
    assert (outside / "keep.md").read_text() == "not autoloop's\n"


def test_the_help_teaches_an_answers_file_that_works(
    ran_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["strategy", "add", "--help"])
    help_text = capsys.readouterr().out
    lines = help_text.split("answers.yaml answers the", 1)[1].split("Without --answers", 1)[0].splitlines()[1:]
    example = "\n".join(line[4:] for line in lines if line.startswith("    "))
    assert example.count("\n") == 2
    answers = tmp_path / "answers.yaml"
    answers.write_text(example + "\n", encoding="utf-8")
    assert main(["strategy", "add", "alphaevolve", "--program", NAME, "--answers", str(answers),
                 "--repo", str(ran_repo)]) == 0
    playbook = (ran_repo / PROGRAM / "strategy/alphaevolve.md").read_text()
    assert "\n\nSort 10^6 ints; fitness is -seconds; output must be sorted.\n" in playbook
    assert "- **Island 0 — insertion**: insertion-based sorts\n" in playbook
    assert "- **Population cap**: 40." in playbook
