"""The Python API: `run` a program of a repository, `evolve` code without one, `load` a program's record.

Each call does what the command line does, through the same code: `run` parses the same options as
`autoloop run` and calls the same function, so the state file, the branches and the sandbox are the same.
Errors are the command line's errors (`AutoloopError` and its subclasses), raised instead of printed.

    import autoloop_py as al
    result = al.evolve("X = 3.0\\n", evaluate=score, iterations=10)   # score(path) -> {"value": ...}
    print(result.best_metric, result.best_code)
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import os
import shutil
import tempfile
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import git
import yaml
from rich.console import Console

from autoloop_py import cli
from autoloop_py.commands import run as run_command
from autoloop_py.commands.common import load_named, repo_root
from autoloop_py.errors import AutoloopError
from autoloop_py.git.command import call, open_repo
from autoloop_py.git.command import run as run_git
from autoloop_py.loop.iteration.iteration import IterationOutcome
from autoloop_py.loop.record.recording import load_state
from autoloop_py.program.model import PROGRAMS_DIR, Program
from autoloop_py.program.target import target_files
from autoloop_py.render import render
from autoloop_py.state import trace as tracing
from autoloop_py.state.file import POPULATION, StateFile, render_state
from autoloop_py.state.memory import MemoryStore
from autoloop_py.state.population import Population, population_of

__all__ = ["AutoloopError", "IterationOutcome", "ProgramState", "RunResult", "evolve", "load", "run"]

Evaluate = Callable[[str], Mapping[str, Any]]
OnIteration = Callable[[IterationOutcome], None]
_SOLUTION = "solution.py"


@dataclass(frozen=True)
class ProgramState:
    """A program's record, read from branch memory/autoloop with the parsers the runner uses.

    Attributes:
        program: the program, as `autoloop check` reads it.
        state: the state file: Machine State (`state.machine`), Iteration History, Lessons, prose sections.
        population: the `## 🧬 Population` of a strategy program (None without one).
        trace: the run's trace rows, one per evaluated candidate, oldest first.
        text: the state file's markdown, as stored.
    """

    program: Program
    state: StateFile
    population: Population | None
    trace: tuple[tracing.TraceRow, ...]
    text: str

    @property
    def best_metric(self) -> float | None:
        """Returns the best metric recorded (Machine State's Best Metric)."""
        return self.state.machine.best_metric


@dataclass(frozen=True)
class RunResult:
    """What a run did and where its best stands.

    Attributes:
        program: the program's name.
        outcomes: each iteration's outcome, in the order they were recorded.
        best_metric: the best metric after the run (None when nothing was ever scored).
        best_files: the Target files at the tip of `autoloop/<name>` (the best kept code), by repository path.
        record: the program's record after the run.
        repo: the repository the run worked in (for `evolve`, its scratch clone).
        state_file: `evolve` only: a copy of the state file, written beside the scratch repository.
    """

    program: str
    outcomes: tuple[IterationOutcome, ...]
    best_metric: float | None
    best_files: Mapping[str, str]
    record: ProgramState
    repo: Path
    state_file: Path | None = None

    @property
    def best_code(self) -> str:
        """Returns the best code: the one Target file's text (all of them, headed by their paths, when several)."""
        if len(self.best_files) == 1:
            return next(iter(self.best_files.values()))
        return "".join(f"# {path}\n{text}\n" for path, text in sorted(self.best_files.items()))


def run(
    program: str,
    *,
    repo: str | os.PathLike[str] = ".",
    iterations: int = 1,
    proposer: str | None = None,
    model: str | None = None,
    parallel: int | None = None,
    isolation: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    on_iteration: OnIteration | None = None,
    quiet: bool = False,
) -> RunResult:
    """Runs iterations of a program of a repository, as `autoloop run --program PROGRAM` does; returns the result.

    The options are `autoloop run`'s (`autoloop run --help` says what each does); a program's strategy and models
    are settings of its committed program.md. `on_iteration` is called with each outcome as soon as it is recorded.
    """
    argv = ["run", "--repo", os.fspath(repo), "--program", program, "--iterations", str(iterations)]
    argv += _flag("--proposer", proposer) + _flag("--model", model) + _flag("--isolation", isolation)
    argv += _flag("--parallel", None if parallel is None else str(parallel))
    argv += ["--dry-run"] * dry_run + ["--force"] * force
    args = _parse(argv)
    console = Console(stderr=True, quiet=quiet, highlight=False, soft_wrap=True)
    outcomes = run_command.execute(args, console, on_iteration)
    root = repo_root(Path(repo))
    record = load(program, repo=root)
    return RunResult(program, tuple(outcomes), record.best_metric, best_files(root, record.program), record, root)


def evolve(
    initial_code: str,
    evaluate: Evaluate | str,
    *,
    goal: str = "Improve the code so that its metric gets better.",
    metric: str | None = None,
    direction: str = "higher",
    iterations: int = 10,
    proposer: str = "tune",
    model: str | None = None,
    models: Sequence[str] | None = None,
    strategy: str | None = None,
    name: str = "evolved",
    files: Mapping[str, str | os.PathLike[str]] | None = None,
    workdir: str | os.PathLike[str] | None = None,
    isolation: str | None = None,
    on_iteration: OnIteration | None = None,
    quiet: bool = False,
) -> RunResult:
    """Evolves `initial_code` without a repository of yours; returns the best code, its metric and the record.

    `evaluate` is the trusted scorer: a function taking the candidate file's path and returning its metrics
    (a dict of numbers, as OpenEvolve's evaluators do), or a shell command that gets the path as its last
    argument and prints a JSON object; it runs in the program's `code/` folder, where `files` (name: a path of
    yours) are copied, since the sandbox sees nothing else of your machine's files. A function is copied into
    the program's evaluator, so it must be
    self-contained: the modules it uses may be global imports, anything else is defined inside it. It runs
    in the sandbox with the candidate; to keep the candidate from setting its own score, call candidate code
    through `autoloop_py.candidate.call` rather than importing it (docs/api.md).
    `metric` defaults to the only key the scorer returns for `initial_code`, else `combined_score`. The run
    happens in a scratch repository with a local bare origin, under `workdir` (default: a new temporary folder,
    kept so that you can look at it).
    """
    if direction not in ("higher", "lower"):
        raise AutoloopError(f"direction must be 'higher' or 'lower', got {direction!r}")
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="autoloop-evolve-"))
    scorer = _scorer_source(evaluate)
    metric = metric or _metric_name(initial_code, evaluate)
    root = _scratch_repository(base)
    _write_program(root, name, initial_code, scorer, goal, metric, direction, strategy, models, model, files or {})
    result = run(name, repo=root, iterations=iterations, proposer=proposer, model=model, isolation=isolation,
                 on_iteration=on_iteration, quiet=quiet)
    state_file = base / f"{name}.md"
    state_file.write_text(result.record.text, encoding="utf-8")
    return RunResult(result.program, result.outcomes, result.best_metric, result.best_files, result.record, root,
                     state_file)


