"""Helpers shared by the commands: finding the repository and reading programs and their state."""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import git
from rich.console import Console
from rich.markup import escape

from autoloop_py.commands import COMMANDS
from autoloop_py.errors import AutoloopError, ProgramError, StateError
from autoloop_py.git import command as gitutil
from autoloop_py.git.objects import GitSession
from autoloop_py.loop.record.recording import parse_or_new, state_path
from autoloop_py.loop.tick import schedule
from autoloop_py.program import names as program_names
from autoloop_py.program.model import Program, check_all, find_program, program_name
from autoloop_py.program.repository_settings import RepositorySettings, load_repository_settings
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.memory_folder import Memory, open_memory
from autoloop_py.state.schedule_table import SCHEDULE_PATH, parse_schedule_table
from autoloop_py.state.untrusted_text import plain

logger = logging.getLogger(__name__)


def shown(text: str) -> str:
    """Returns text a model, an agent or candidate code may have written, for console.print: no escape sequence or
    control character (plain), and no rich markup (`[link=…]` would print an OSC 8 hyperlink)."""
    return escape(plain(text))


def subparser(commands: Any, name: str, example: str, summary: str | None = None) -> argparse.ArgumentParser:
    """Returns a sub-parser whose help ends with an example; its summary is the command's in COMMANDS by default."""
    summary = summary if summary is not None else COMMANDS[name][1]
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=summary,
        description=f"{summary}\n\nexample:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--repo", type=Path, default=None, help="the git repository (default: the current one)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show log messages")
    return parser


def repo_root(path: Path | None) -> Path:
    """Returns the top of the git repository containing path (default: the current directory)."""
    start = (path or Path.cwd()).resolve()
    try:
        top = git.Repo(start, search_parent_directories=True).working_tree_dir
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise AutoloopError(f"{start} is not inside a git repository; run `git init` there or pass --repo") from None
    if top is None:
        raise AutoloopError(f"{start} is a bare repository; autoloop needs a checkout")
    return Path(top)


def add_memory_dir(parser: argparse.ArgumentParser) -> None:
    """Adds --memory-dir: state files in a folder (gh-aw's repo-memory clone) instead of the memory branch."""
    parser.add_argument(
        "--memory-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="read and write state files in DIR, e.g. /tmp/gh-aw/repo-memory/default (env AUTOLOOP_MEMORY_DIR)",
    )


def load_named(root: Path, name: str, console: Console | None = None, with_issues: bool = True) -> Program:
    """Returns the program called name, file or (with_issues) issue program; its own load error is raised as is.

    Other programs' problems are only warnings, printed when a console is given.
    """
    programs, problems = load_all(root, with_issues=with_issues)
    for problem in problems:
        if problem.path is not None and program_name(problem.path) == name:
            raise problem
        if console is not None:
            console.print(f"[yellow]skipping a broken program:[/] {problem}", highlight=False)
    return find_program(programs, name)


def load_all(root: Path, with_issues: bool = False) -> tuple[list[Program], list[ProgramError]]:
    """Returns the file programs and, in GitHub (with_issues and its environment), the issue programs too.

    Without API access, an Agentic Workflows job finds the issue programs its scheduler step wrote
    (AUTOLOOP_ISSUE_PROGRAMS_DIR, default /tmp/gh-aw/issue-programs when GITHUB_ACTIONS is set).
    """
    programs, problems = check_all(root)
    if not with_issues:
        return programs, problems
    from autoloop_py.github import client as github  # only here: `run` sends its first request sooner without it
    from autoloop_py.github import issue_programs

    settings = github.from_environment(os.environ)
    if settings is None:
        more, more_problems = issue_programs.scheduled(root, os.environ, [p.name for p in programs])
        return programs + more, problems + more_problems
    found, refused = issue_programs.discover_all(
        github.connect(settings), settings.repository, [p.name for p in programs]
    )
    problems = problems + [ProgramError(why) for why in refused]
    cache = gitutil.common_dir(gitutil.open_repo(root)) / "autoloop" / "issue-programs"
    more, more_problems = issue_programs.materialize(root, found, cache)
    return _without_clashes(programs + more, problems + more_problems)


