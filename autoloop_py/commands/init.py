"""`autoloop init`: install the workflows, the strategy templates and a sample program into a repository."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import tempfile
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from autoloop_py.commands.ci_install import (
    DEFAULT_PIP_SPEC,
    WHEELS_DIR,
    InstallSource,
    check_spec,
    running_source,
    wheel_path,
)
from autoloop_py.commands.common import repo_root, subparser
from autoloop_py.commands.init_agent import (
    AgentSetup,
    add_agent_arguments,
    agent_context,
    agent_setup_from,
    agent_words,
)
from autoloop_py.commands.init_install import place_wheel, upgrade, wheel_from
from autoloop_py.commands.new import (
    PACKAGE_STRATEGIES,
    STRATEGIES_DIR,
    TARGET,
    fill_markers,
    finish_program_md,
    markdown_files,
    scaffold,
    template_folders,
)
from autoloop_py.errors import AutoloopError
from autoloop_py.loop.tick.schedule import parse_schedule
from autoloop_py.program.model import PROGRAMS_DIR
from autoloop_py.render import render
from autoloop_py.state import save_limits
from autoloop_py.strategies.slots import MAX_SLOTS

WORKFLOWS_DIR = Path(".github/workflows")
ACTIONS_WORKFLOW = WORKFLOWS_DIR / "autoloop.yml"
AGENTIC_WORKFLOW = WORKFLOWS_DIR / "autoloop.md"
SAMPLE_PROGRAM = "example"
# gh-aw clones `memory/autoloop` for repo-memory id `default` into /tmp/gh-aw/repo-memory/<id> and, after
# the agent job, commits and pushes that folder alone (github/gh-aw pkg/workflow/repo_memory.go).
AGENTIC_MEMORY_ID = "default"
AGENTIC_MEMORY_DIR = f"/tmp/gh-aw/repo-memory/{AGENTIC_MEMORY_ID}"
# The workflow's own early clone for the scheduler (its default folder, as upstream's); never saved.
AGENTIC_SCHEDULE_MEMORY_DIR = "/tmp/gh-aw/repo-memory/autoloop"
# Every title the agent's safe outputs create or may touch: `[Autoloop: <program>]…`.
AGENTIC_TITLE_PREFIX = "[Autoloop: "
PROPOSERS = ("llm", "agent", "tune")
DEFAULT_EVERY = "6h"
# GitHub's scheduler is busiest (and drops runs) at the top of the hour.
CRON_MINUTE = 17
CRON_HOUR = 3
# Divisors of an hour and of a day: cron steps that keep every gap the same length.
MINUTE_STEPS = (5, 6, 10, 12, 15, 20, 30)
HOUR_STEPS = (1, 2, 3, 4, 6, 8, 12)
# GitHub-hosted runners stop any job after six hours.
MAX_TIMEOUT_MINUTES = 360
# A litellm model name or a runner label: one word, no shell or YAML syntax.
_WORD_RE = re.compile(r"^[\w.:/@+-]+$")


@dataclass(frozen=True)
class InitOptions:
    """What `autoloop init` writes into the workflows.

    Attributes:
      interval: how often the plain workflow wakes up (a step cron repeats evenly).
      max_parallel: how many programs iterate at once (`strategy.max-parallel`).
      max_programs: at most this many due programs per wake-up (None: all of them).
      pip_spec: the one requirement the jobs install autoloop from.
      proposer: llm, agent or tune, passed to `autoloop run --proposer`.
      model: the litellm model used when the AUTOLOOP_MODEL variable is unset (None: none).
      timeout_minutes: the iterate job's time limit, also told to the run.
      slots: the slots of a program's tick (`--parallel`); above 1 the matrix lists (program, slot) pairs and
        one publish job per program records the tick.
      agent: the agent's command, install step and credentials (--proposer agent).
      runs_on: the runner labels of a propose job whose program sets no `runs-on:` (`--runs-on`); (): ubuntu-latest.
    """

    interval: timedelta = field(default_factory=lambda: timedelta(hours=6))
    max_parallel: int = 4
    max_programs: int | None = None
    pip_spec: str = DEFAULT_PIP_SPEC
    proposer: str = "tune"
    model: str | None = None
    timeout_minutes: int = 45
    slots: int = 1
    agent: AgentSetup = field(default_factory=AgentSetup)
    runs_on: tuple[str, ...] = ()


def add_parser(commands: Any) -> None:
    """Registers `autoloop init`."""
    parser = subparser(commands, "init", "autoloop init --every 6h --max-parallel 4 --model gpt-4o-mini")
    parser.add_argument("--every", default=DEFAULT_EVERY, help="how often the workflow wakes up (default 6h)")
    parser.add_argument("--max-parallel", type=int, default=4, metavar="N", help="programs iterating at once")
    parser.add_argument("--max-programs", type=int, metavar="N", help="at most N due programs per wake-up")
    parser.add_argument(
        "--parallel", type=int, default=1, metavar="K",
        help="slots per program and tick: the matrix runs K proposing jobs per program (a program's own "
        "`parallel:` wins), and one publish job records the tick (default 1; --max-parallel caps all jobs)",
    )
    parser.add_argument(
        "--pip-spec",
        default=None,
        help="what CI installs (default: where this autoloop came from, as pip recorded it: "
        f"{DEFAULT_PIP_SPEC} from an index, git+URL@commit from a repository; from a local folder, "
        "a wheel of it written to .autoloop/wheels/)",
    )
    parser.add_argument("--proposer", choices=PROPOSERS, help="default: llm with --model, else tune")
    parser.add_argument("--model", help="litellm model when the AUTOLOOP_MODEL repository variable is unset")
    parser.add_argument(
        "--runs-on", metavar="LABELS",
        help="comma-separated runner labels of the propose jobs of programs without their own `runs-on:` "
        "(e.g. self-hosted,gpu; default ubuntu-latest); plan and publish stay on GitHub-hosted runners",
    )
    parser.add_argument("--timeout-minutes", type=int, default=45, metavar="N", help="job time limit (default 45)")
    add_agent_arguments(parser)
    parser.add_argument("--force", action="store_true", help="overwrite files that exist already")
    parser.add_argument(
        "--upgrade", action="store_true",
        help="only switch the existing workflows to the installed autoloop (a new wheel replaces the old "
        "one) or to --pip-spec; every other file and setting stays as it is",
    )
    parser.set_defaults(handler=cmd_init)


def cmd_init(args: argparse.Namespace, console: Console) -> int:
    """Writes the files (refusing to overwrite without --force) and prints the next steps."""
    root = repo_root(args.repo)
    source = running_source() if args.pip_spec is None else None
    if args.upgrade:
        return upgrade(root, (ACTIONS_WORKFLOW, AGENTIC_WORKFLOW), args.pip_spec, source, console)
    options = options_from(args, source)
    files = install_files(options)
    build = source.build_from is not None if source else False
    planned = [*files, Path(options.pip_spec)] if build else list(files)
    existing = [rel for rel in planned if (root / rel).exists()]
    if existing and not args.force:
        listed = "".join(f"\n  {rel}" for rel in existing)
        raise AutoloopError(f"nothing written; these files exist already (pass --force to overwrite them):{listed}")
    if options.interval != parse_schedule(args.every):
        every = interval_words(options.interval)
        console.print(f"note: the workflow wakes up every {every}, the closest even cron step")
    with tempfile.TemporaryDirectory(prefix="autoloop-init-") as scratch:
        built = wheel_from(source, Path(scratch), console) if source and build else None
        if built is not None:
            # The wheel is named after the version the source holds now, which pip may have changed since.
            options = replace(options, pip_spec=(WHEELS_DIR / built.name).as_posix())
            files = install_files(options)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
            console.print(f"{'overwrote' if rel in existing else 'wrote'} {rel}", markup=False, highlight=False)
        if built is not None:
            place_wheel(root, built, console)
    console.out(next_steps(options), highlight=False, end="")
    return 0


def options_from(args: argparse.Namespace, source: InstallSource | None = None) -> InitOptions:
    """Returns the checked options of `autoloop init`; raises AutoloopError naming the bad flag.

    Without --pip-spec the spec is where source (default: the running autoloop) came from, or the
    repository path of its wheel when a wheel is to be built.
    """
    if args.max_parallel < 1 or (args.max_programs is not None and args.max_programs < 1):
        raise AutoloopError("--max-parallel and --max-programs must be at least 1")
    if not 1 <= args.parallel <= MAX_SLOTS:
        raise AutoloopError(f"--parallel must be 1–{MAX_SLOTS} slots per program")
    if not 1 <= args.timeout_minutes <= MAX_TIMEOUT_MINUTES:
        raise AutoloopError(f"--timeout-minutes must be 1–{MAX_TIMEOUT_MINUTES} (GitHub stops jobs after 6 hours)")
    pip_spec = args.pip_spec
    if pip_spec is None:
        source = source or running_source()
        pip_spec = source.spec or wheel_path(source.version).as_posix()
    check_spec(pip_spec)
    if args.model is not None and not _WORD_RE.match(args.model):
        raise AutoloopError(f"--model {args.model!r} is not a litellm model name such as openai/gpt-4o-mini")
    proposer = args.proposer or ("llm" if args.model else "tune")
    return InitOptions(
        interval=wake_interval(args.every),
        max_parallel=args.max_parallel,
        max_programs=args.max_programs,
        pip_spec=pip_spec,
        proposer=proposer,
        model=args.model,
        timeout_minutes=args.timeout_minutes,
        slots=args.parallel,
        agent=agent_setup_from(args, proposer),
        runs_on=runs_on_labels(args.runs_on),
    )


def runs_on_labels(text: str | None) -> tuple[str, ...]:
    """Returns the labels of `--runs-on a,b` (() when unset); raises AutoloopError for an empty or odd label."""
    if text is None:
        return ()
    labels = tuple(label.strip() for label in text.split(","))
    if not all(_WORD_RE.match(label) for label in labels):
        raise AutoloopError(f"--runs-on {text!r}: give runner labels separated by commas, e.g. self-hosted,gpu")
    return labels


def wake_interval(every: str) -> timedelta:
    """Returns the workflow's wake-up interval: `every` rounded down to a cron step that repeats evenly."""
    try:
        interval = parse_schedule(every)
    except ValueError as err:
        raise AutoloopError(f"--every: {err}") from None
    if interval is None:
        raise AutoloopError("--every needs an interval such as 30m, 6h or 1d")
    minutes = int(interval.total_seconds() // 60)
    if minutes < MINUTE_STEPS[0]:
        raise AutoloopError(f"--every {every!r} is under 5 minutes, GitHub's shortest schedule; use 5m or more")
    if minutes < 60:
        return timedelta(minutes=max(step for step in MINUTE_STEPS if step <= minutes))
    if minutes < 24 * 60:
        return timedelta(hours=max(step for step in HOUR_STEPS if step <= minutes // 60))
    return timedelta(days=min(minutes // (24 * 60), 7))


def cron_schedule(interval: timedelta) -> str:
    """Returns the cron line of a wake-up interval, a few minutes past the hour."""
    minutes = int(interval.total_seconds() // 60)
    if minutes < 60:
        return f"{CRON_MINUTE % minutes}-59/{minutes} * * * *"
    if minutes < 24 * 60:
        hours = minutes // 60
        return f"{CRON_MINUTE} {'*' if hours == 1 else f'*/{hours}'} * * *"
    days = minutes // (24 * 60)
    if days >= 7:
        return f"{CRON_MINUTE} {CRON_HOUR} * * 1"
    return f"{CRON_MINUTE} {CRON_HOUR} {'*' if days == 1 else f'*/{days}'} * *"


def agentic_schedule(interval: timedelta) -> str:
    """Returns the interval as a GitHub Agentic Workflows schedule phrase (`every 6h`, `daily`...)."""
    minutes = int(interval.total_seconds() // 60)
    if minutes < 60:
        return f"every {minutes} minutes"
    if minutes < 24 * 60:
        return "hourly" if minutes == 60 else f"every {minutes // 60}h"
    days = minutes // (24 * 60)
    return {1: "daily", 7: "weekly"}.get(days, f"every {days} days")


def interval_words(interval: timedelta) -> str:
    """Returns the interval as `--every` takes it: 15m, 6h or 2d."""
    minutes = int(interval.total_seconds() // 60)
    if minutes % (24 * 60) == 0:
        return f"{minutes // (24 * 60)}d"
    return f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


def init_command(options: InitOptions) -> str:
    """Returns the `autoloop init` command line that writes these options again."""
    words = ["autoloop", "init", "--every", interval_words(options.interval)]
    words += ["--max-parallel", str(options.max_parallel)]
    if options.slots > 1:
        words += ["--parallel", str(options.slots)]
    if options.max_programs is not None:
        words += ["--max-programs", str(options.max_programs)]
    words += ["--pip-spec", options.pip_spec, "--proposer", options.proposer]
    if options.model:
        words += ["--model", options.model]
    words += ["--timeout-minutes", str(options.timeout_minutes)]
    if options.runs_on:
        words += ["--runs-on", ",".join(options.runs_on)]
    words += agent_words(options.agent)
    return " ".join(shlex.quote(word) for word in words)


def render_workflows(options: InitOptions) -> dict[Path, str]:
    """Returns the plain Actions workflow and the agentic variant, by repository path."""
    actions = render(
        "workflows/autoloop.yml.j2",
        command=init_command(options),
        cron=cron_schedule(options.interval),
        every=interval_words(options.interval),
        pip_spec=json.dumps(options.pip_spec),
        max_programs=options.max_programs,
        max_parallel=options.max_parallel,
        timeout_minutes=options.timeout_minutes,
        proposer=options.proposer,
        model=options.model,
        slots=options.slots,
        runs_on=",".join(options.runs_on),
        **agent_context(options.agent),
    )
    agentic = render(
        "workflows/autoloop.md.j2",
        schedule=agentic_schedule(options.interval),
        timeout_minutes=options.timeout_minutes,
        pip_spec=shlex.quote(options.pip_spec),
        memory_id=AGENTIC_MEMORY_ID,
        memory_dir=AGENTIC_MEMORY_DIR,
        schedule_memory_dir=AGENTIC_SCHEDULE_MEMORY_DIR,
        title_prefix=AGENTIC_TITLE_PREFIX,
        limits=save_limits,
    )
    return {ACTIONS_WORKFLOW: actions, AGENTIC_WORKFLOW: agentic}


def bundled_strategies() -> dict[Path, str]:
    """Returns autoloop's own strategy playbooks (markdown), verbatim, under `.autoloop/strategies/<name>/`.

    Other files there (EvoX's initial strategy) are the runner's, read from the package.
    """
    folders = template_folders(PACKAGE_STRATEGIES)
    return {
        STRATEGIES_DIR / folder.name / rel: text for folder in folders for rel, text in markdown_files(folder).items()
    }


def sample_program() -> dict[Path, str]:
    """Returns the sample program's files: `autoloop new`'s scaffold with its goal written."""
    goal = render("scaffold/example_goal.md.j2", target=TARGET).strip()
    files = scaffold(SAMPLE_PROGRAM, None)
    files = fill_markers(files, {"goal": goal}, Path("(autoloop init sample goal)"), strict=True)
    files = finish_program_md(files)
    return {PROGRAMS_DIR / SAMPLE_PROGRAM / rel: text for rel, text in files.items()}


def install_files(options: InitOptions) -> dict[Path, str]:
    """Returns every file `autoloop init` writes, by repository-relative path."""
    return {**render_workflows(options), **bundled_strategies(), **sample_program()}


def next_steps(options: InitOptions) -> str:
    """Returns the advice printed after the files are written."""
    return render(
        "workflows/next_steps.txt.j2",
        sample=SAMPLE_PROGRAM,
        proposer=options.proposer,
        model=options.model,
        cron=cron_schedule(options.interval),
        agentic=AGENTIC_WORKFLOW.as_posix(),
        wheel=options.pip_spec if Path(options.pip_spec).parent == WHEELS_DIR else None,
        agent=options.agent,
    )
