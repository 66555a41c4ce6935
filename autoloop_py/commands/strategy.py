"""`autoloop strategy add|list|remove`: adopt a strategy template in an existing program, or drop it again."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from autoloop_py.commands.check import program_findings
from autoloop_py.commands import COMMANDS
from autoloop_py.commands.common import load_named, read_state, repo_root, subparser
from autoloop_py.commands.new import (
    answered,
    package_strategies,
    pick_template,
    report_markers,
    strategy_templates,
    write_files,
)
from autoloop_py.errors import AutoloopError, ProgramError, StateError
from autoloop_py.program.model import PROGRAMS_DIR, Program, check_all, load_program
from autoloop_py.program.playbook import Marker, marker_problem, playbook_pointer
from autoloop_py.program.strategy_section import section_line, with_strategy_section
from autoloop_py.program.strategy_template import (
    STRATEGY_FOLDER,
    playbook_path,
    pointer_block,
    program_files,
)
from autoloop_py.render import render
from autoloop_py.state.parts import trim
from autoloop_py.state.memory_folder import open_memory
from autoloop_py.state.population import population_of
from autoloop_py.strategies.runner import load_runner

_SUMMARY = COMMANDS["strategy"][1]
_ANSWERS_EXAMPLE = """\
answers.yaml answers the <CUSTOMIZE: …> markers, by label or by `file:line` (a list for two on a line):
    "2–4 sentences describing the target artifact": Sort 10^6 ints; fitness is -seconds; output must be sorted.
    "strategy/alphaevolve.md:41": [insertion, insertion-based sorts]
    population_size: "40"
  Without --answers the markers are listed with file:line; answer them by hand or with `autoloop customize`."""
_ADD_EXAMPLE = f"""\
autoloop strategy add alphaevolve --program perf_sort --answers answers.yaml

  writes .autoloop/programs/perf_sort/strategy/alphaevolve.md (the playbook) and strategy/prompts/*.md,
  points program.md's `## Evolution Strategy` at them, and runs `autoloop check` on the program.
  The program's history stays: the first iteration with the strategy evaluates the current best as it
  is and seeds the Population with it. Commit and push the folder so that runs use it.

  {_ANSWERS_EXAMPLE}"""
_DESCRIPTION = f"""\
{_SUMMARY}

example:
  autoloop strategy list
  autoloop strategy add alphaevolve --program perf_sort --answers answers.yaml
  autoloop strategy remove alphaevolve --program perf_sort

`add` {_ADD_EXAMPLE.split(chr(10), 2)[2].strip()}

`remove` deletes the program's strategy/ folder and points `## Evolution Strategy` back to the default
flow; the state file's Population is left alone.
"""


def add_parser(commands: Any) -> None:
    """Registers `autoloop strategy` and its `add`, `list` and `remove` commands."""
    parser = commands.add_parser(
        "strategy", help=_SUMMARY, description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    actions = parser.add_subparsers(dest="strategy_command", metavar="ACTION")
    choices = " | ".join(package_strategies())
    add = subparser(actions, "add", _ADD_EXAMPLE,
                    "Copy a strategy into a program's strategy/ folder and point program.md at it.")
    add.add_argument("name", help=f"the strategy: {choices}, or a folder of .autoloop/strategies/")
    add.add_argument("--program", required=True, help="the program's name (a folder under .autoloop/programs/)")
    add.add_argument(
        "--answers", type=Path,
        help="a YAML file answering the <CUSTOMIZE…> markers: `label: text` or `\"strategy/<file>:<line>\": text`",
    )
    add.set_defaults(handler=cmd_add)
    listing = subparser(actions, "list", "autoloop strategy list", "List the strategies and which programs use which.")
    listing.set_defaults(handler=cmd_list)
    remove = subparser(actions, "remove", "autoloop strategy remove alphaevolve --program perf_sort",
                       "Remove a program's strategy/ folder and its pointer (the state file stays as it is).")
    remove.add_argument("name", help="the strategy the program uses")
    remove.add_argument("--program", required=True, help="the program's name")
    remove.set_defaults(handler=cmd_remove)
    # Before the action too (`autoloop strategy --repo R list`); the action's own --repo would override a shared dest.
    parser.add_argument("--repo", dest="strategy_repo", metavar="REPO", type=Path,
                        help="the git repository (default: the current one)")
    parser.set_defaults(handler=lambda args, console: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 1


def cmd_add(args: argparse.Namespace, console: Console) -> int:
    """Copies the strategy into the program, points program.md at it, answers markers, and checks the program."""
    root = _root(args)
    program = load_named(root, args.program, with_issues=False)
    folder = _folder(program)
    template = pick_template(root, args.name)
    _refuse_pointer(program, template.name)
    files = program_files(template)
    _refuse_existing(root, folder, files)
    files = answered(files, program.name, args.answers)
    replaced = section_line(program.text)
    text = with_strategy_section(program.text, pointer_block(template, list(files)))
    write_files(root / folder, files)
    (root / program.path).write_text(text, encoding="utf-8")
    console.print(f"added {template.name} to {program.name}: wrote {', '.join(str(folder / r) for r in files)}",
                  markup=False, highlight=False)
    where = f"replaced its section at line {replaced}" if replaced else "added the section"
    console.print(f"{program.path}: `## Evolution Strategy` now points to {playbook_path(template.name)} ({where})",
                  markup=False, highlight=False)
    done = f"every <CUSTOMIZE…> marker is answered{f' from {args.answers}' if args.answers else ''}"
    how = f"answer (in an --answers file, by hand, or with `autoloop customize {folder.name}`)"
    markers = report_markers(console, folder, files, done, how)
    console.print("The program's history stays: when its state file has no Population yet, the first iteration "
                  "with the strategy evaluates the current best as it is and seeds the Population with it.",
                  markup=False)
    return _check(root, program, folder, markers, console)


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    """Prints the strategies available and the strategy of each program."""
    root = _root(args)
    templates = strategy_templates(root)
    console.print("strategies:", markup=False)
    for template in templates.values():
        origin = "" if template.origin == "autoloop" else f" ({template.origin})"
        console.print(f"  {template.name}{origin}, when:", markup=False, highlight=False)
        for condition in template.when_to_pick or ("(its CUSTOMIZE.md does not say)",):
            console.print(f"    - {trim(condition, 110)}", markup=False, highlight=False)
    programs, problems = check_all(root)
    console.print("programs:", markup=False)
    for program in programs:
        pointer = playbook_pointer(program)
        used = f"{Path(pointer[0]).stem} ({program.base_dir / pointer[0]})" if pointer else "default flow"
        if pointer and not (root / program.base_dir / pointer[0]).is_file():
            used += ", which does not exist: the default flow runs"
        console.print(f"  {program.name}: {used}", markup=False, highlight=False)
    for problem in problems:
        console.print(f"  [yellow]![/] {escape(str(problem))}", highlight=False)
    if not programs and not problems:
        console.print(f"  none under {PROGRAMS_DIR}", markup=False)
    return 0


def cmd_remove(args: argparse.Namespace, console: Console) -> int:
    """Removes the program's strategy/ folder and points `## Evolution Strategy` back to the default flow."""
    root = _root(args)
    program = load_named(root, args.program, with_issues=False)
    folder = _folder(program)
    pointer = playbook_pointer(program)
    if pointer is None or Path(pointer[0]).stem != args.name:
        line = section_line(program.text)
        uses = f"uses the {Path(pointer[0]).stem} strategy" if pointer else "uses no strategy"
        raise ProgramError(f"{program.name} {uses}, not {args.name}; `autoloop strategy list` shows what each uses",
                           program.path, pointer[1] if pointer else line)
    strategy_dir = root / folder / STRATEGY_FOLDER
    if strategy_dir.is_symlink() or strategy_dir.is_file():
        strategy_dir.unlink()
    elif strategy_dir.is_dir():
        shutil.rmtree(strategy_dir)
    text = with_strategy_section(program.text, render("scaffold/prose_strategy.md.j2"))
    (root / program.path).write_text(text, encoding="utf-8")
    console.print(f"removed {folder / STRATEGY_FOLDER}/ and the pointer: {program.name} runs the default flow",
                  markup=False, highlight=False)
    console.print(
        f"The state file's `## 🧬 Population` (on memory/autoloop) is left alone: the default flow does not read "
        f"it, and adding {args.name} again starts from it. Before adding another strategy, delete it with "
        f"`autoloop edit {program.name}`.",
        markup=False, highlight=False,
    )
    return 0


def _root(args: argparse.Namespace) -> Path:
    return repo_root(args.repo or getattr(args, "strategy_repo", None))


def _folder(program: Program) -> Path:
    """Returns the program folder; a bare `<name>.md` program has none to hold strategy/ files."""
    if program.directory is None:
        raise ProgramError(
            f"{program.name} is a bare program file, whose strategy/ paths would resolve from the repository root "
            f"and be shared by every bare program; make it a folder first: move {program.path} to "
            f"{PROGRAMS_DIR / program.name / 'program.md'} (its Target paths then start from that folder), "
            "then run this command again",
            program.path,
        )
    return program.directory


def _refuse_pointer(program: Program, name: str) -> None:
    """Refuses a program whose Evolution Strategy already points to a playbook (this one or another)."""
    pointer = playbook_pointer(program)
    if pointer is None:
        return
    rel, line = pointer
    used = Path(rel).stem
    how = "edit its files, or remove it first" if used == name else "remove it first"
    raise ProgramError(f"{program.name} already uses the {used} strategy ({rel}); {how} with "
                       f"`autoloop strategy remove {used} --program {program.name}`", program.path, line)


def _refuse_existing(root: Path, folder: Path, files: dict[str, str]) -> None:
    """Refuses to overwrite files of the program's strategy/ folder, or to write through a symlink out of it."""
    base = (root / folder).resolve()
    present = [folder / rel for rel in files if (root / folder / rel).exists() or (root / folder / rel).is_symlink()]
    if present:
        listed = ", ".join(str(p) for p in present)
        raise AutoloopError(f"{listed} already exist; move them away (or `git rm` them) before adding the strategy")
    for rel in files:
        if not (root / folder / rel).resolve().is_relative_to(base):
            raise AutoloopError(f"{folder / rel} leads out of {folder} through a symlink; remove the link first")


def _population_problems(root: Path, program: Program) -> list[str]:
    """Returns why the strategy cannot read the Population another strategy left in the state file ([] if it can)."""
    try:
        state = read_state(open_memory(root), program)
        population = population_of(state) if state is not None else None
        if population is None or not (population.candidates or population.strategy_state):
            return []
        runner = load_runner(program, root)
    except (ProgramError, StateError):
        return []  # unanswered markers and a damaged state file have their own messages
    state_of = getattr(runner.engine, "state_of", None) if runner is not None else None
    try:
        if state_of is not None:
            state_of(population)
    except StateError as err:
        return [f"{state.path} on memory/autoloop: its `## 🧬 Population` was written by another strategy, which "
                f"{runner.playbook.name} cannot read ({err.message}); delete that section with `autoloop edit "
                f"{program.name}` before the next run (git keeps the old entries in the branch's history)"]
    return []


def _check(root: Path, program: Program, folder: Path, markers: list[Marker], console: Console) -> int:
    """Prints what `autoloop check` finds in the program now (the markers listed above only counted); returns 0."""
    try:
        loaded = load_program(root, program.path)
        problems, warnings = program_findings(loaded, root)
        problems += _population_problems(root, loaded)
    except ProgramError as err:
        loaded, problems, warnings = program, [str(err)], []
    listed = {str(marker_problem(m, loaded)) for m in markers}
    console.print("autoloop check:", markup=False)
    for problem in (p for p in problems if p not in listed):
        console.print(f"[red]✗[/] {escape(problem)}", highlight=False)
    if listed:
        console.print(f"[red]✗[/] the {len(listed)} unanswered markers above", highlight=False)
    for warning in warnings:
        console.print(f"[yellow]![/] {escape(warning)}", highlight=False)
    if not problems:
        console.print(f"[green]✓[/] {escape(program.name)}; commit and push {folder} so that runs use it",
                      highlight=False)
    return 0