def _without_clashes(programs: list[Program], problems: list[ProgramError]) -> tuple[list[Program], list[ProgramError]]:
    """Returns the programs whose name no other program has, and an error for each of the others."""
    clashes = program_names.duplicates((p.name, p.path) for p in programs)
    kept = [p for p in programs if p.name.casefold() not in clashes]
    errors = [ProgramError(program_names.duplicate_message(p.name, clashes[p.name.casefold()], p.path), p.path)
              for p in programs if p.name.casefold() in clashes]
    return kept, problems + errors


def read_state(memory: Memory, program: Program, at: str | None = None) -> statefile.StateFile | None:
    """Returns the program's parsed state file at commit `at` (None: none yet); a Last Run it cannot add to raises."""
    text = memory.read(state_path(program), at)
    found = parse_or_new(text, program, state_path(program)) if text else None
    schedule.next_due(program, found.machine if found else None)
    return found


def schedule_rank(
    root: Path, environ: Mapping[str, str]
) -> tuple[RepositorySettings, Callable[[Sequence[str]], list[str]] | None]:
    """Returns the repository's settings and, under `schedule-policy: gain`, the order it gives due programs.

    The gain order reads `schedule.md` on the memory branch (as synced by the states' read); its rng is seeded
    with the table's iterations, so a plan of the same table gives the same order.
    """
    settings = load_repository_settings(root, environ)
    if settings.schedule_policy != "gain":
        return settings, None
    from autoloop_py.loop.tick.gain import order_by_gain

    text = open_memory(root).read(SCHEDULE_PATH)
    arms = parse_schedule_table(text) if text else {}
    rng = random.Random(round(sum(a.iterations for a in arms.values()) * 1000))
    return settings, lambda due: order_by_gain(due, arms, rng, settings.exploration)


def readable_states(
    root: Path, programs: list[Program], forced: str | None, session: GitSession | None = None
) -> dict[str, statefile.StateFile | None]:
    """Returns the read_state of each program whose state file can be read; the others are logged and left out.

    One damaged state file must not stop every other program; the forced program's error is raised.
    """
    states, damaged, _ = states_and_damage(root, programs, session)
    for name, err in damaged.items():
        if name == forced:
            raise err
        logger.warning("skipping %s: its state file cannot be read: %s", name, err)
    return states


def states_and_damage(
    root: Path, programs: list[Program], session: GitSession | None = None
) -> tuple[dict[str, statefile.StateFile | None], dict[str, StateError], str | None]:
    """Returns (the readable programs' states, the error of each program whose state file cannot be read, the memory
    commit all were read at: a run recording meanwhile moves the branch between two programs' reads)."""
    session = session if session is not None else GitSession(root)
    memory = open_memory(root, session=session)
    if isinstance(memory, MemoryStore):
        memory.sync(reuse_listing=session.owns_pushes)  # a run that owns its pushes keeps its listing a while
    else:
        memory.sync()
    states: dict[str, statefile.StateFile | None] = {}
    damaged: dict[str, StateError] = {}
    at = memory.tip()
    for program in programs:
        try:
            states[program.name] = read_state(memory, program, at)
        except StateError as err:
            damaged[program.name] = err
    return states, damaged, at


def machines(states: dict[str, statefile.StateFile | None]) -> dict[str, Any]:
    """Returns each program's Machine State (None for never-run programs)."""
    return {name: (s.machine if s is not None else None) for name, s in states.items()}


def show_report(report: dict[str, Any], as_json: bool, tables: Callable[[dict[str, Any], Console], None],
                console: Console) -> None:
    """Prints a command's report as JSON (--json) or as the command's tables."""
    if as_json:
        console.out(json.dumps(report, indent=2, ensure_ascii=False), highlight=False)
    else:
        tables(report, console)


def format_metric(value: float | None) -> str:
    """Returns a metric for display ('—' when unknown)."""
    return "—" if value is None else f"{value:.6g}"


def format_percent(value: float | None) -> str:
    """Returns a share for display, to a tenth of a percent ('—' when unknown)."""
    return "—" if value is None else f"{value:.1%}"
