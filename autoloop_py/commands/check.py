"""`autoloop check`: list every problem of every program; non-zero exit if any."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from autoloop_py.commands.common import repo_root, subparser
from autoloop_py.errors import AutoloopError, GitError, ProgramError
from autoloop_py.git.command import common_dir, open_repo
from autoloop_py.git.work_tree import work_tree
from autoloop_py.loop.iteration.baseline_check import BaselineCheck, cache_dir, check_baseline
from autoloop_py.loop.tick.schedule import parse_schedule
from autoloop_py.program.evaluator_lint import in_process_warnings
from autoloop_py.program.frontmatter import key_line
from autoloop_py.program.model import UNCONFIGURED_SENTINEL, Program, check_all, discover
from autoloop_py.program.playbook import (
    customize_markers,
    find_playbook,
    load_config_yaml,
    marker_problem,
    playbook_problems,
    playbook_warnings,
)
from autoloop_py.program.requirements import leading_pip_install
from autoloop_py.proposers.setup import missing_keys, provider_problem
from autoloop_py.sandbox.run import isolation_report
from autoloop_py.strategies.alphaevolve.config import parse_alphaevolve_config


def add_parser(commands: Any) -> None:
    """Registers `autoloop check`."""
    parser = subparser(commands, "check", "autoloop check")
    parser.add_argument("--no-evaluate", action="store_true",
                        help="skip evaluating each program's unchanged code (cached by the working tree otherwise)")
    parser.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace, console: Console) -> int:
    """Prints each problem as `file:line: message`; returns 1 if there is any."""
    root = repo_root(args.repo)
    programs, problems = check_all(root)
    messages = [str(p) for p in problems]
    failing: set[str] = set()
    for program in programs:
        found = _program_problems(program, root)
        messages.extend(found)
        if found:
            failing.add(program.name)
    lines, sandbox_problems = isolation_report(programs)
    messages.extend(sandbox_problems)
    ready = [p for p in programs if p.name not in failing and not p.unconfigured and p.evaluation is not None]
    baselines = {} if args.no_evaluate or sandbox_problems else _baselines(ready, root, console)
    for name, found in baselines.items():
        messages.extend(found.problems)
        if found.problems:
            failing.add(name)
    for message in messages:
        console.print(f"[red]✗[/] {escape(message)}", highlight=False)
    for warning in (w for program in programs for w in playbook_warnings(program, root)):
        console.print(f"[yellow]![/] {escape(str(warning))}", highlight=False)
    notes = (w for program in programs for w in [*program.warnings, *_pip_notes(program), *_key_warnings(program)])
    notes = (*notes, *(w for program in programs for w in in_process_warnings(program, root)))
    for warning in notes:  # emoji=False: a `file:100:` would print as an emoji
        console.print(f"[yellow]![/] {escape(warning)}", highlight=False, emoji=False)
    for program in programs:
        if program.name not in failing:
            note = _unconfigured_note(program) + _baseline_note(baselines.get(program.name))
            console.print(f"[green]✓[/] {program.name}{escape(note)}")
    for line in lines:  # sandboxed is the normal case: silent; how the process limit holds is always said
        if line.startswith("NOT"):
            console.print(escape(line), style="yellow", highlight=False)
        elif line.startswith("sandbox: process limit"):
            console.print(escape(line), highlight=False)
    if not discover(root):
        console.print("no programs found under .autoloop/programs/")
    return 1 if messages else 0


def _baselines(programs: list[Program], root: Path, console: Console) -> dict[str, BaselineCheck]:
    """Returns what evaluating each program's unchanged code found (as an iteration's baseline), saying which runs."""
    if not programs:
        return {}
    repo = open_repo(root)
    cache = cache_dir(common_dir(repo))
    found: dict[str, BaselineCheck] = {}
    try:
        with work_tree(repo) as tree:
            for program in programs:
                timeout = program.config.evaluation_timeout
                saying = f"evaluating {program.name} (its baseline; timeout {timeout:g} s)…"
                say = functools.partial(console.print, saying, highlight=False, markup=False)
                found[program.name] = check_baseline(program, repo, tree, cache, say)
    except GitError as error:
        return {p.name: BaselineCheck((f"{p.path}: not evaluated: {error}",)) for p in programs}
    return found


def _baseline_note(found: BaselineCheck | None) -> str:
    """Returns what the ✓ line says of the baseline: the values it reported, and whether they were remembered."""
    if found is None or not found.values:
        return ""
    values = ", ".join(f"{name} {value:g}" for name, value in found.values.items())
    return f" (baseline {values}{'; cached' if found.cached else ''})"


def _unconfigured_note(program: Program) -> str:
    """Returns what keeps a marker-free program from running: the template's sentinel line, if it is still there."""
    if not program.unconfigured:
        return ""
    line = next((number for number, text in enumerate(program.text.splitlines(), 1)
                 if UNCONFIGURED_SENTINEL in text), 1)
    return (f" (unconfigured template: no CUSTOMIZE marker is left; delete the {UNCONFIGURED_SENTINEL} line at "
            f"{program.path}:{line} and the note under it, and it runs)")