def load(program: str, repo: str | os.PathLike[str] = ".") -> ProgramState:
    """Returns a program's record (state file, Population, trace) from branch memory/autoloop; reads only."""
    root = repo_root(Path(repo))
    found = load_named(root, program, Console(stderr=True, quiet=True))
    memory = MemoryStore(root)
    memory.sync()
    state = load_state(memory, found)
    paths = memory.list(tracing.trace_dir(found.name) + "/")
    rows = tracing.memory_trace(memory.read, paths, found.name, found.evaluation.metric, found.direction).rows
    population = population_of(state, memory.read) if state.section_text(POPULATION) is not None else None
    return ProgramState(found, state, population, rows, render_state(state))


def best_files(root: Path, program: Program) -> dict[str, str]:
    """Returns the Target files as the tip of `autoloop/<name>` has them (the default branch's before any keep)."""
    repo = open_repo(root)
    for ref in (f"origin/autoloop/{program.name}", f"autoloop/{program.name}", "origin/HEAD", "HEAD"):
        if call(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").ok:
            break
    files = {}
    for path in target_files(program.target, root):
        shown = call(repo, "show", f"{ref}:{path}")
        if shown.ok:
            files[path] = shown.stdout.decode("utf-8", "replace")
    return files


def _flag(name: str, value: str | None) -> list[str]:
    return [] if value is None else [name, value]


def _parse(argv: list[str]) -> argparse.Namespace:
    """Returns `autoloop` options parsed as the command line parses them; a bad value raises AutoloopError."""
    told = io.StringIO()
    try:
        with contextlib.redirect_stderr(told):
            args = cli.build_parser(argv[0], lazy=True).parse_args(argv)
    except SystemExit:
        raise AutoloopError(told.getvalue().strip().splitlines()[-1].removeprefix("autoloop run: ")) from None
    args.model_worker = None
    return args


def _scorer_source(evaluate: Evaluate | str) -> str:
    """Returns the Python source of the program's evaluator for a scorer function or a shell command."""
    if isinstance(evaluate, str):
        return render("api/command_scorer.py.j2", command=evaluate, solution=_SOLUTION)
    if not callable(evaluate):
        raise AutoloopError("evaluate must be a function taking the candidate file's path, or a shell command")
    try:
        source = textwrap.dedent(inspect.getsource(evaluate))
    except (OSError, TypeError):
        raise AutoloopError(f"the source of evaluate ({evaluate!r}) cannot be read: define it with `def` in a file "
                            "or a notebook cell, or give a shell command") from None
    if evaluate.__name__ == "<lambda>":
        raise AutoloopError("evaluate is a lambda: define it with `def` (its source is copied into the evaluator)")
    found = inspect.getclosurevars(evaluate)
    if found.nonlocals:
        raise AutoloopError(f"evaluate uses {', '.join(sorted(found.nonlocals))} from an enclosing function: define "
                            "them inside evaluate (its source is copied into the program's evaluator)")
    imports, foreign = [], []
    for label, value in sorted(found.globals.items()):
        if isinstance(value, types.ModuleType):
            imports.append(f"import {value.__name__} as {label}" if value.__name__ != label else f"import {label}")
        else:
            foreign.append(label)
    if foreign:
        raise AutoloopError(f"evaluate uses the global names {', '.join(foreign)}: define them inside evaluate "
                            "(its source is copied into the program's evaluator; imported modules are fine)")
    return render("api/function_scorer.py.j2", imports=imports, source=source, function=evaluate.__name__,
                  solution=_SOLUTION)


def _metric_name(initial_code: str, evaluate: Evaluate | str) -> str:
    """Returns the only key the scorer reports for the initial code, else `combined_score`."""
    if not callable(evaluate):
        return "combined_score"
    with tempfile.TemporaryDirectory(prefix="autoloop-evolve-") as folder:
        path = Path(folder) / _SOLUTION
        path.write_text(initial_code, encoding="utf-8")
        metrics = evaluate(str(path))  # the caller's own code, scored as it gave it
    if not isinstance(metrics, Mapping) or not metrics:
        raise AutoloopError(f"evaluate must return a dict of metrics, got {metrics!r} for the initial code")
    return next(iter(metrics)) if len(metrics) == 1 else "combined_score"


def _scratch_repository(base: Path) -> Path:
    """Returns a new clone (under base) of a new bare origin holding one commit."""
    base.mkdir(parents=True, exist_ok=True)
    origin, root = base / "origin.git", base / "repo"
    if origin.exists() or root.exists():
        raise AutoloopError("holds a scratch repository already; give evolve a new workdir", path=base)
    git.Repo.init(origin, bare=True, initial_branch="main")
    with git.Repo.clone_from(origin, root).config_writer() as config:
        config.set_value("user", "name", "autoloop evolve")
        config.set_value("user", "email", "evolve@autoloop.invalid")
    return root


def _write_program(root: Path, name: str, code: str, scorer: str, goal: str, metric: str, direction: str,
                   strategy: str | None, models: Sequence[str] | None, model: str | None,
                   files: Mapping[str, str | os.PathLike[str]]) -> None:
    """Writes the program (program.md, code/solution.py, code/evaluate.py, the files), commits and pushes it."""
    folder = root / PROGRAMS_DIR / name
    (folder / "code").mkdir(parents=True)
    for file_name, source in files.items():
        if Path(file_name).name != file_name or file_name in (_SOLUTION, "evaluate.py"):
            raise AutoloopError(
                f"files: {file_name!r} must be a plain file name other than {_SOLUTION} and evaluate.py"
            )
        shutil.copyfile(source, folder / "code" / file_name)
    (folder / "code" / _SOLUTION).write_text(code, encoding="utf-8")
    (folder / "code" / "evaluate.py").write_text(scorer, encoding="utf-8")
    frontmatter = {"metric_direction": direction, "schedule": "every 1m"}
    if models:
        frontmatter["models"] = list(models)
    elif model:
        frontmatter["model"] = model
    text = render("api/program.md.j2", name=name, goal=goal, metric=metric, direction=direction,
                  frontmatter=yaml.safe_dump(frontmatter, sort_keys=False).strip(), solution=_SOLUTION)
    (folder / "program.md").write_text(text, encoding="utf-8")
    if strategy:
        args = _parse(["strategy", "--repo", str(root), "add", strategy, "--program", name])
        args.handler(args, Console(stderr=True, quiet=True))  # its AutoloopError propagates
    repo = open_repo(root)
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", f"autoloop evolve: the {name} program")
    run_git(repo, "push", "-q", "origin", "HEAD:main")
