"""Tests for autoloop_py/cli.py: the command registry, and commands imported only when they run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from autoloop_py.cli import COMMANDS, _command_in, build_parser


def _summaries(parser: object) -> dict[str, str]:
    action = parser._subparsers._group_actions[0]  # type: ignore[attr-defined]
    return {choice.dest: choice.help for choice in action._choices_actions}


def test_the_registry_names_every_command_with_the_help_its_module_registers() -> None:
    registered = _summaries(build_parser())
    assert registered == {name: summary for name, (_, summary) in COMMANDS.items()}
    assert list(registered) == list(COMMANDS)  # the same order in `--help`


def test_a_lazy_parser_lists_every_command_and_registers_only_the_one_that_runs() -> None:
    lazy = build_parser("status", lazy=True)
    assert _summaries(lazy) == _summaries(build_parser())
    args = lazy.parse_args(["status", "function_minimization", "--mermaid"])
    assert args.handler.__name__ == "cmd_status" and args.program == "function_minimization" and args.mermaid
    for command in ("pause", "resume"):  # one module registers both
        args = build_parser(command, lazy=True).parse_args([command, "p"])
        assert args.handler.__name__ == "cmd_pause" and args.paused == (command == "pause")


@pytest.mark.parametrize(("argv", "command"), [
    (["-v", "status", "--repo", "x"], "status"), (["--version"], None), ([], None), (["run", "--program", "p"], "run"),
])
def test_the_command_is_the_first_word_that_is_not_an_option(argv: list[str], command: str | None) -> None:
    assert _command_in(argv) == command


def test_version_and_help_import_no_command_module() -> None:
    """Each command's module (and the loop, git, the model worker and rich below it) is imported only when needed."""
    script = (
        "import sys\nfrom autoloop_py.__main__ import main\n"
        "for argv in (['--version'], ['--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('autoloop_py.commands.', 'autoloop_py.loop', 'git',\n"
        "    'autoloop_py.proposers', 'autoloop_py.terminal', 'rich'))))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "autoloop 0." in done.stdout and "status " in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"