def _pip_notes(program: Program) -> list[str]:
    """Returns a note on a `pip install` the evaluation begins with: the sandbox has no network for it."""
    if program.evaluation is None:
        return []
    where = f"{program.path}:{program.evaluation.line}"
    try:
        leading = leading_pip_install(program.evaluation.command)
    except ValueError as err:
        return [f"{where}: the evaluation's `pip install`: {err}; `autoloop deps` will not install it"]
    if leading is None:
        return []
    return [f"{where}: the evaluation begins with `{leading.text}`, which has no network inside the sandbox: "
            f"`autoloop deps {program.name} --install` installs {' '.join(leading.args)} before it runs "
            "(the workflows do)"]


def _program_problems(program: Program, root: Path) -> list[str]:
    """Returns a loaded program's schedule, marker and playbook problems."""
    messages: list[str] = []
    try:
        parse_schedule(program.config.schedule)
    except ValueError as err:
        messages.append(f"{program.path}: frontmatter `schedule`: {err}")
    if program.direction_problem is not None and not program.unconfigured:
        messages.append(str(program.direction_problem))
    try:
        problem = provider_problem(program.config.model) if program.config.model else None
    except AutoloopError:  # no litellm here (the `llm` extra): _key_warnings says the model was not checked
        problem = None
    if problem is not None:
        messages.append(f"{_model_place(program)}: frontmatter `model`: {problem}; write a provider-prefixed litellm "
                        "model name such as openai/gpt-4o-mini")
    messages.extend(str(marker_problem(m, program)) for m in customize_markers(program.text, program.path))
    found = playbook_problems(program, root)
    messages.extend(str(p) for p in found)
    return messages + ([] if found else _tunable_problems(program, root))


def _model_place(program: Program) -> str:
    """Returns `program.md:line` of the frontmatter's `model:`."""
    line = key_line(program.text, "model")
    return f"{program.path}" + ("" if line is None else f":{line}")


def _key_warnings(program: Program) -> list[str]:
    """Returns a warning for each API key the program's `model:` needs and this environment lacks.

    A warning, not a problem: the key may live where the program runs (a CI secret), not here.
    """
    model = program.config.model
    try:
        if not model or provider_problem(model) is not None:
            return []
        missing = missing_keys(model)
    except AutoloopError as err:
        return [f"{_model_place(program)}: model '{model}' not checked: {err}"]
    return [f"{_model_place(program)}: model '{model}' needs {key} in the environment where it runs (not set here)"
            for key in missing]


def _tunable_problems(program: Program, root: Path) -> list[str]:
    """Returns why an AlphaEvolve playbook's tunables (or their config.yaml overrides) cannot be read."""
    playbook = find_playbook(program, root)
    if playbook is None or playbook.name != "alphaevolve":
        return []
    try:
        parse_alphaevolve_config(playbook, load_config_yaml(program, root))
    except ProgramError as err:
        return [str(err)]
    return []


def program_findings(program: Program, root: Path) -> tuple[list[str], list[str]]:
    """Returns (problems, warnings) that `autoloop check` reports for one loaded program."""
    _, sandbox_problems = isolation_report([program])
    problems = _program_problems(program, root) + list(sandbox_problems)
    warnings = [str(w) for w in playbook_warnings(program, root)] + list(program.warnings)
    return problems, warnings
