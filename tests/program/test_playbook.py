"""Tests for playbook.py: strategy discovery, CUSTOMIZE markers, answers and code/config.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.errors import ProgramError
from autoloop_py.program.model import Program, load_program
from autoloop_py.program.playbook import (
    Marker,
    customize_markers,
    find_playbook,
    load_config_yaml,
    playbook_problems,
    playbook_warnings,
    resolve_markers,
    runnable_playbook,
)

TEMPLATES = Path(__file__).resolve().parents[2] / "autoloop_py/templates/strategies/alphaevolve"
PROGRAM = """\
# Demo

## Goal

Make it fast.

## Target

- `code/thing.py`

## Evaluation

```bash
python3 code/evaluate.py
```

The metric is `score`. Higher is better.
"""
POINTER = """
## Evolution Strategy

This program uses the **AlphaEvolve** strategy. On every iteration, read `strategy/alphaevolve.md`
and follow it literally.

Support files:
- `strategy/prompts/mutation.md` — framing for exploitation and exploration.
- `strategy/prompts/crossover.md` — framing for crossover and migration.
"""
RESOLVED = "# AlphaEvolve Strategy — demo\n\nAll customised.\n"


def make_program(root: Path, strategy_section: str = POINTER, playbook: str | None = RESOLVED) -> Program:
    """Writes a program folder `demo` under root and returns it loaded."""
    folder = root / ".autoloop/programs/demo"
    (folder / "code").mkdir(parents=True)
    (folder / "code/thing.py").write_text("x = 1\n")
    (folder / "program.md").write_text(PROGRAM + strategy_section)
    if playbook is not None:
        (folder / "strategy/prompts").mkdir(parents=True)
        (folder / "strategy/alphaevolve.md").write_text(playbook)
        (folder / "strategy/prompts/mutation.md").write_text("# Mutation — demo\n")
        (folder / "strategy/prompts/crossover.md").write_text("# Crossover — demo\n")
    return load_program(root, Path(".autoloop/programs/demo/program.md"))


# --- discovery -------------------------------------------------------------------------------------


def test_a_backticked_pointer_selects_the_playbook(tmp_path: Path) -> None:
    program = make_program(tmp_path)
    playbook = find_playbook(program, tmp_path)
    assert playbook is not None
    assert playbook.name == "alphaevolve"
    assert playbook.path == Path(".autoloop/programs/demo/strategy/alphaevolve.md")
    assert playbook.program_dir == Path(".autoloop/programs/demo")
    assert playbook.text == RESOLVED
    assert playbook_warnings(program, tmp_path) == []


def test_a_plain_path_pointer_counts_too(tmp_path: Path) -> None:
    section = "\n## Evolution Strategy\n\nRead strategy/alphaevolve.md at the start of every iteration.\n"
    playbook = find_playbook(make_program(tmp_path, section), tmp_path)
    assert playbook is not None and playbook.name == "alphaevolve"


def test_a_pointer_to_a_missing_file_means_the_default_flow_and_a_warning(tmp_path: Path) -> None:
    program = make_program(tmp_path, POINTER, playbook=None)
    assert find_playbook(program, tmp_path) is None
    [warning] = playbook_warnings(program, tmp_path)
    assert str(warning).startswith(".autoloop/programs/demo/program.md:21: `## Evolution Strategy` names strategy/alphaevolve.md")
    assert "the default flow runs" in str(warning)
    assert playbook_problems(program, tmp_path) == []


@pytest.mark.parametrize(
    "section",
    [
        "",
        "\n## Evolution Strategy\n\nPlain hill climbing: one focused change per iteration.\n",
        "\n## Evolution Strategy\n\nFor example:\n\n```markdown\nRead `strategy/alphaevolve.md`.\n```\n",
        "\n## Evolution Strategy\n\nSee `strategy/prompts/mutation.md` for framing.\n",
    ],
    ids=["absent", "prose only", "pointer only inside code", "support file only"],
)
def test_no_playbook_means_the_default_flow(tmp_path: Path, section: str) -> None:
    program = make_program(tmp_path, section)
    assert find_playbook(program, tmp_path) is None
    assert playbook_problems(program, tmp_path) == []


# --- markers ---------------------------------------------------------------------------------------


def test_markers_report_their_start_line_even_across_lines() -> None:
    text = (TEMPLATES / "prompts/mutation.md").read_text()
    markers = customize_markers(text, Path("m.md"))
    assert [(m.line, m.label) for m in markers][0] == (1, "program-name")
    multi = markers[1]
    assert multi.line == 9
    assert multi.text.count("\n") == 7 and multi.text.endswith("not boilerplate.>")
    assert markers[2].text == "<CUSTOMIZE: pick one>"


def test_nested_angle_brackets_stay_inside_one_marker() -> None:
    line = "- **Dimension 2 — x**: threshold (<CUSTOMIZE: e.g. <40 / 40–100 / >100 lines>). Done.\n"
    [marker] = customize_markers(line, Path("p.md"))
    assert marker.text == "<CUSTOMIZE: e.g. <40 / 40–100 / >100 lines>"
    assert marker.content == "e.g. <40 / 40–100 / >100 lines"


def test_several_markers_on_a_line_and_odd_shapes() -> None:
    text = "intro\n- **Island 1 — <CUSTOMIZE>**: <CUSTOMIZE>\nkeep n < 3 <CUSTOMIZE: when n < 100 rows> end\n<CUSTOMIZE: never closed\n"
    markers = customize_markers(text, Path("p.md"))
    assert [(m.line, m.text) for m in markers] == [
        (2, "<CUSTOMIZE>"),
        (2, "<CUSTOMIZE>"),
        (3, "<CUSTOMIZE: when n < 100 rows>"),
        (4, "<CUSTOMIZE: never closed"),
    ]
    assert markers[0].preview == "<CUSTOMIZE>" and markers[0].label == ""


def test_marker_labels_and_previews() -> None:
    marker = Marker(Path("a.md"), 3, "<CUSTOMIZE: population_size, default 40>")
    assert marker.label == "population_size"
    goal = Marker(Path("a.md"), 3, "<CUSTOMIZE: goal — what should get better and why it matters to the people who run this program>")
    assert goal.label == "goal"
    assert goal.preview.endswith("…>") and len(goal.preview) < 80


def test_the_shipped_template_has_every_marker_listed(tmp_path: Path) -> None:
    program = make_program(tmp_path, POINTER, playbook=(TEMPLATES / "strategy.md").read_text())
    problems = playbook_problems(program, tmp_path)
    where = [f"{p.path}:{p.line}" for p in problems]
    assert where[0] == ".autoloop/programs/demo/strategy/alphaevolve.md:1"
    assert ".autoloop/programs/demo/strategy/alphaevolve.md:123" in where
    assert len(problems) == len(customize_markers((TEMPLATES / "strategy.md").read_text(), Path("s")))
    assert str(problems[0]).endswith(
        "unresolved <CUSTOMIZE: program-name> marker; replace it with this program's text (or run `autoloop customize demo`)"
    )


def test_markers_in_the_prompts_are_problems_too(tmp_path: Path) -> None:
    program = make_program(tmp_path)
    prompt = tmp_path / ".autoloop/programs/demo/strategy/prompts/crossover.md"
    prompt.write_text("# Crossover\n\n<CUSTOMIZE: domain facts>\n")
    [problem] = playbook_problems(program, tmp_path)
    assert (str(problem.path), problem.line) == (".autoloop/programs/demo/strategy/prompts/crossover.md", 3)


def test_a_missing_support_file_is_a_problem(tmp_path: Path) -> None:
    program = make_program(tmp_path)
    (tmp_path / ".autoloop/programs/demo/strategy/prompts/crossover.md").unlink()
    [problem] = playbook_problems(program, tmp_path)
    assert str(problem) == (
        ".autoloop/programs/demo/program.md:26: the Evolution Strategy lists strategy/prompts/crossover.md, "
        "which does not exist; create it or drop it from the list"
    )


@given(
    before=st.lists(st.text(alphabet="abc <>\n#-*", max_size=20), max_size=5),
    content=st.text(alphabet="abcdef -:,", max_size=15),
)
def test_a_marker_is_found_at_its_line_in_any_text(before: list[str], content: str) -> None:
    prefix = "\n".join(line.replace("<", "") for line in before)
    text = prefix + "\n<CUSTOMIZE: " + content + ">\ntail\n"
    [marker] = customize_markers(text, Path("x.md"))
    assert marker.line == prefix.count("\n") + 2
    assert marker.content == " ".join(content.split())


# --- answers ---------------------------------------------------------------------------------------


def test_answers_by_label_content_text_and_place() -> None:
    files = {
        "strategy/a.md": "# A — <CUSTOMIZE: program-name>\n- **Island 0 — <CUSTOMIZE>**: <CUSTOMIZE>\n",
        "program.md": "Goal: <CUSTOMIZE: goal — say it>\nCap <CUSTOMIZE: population_size, default 40>.\n",
    }
    answers = {
        "program-name": "demo",
        "goal — say it": "Be fast.",
        "<CUSTOMIZE: population_size, default 40>": 20,
        ".autoloop/programs/demo/strategy/a.md:2": ["sorting", "argsort then reduceat"],
    }
    resolved, unused = resolve_markers(files, answers, Path("answers.yaml"))
    assert unused == []
    assert resolved["strategy/a.md"] == "# A — demo\n- **Island 0 — sorting**: argsort then reduceat\n"
    assert resolved["program.md"] == "Goal: Be fast.\nCap 20.\n"


def test_unmatched_answers_are_reported_and_markers_without_answers_kept() -> None:
    files = {"a.md": "x <CUSTOMIZE: one> y <CUSTOMIZE: two>\n"}
    resolved, unused = resolve_markers(files, {"one": "1", "three": "3", "a.md:9": "nine"}, Path("ans.yaml"))
    assert resolved["a.md"] == "x 1 y <CUSTOMIZE: two>\n"
    assert unused == ["three", "a.md:9"]


def test_bad_answer_values_name_the_answers_file() -> None:
    files = {"a.md": "<CUSTOMIZE> <CUSTOMIZE>\n"}
    with pytest.raises(ProgramError, match=r"^ans.yaml: `a.md:1` gives 1 answers but that line has more markers"):
        resolve_markers(files, {"a.md:1": ["only one"]}, Path("ans.yaml"))
    with pytest.raises(ProgramError, match="the answer for `a.md:1` must be text"):
        resolve_markers(files, {"a.md:1": {"nested": "map"}}, Path("ans.yaml"))


@given(st.lists(st.text(alphabet="xyz .\n", max_size=12), min_size=1, max_size=6))
def test_answering_every_marker_leaves_the_rest_byte_for_byte(chunks: list[str]) -> None:
    text = "<CUSTOMIZE: m>".join(chunks)
    resolved, unused = resolve_markers({"f.md": text}, {"m": "ANSWER"}, Path("a.yaml"))
    assert resolved["f.md"] == "ANSWER".join(chunks)
    assert unused == ([] if len(chunks) > 1 else ["m"])


# --- code/config.yaml ------------------------------------------------------------------------------


def test_config_yaml_absent_empty_and_present(tmp_path: Path) -> None:
    program = make_program(tmp_path)
    assert load_config_yaml(program, tmp_path) == {}
    config = tmp_path / ".autoloop/programs/demo/code/config.yaml"
    config.write_text("# only comments\n")
    assert load_config_yaml(program, tmp_path) == {}
    config.write_text("population_size: 20\nexploitation_ratio: 0.6\n")
    assert load_config_yaml(program, tmp_path) == {"population_size": 20, "exploitation_ratio": 0.6}


def test_bad_config_yaml_names_file_and_line(tmp_path: Path) -> None:
    program = make_program(tmp_path)
    config = tmp_path / ".autoloop/programs/demo/code/config.yaml"
    config.write_text("population_size: 20\nislands: [1, 2\nother: 3\n")
    with pytest.raises(ProgramError, match=r"^\.autoloop/programs/demo/code/config\.yaml:3: invalid YAML"):
        load_config_yaml(program, tmp_path)
    config.write_text("- just\n- a list\n")
    with pytest.raises(ProgramError, match=r"config\.yaml:1: must be a mapping"):
        load_config_yaml(program, tmp_path)


def test_the_runner_gets_the_playbook_or_one_error_listing_every_problem(tmp_path: Path) -> None:
    program = make_program(tmp_path, POINTER, playbook="# Strategy — <CUSTOMIZE: program-name>\n\n<CUSTOMIZE: framing>\n")
    with pytest.raises(ProgramError) as caught:
        runnable_playbook(program, tmp_path)
    lines = str(caught.value).splitlines()
    assert lines[0] == (
        ".autoloop/programs/demo/strategy/alphaevolve.md: the alphaevolve playbook is not ready to run (2 problems); "
        "resolve them by hand or with `autoloop customize demo`:"
    )
    assert lines[1].startswith("  .autoloop/programs/demo/strategy/alphaevolve.md:1: unresolved <CUSTOMIZE: program-name>")
    assert lines[2].startswith("  .autoloop/programs/demo/strategy/alphaevolve.md:3: unresolved <CUSTOMIZE: framing>")
    (tmp_path / ".autoloop/programs/demo/strategy/alphaevolve.md").write_text(RESOLVED)
    playbook = runnable_playbook(program, tmp_path)
    assert playbook is not None and playbook.text == RESOLVED
    assert runnable_playbook(make_program(tmp_path / "other", ""), tmp_path / "other") is None
