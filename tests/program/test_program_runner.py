"""`runs-on:` and `container:` in a program's frontmatter: labels and a job container, or an error naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.errors import ProgramError
from autoloop_py.program.frontmatter import parse_frontmatter
from autoloop_py.program.runner import parse_container, parse_runs_on


def _config(head: str) -> tuple[object, list[ProgramError]]:
    problems: list[ProgramError] = []
    config = parse_frontmatter(f"---\nschedule: every 1h\n{head}---\n# P\n", Path("p/program.md"), problems, [])
    return config, problems


def test_labels_and_images_are_read() -> None:
    assert parse_runs_on("gpu") == ("gpu",)
    assert parse_runs_on(["self-hosted", " gpu "]) == ("self-hosted", "gpu")
    assert parse_container(" nvidia/cuda:12.4.1-runtime-ubuntu22.04 ") == "nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    mapping = {"image": "python:3.12", "options": "--gpus all"}
    assert parse_container(mapping) == mapping
    config, problems = _config("runs-on: [self-hosted, gpu]\ncontainer:\n  image: python:3.12\n  options: --gpus all\n")
    assert not problems
    assert config.runs_on == ("self-hosted", "gpu") and config.container == mapping
    unset, _ = _config("")
    assert (unset.runs_on, unset.container) == ((), None)


@pytest.mark.parametrize(
    ("head", "line", "words"),
    [
        ("runs-on: []\n", 3, "a runner label or a list of labels"),
        ("runs-on: [gpu, 3]\n", 3, "each label must be a non-empty string"),
        ("runs-on: {group: big}\n", 3, "a runner label or a list"),
        ("runs-on: ${{ matrix.x }}\n", 3, "without an expression"),
        ("runs-on: gpu\ncontainer: ''\n", 4, "must name an image"),
        ("runs-on: gpu\ncontainer: 3\n", 4, "an image name or a mapping"),
        ("container:\n  options: --gpus all\n", 3, "needs `image:`"),
        ("container:\n  image: python\n  privileged: true\n", 3, "unknown key `privileged`"),
    ],
)
def test_a_bad_value_is_an_error_naming_file_and_line(head: str, line: int, words: str) -> None:
    _, problems = _config(head)
    [problem] = problems
    assert words in str(problem)
    assert f"p/program.md:{line}" in str(problem)
