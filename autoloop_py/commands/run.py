"""`autoloop run`: run iterations of the most overdue (or a named) program."""

from __future__ import annotations

import argparse
import functools
import os
import time
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from autoloop_py.analysis import tracking
from autoloop_py.commands.common import (
    format_metric, load_all, machines, readable_states, repo_root, schedule_rank, shown, subparser,
)
from autoloop_py.errors import AutoloopError
from autoloop_py.git.objects import GitSession
from autoloop_py.loop.checkout.workspace import Worktrees
from autoloop_py.loop.iteration.iteration import IterationOutcome, run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.record.outcome import OUTCOME_FILE, idle_outcome, write_outcome
from autoloop_py.loop.tick import schedule
from autoloop_py.program.model import Program, find_program, program_name
from autoloop_py.proposers import get_proposer, llm
from autoloop_py.proposers.model_worker import ModelWorker, start_worker
from autoloop_py.sandbox.runner import make_non_dumpable, sigterm_interrupts
from autoloop_py.state.parts import STATUS_ICONS, utc
from autoloop_py.state.untrusted_text import plain
from autoloop_py.strategies.slots import MAX_SLOTS, Slot, parse_slot

if TYPE_CHECKING:
    from autoloop_py.github.client import GitHubSettings

# github/ and the parallel slots are imported where they are used: a run that needs none of them (the
# common case) sends its first model request sooner without them (issue 43).

# How long a run on this machine trusts its last listing of the remote's branches (its own pushes keep it up to
# date): a commit pushed to the base branch meanwhile is built on from the first iteration after that.
LISTING_SECONDS = 10.0


def add_parser(commands: Any) -> None:
    """Registers `autoloop run`."""
    parser = subparser(commands, "run", "autoloop run --program function_minimization --iterations 10 --proposer tune")
    parser.add_argument("--program", help="run this program (default: the most overdue; env AUTOLOOP_PROGRAM)")
    parser.add_argument("--iterations", type=int, default=1, metavar="N",
                        help="how many iterations (default 1; ticks, with --parallel K --barrier)")
    parser.add_argument(
        "--proposer",
        choices=("tune", "llm", "agent"),
        help="tune: offline numeric search (default); llm: litellm model; agent: external coding agent",
    )
    parser.add_argument("--model", help="litellm model for --proposer llm (else `model:` or AUTOLOOP_MODEL)")
    parser.add_argument("--agent-command", help="command for --proposer agent (else AUTOLOOP_AGENT_COMMAND)")
    parser.add_argument("--llm-timeout", type=_positive, metavar="SECONDS",
                        help="seconds one model request may take (else `llm-timeout:`, default 120)")
    parser.add_argument("--llm-retries", type=_whole, metavar="N",
                        help="further requests after a timed-out or failed one (else `llm-retries:`, default 2)")
    parser.add_argument("--dry-run", action="store_true", help="propose and evaluate, but record nothing")
    parser.add_argument(
        "--isolation",
        choices=("auto", "bwrap", "none"),
        help="confine evaluations and agents: bwrap (bubblewrap sandbox), none (limits only), auto (bwrap when it "
        "works; default: AUTOLOOP_ISOLATION, else the program's `isolation:`)",
    )
    parser.add_argument(
        "--agent-network",
        choices=("host", "outside-only"),
        help="what an outside agent's network reaches: host (this machine's network, its loopback services "
        "included) or outside-only (its own namespace through slirp4netns, no host loopback; needs bubblewrap); "
        "default: AUTOLOOP_AGENT_NETWORK, else the program's `agent-network:`, else host",
    )
    parser.add_argument(
        "--force", action="store_true",
        help="run the --program even when it is paused; the pause stays (`autoloop resume` clears it)",
    )
    parser.add_argument("--base-branch", help="branch program branches start from (default: origin's HEAD branch, "
                        "else main, else master, else the current one)")
    parser.add_argument(
        "--ci",
        action="store_true",
        help="run as a GitHub Actions job: CI-gated acceptance, program issue, status comment, draft PR "
        "(needs GITHUB_REPOSITORY and GITHUB_TOKEN)",
    )
    parser.add_argument(
        "--outcome-dir",
        type=Path,
        metavar="DIR",
        help="propose and evaluate one iteration, write nothing to git remotes or GitHub, and leave the decided "
        "iteration in DIR for `autoloop publish DIR` (the read-only job of the generated workflow)",
    )
    parser.add_argument(
        "--parallel",
        type=_slots,
        metavar="K",
        help="keep K iterations of the program in flight (K processes here): each is recorded as soon as it ends and "
        "the next starts at once (default: the program's `parallel:`, else 1); --iterations N counts iterations",
    )
    parser.add_argument(
        "--barrier", action="store_true",
        help="with --parallel K: run ticks of K slots that all end before one publish records them, as the "
        "generated workflow does (--iterations N: N ticks)",
    )
    parser.add_argument(
        "--slot",
        type=_slot,
        metavar="I/K",
        help="with --outcome-dir: propose slot I (from 0) of a tick of K, as the generated workflow's matrix does "
        "(iteration next+I, the slot's island and seed); `autoloop publish DIR_0 … DIR_K-1` records the tick",
    )
    parser.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    """Runs the requested iterations and prints a summary; exit 1 if nothing could run."""
    outcomes = execute(args, console)
    _summary(outcomes, console)
    if outcomes and not (args.ci or args.outcome_dir or args.dry_run):
        name = outcomes[-1].program
        console.print(f"next: `autoloop status {name}` (its history), `autoloop edit {name}` (steer it), `autoloop "
                      f"report {name}` (an HTML page); kept changes are on branch autoloop/{name}", highlight=False)
    # In CI, waiting for checks or a CI pause is a normal end of the job, not a failure.
    return 0 if outcomes or args.ci else 1


def execute(args: argparse.Namespace, console: Console,
            on_outcome: Callable[[IterationOutcome], None] | None = None) -> list[IterationOutcome]:
    """Runs the iterations `args` asks for (the parsed `autoloop run` options); returns what each did.

    on_outcome: called with each iteration's outcome as soon as it is recorded (the Python API's on_iteration).
    """
    started, wall = time.monotonic(), time.time()
    if args.iterations < 1:
        raise AutoloopError("--iterations must be at least 1")
    # Other processes of this user (an evaluation run without bwrap) must not read our environment.
    make_non_dumpable()
    if args.outcome_dir is not None and (args.iterations != 1 or args.dry_run):
        raise AutoloopError("--outcome-dir holds one iteration: drop --iterations and --dry-run")
    _check_slots(args)
    if args.proposer == "llm":
        llm.require_litellm()
    with ExitStack() as stack:  # the model worker stops with the run, however it ends
        return _run(args, console, started, wall, stack, on_outcome)


def _run(args: argparse.Namespace, console: Console, started: float, wall: float, stack: ExitStack,
         on_outcome: Callable[[IterationOutcome], None] | None) -> list[IterationOutcome]:
    # litellm's import, in the model worker process, overlaps loading, syncing and the baseline evaluation.
    worker = getattr(args, "model_worker", None) or _worker(stack, args.proposer == "llm")
    root = repo_root(args.repo)
    programs, problems = load_all(root, with_issues=args.ci)
    if worker is None and args.proposer is None:
        worker = _worker(stack, any(p.config.proposer == "llm" for p in programs))  # a program's `proposer: llm`
    forced = args.program or os.environ.get("AUTOLOOP_PROGRAM", "").strip() or None
    if args.force and not forced:
        raise AutoloopError("--force needs --program NAME: it runs that one program even when it is paused")
    for problem in problems:
        if forced and problem.path is not None and program_name(problem.path) == forced:
            raise problem
        console.print(f"[yellow]skipping a broken program:[/] {problem}")
    options = RunOptions(
        proposer=args.proposer,
        model=args.model,
        agent_command=args.agent_command,
        dry_run=args.dry_run,
        run_url=run_url(),
        base_branch=args.base_branch,
        isolation=args.isolation,
        agent_network=args.agent_network,
        llm_timeout=args.llm_timeout,
        llm_retries=args.llm_retries,
        job_deadline=job_end(os.environ, started, wall),
        outcome_dir=args.outcome_dir.resolve() if args.outcome_dir is not None else None,
        slot=args.slot,
        proposer_factory=functools.partial(get_proposer, models=worker),
    )
    settings = github_settings() if args.ci else None
    # One git session for the whole run: its object reads go through one `cat-file --batch`. A run on this machine
    # is the writer of its own records: their pushes overlap the next iteration (an Actions job's writes are
    # `publish`'s, and --ci records as it goes).
    owns = settings is None and options.writes
    session = stack.enter_context(GitSession(root, owns_pushes=owns, listing_seconds=LISTING_SECONDS if owns else 0))
    if not args.dry_run:
        running = [program for program in programs if forced in (None, program.name)]
        # The trackers read through the run's session, so they see a record still waiting for its commit.
        on_outcome = _tracked(stack, tracking.live_trackers(root, running, os.environ, session), on_outcome)
    worktrees = stack.enter_context(Worktrees(root))  # one worktree per program, checked out anew by each iteration
    with sigterm_interrupts():
        outcomes = _loop(root, programs, forced, args.iterations, options, console, session, worktrees, settings,
                         args.force, args.parallel, args.barrier, on_outcome)
    if worker is not None:  # no call follows (one would start it again): it ends while the worktrees are removed
        worker.kill()  # and the last push lands; its owner's close() waits for it
    if options.outcome_dir is not None and forced and not (options.outcome_dir / OUTCOME_FILE).exists():
        # The publishing job expects an outcome for every program it was planned for.
        why = outcomes[-1].reason if outcomes and outcomes[-1].status == "paused" else "the program was not due"
        write_outcome(options.outcome_dir, idle_outcome(forced, f"no iteration ran: {why}"))
    return outcomes


def _loop(
    root: Path,
    programs: list[Program],
    forced: str | None,
    count: int,
    options: RunOptions,
    console: Console,
    session: GitSession,
    worktrees: Worktrees,
    settings: GitHubSettings | None = None,
    force: bool = False,
    parallel: int | None = None,
    barrier: bool = False,
    on_outcome: Callable[[IterationOutcome], None] | None = None,
) -> list[IterationOutcome]:
    outcomes: list[IterationOutcome] = []

    def told(outcome: IterationOutcome) -> None:
        print_outcome(outcome, console)
        if on_outcome is not None:
            on_outcome(outcome)

    held: list[str | None] = []  # why the forced program would be skipped when the run started
    warned: set[str] = set()
    # No iteration starts in the job's last 5 minutes.
    deadline = None if options.job_deadline is None else options.job_deadline - 5 * 60
    columns = SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("iterating", total=count)
        for done in range(count):
            if deadline is not None and time.monotonic() > deadline:
                console.print("stopping: the job's time is nearly up")
                break
            program = _pick(root, programs, forced, held, console, force, session, parallel or 1)
            if program is None:
                break
            _warn_once(program, warned, console)
            slots = _slot_count(program, parallel, options, settings)
            if slots > 1 and "llm" in (options.proposer, program.config.proposer) and not _has_worker(options):
                from autoloop_py.proposers.model_calls import import_litellm

                import_litellm()  # then the slots' processes fork with it imported, instead of each importing it
            if slots > 1 and not barrier:
                from autoloop_py.loop.slots.async_slots import run_slots

                progress.update(task, description=f"{program.name} · {slots} in flight")

                def recorded(outcome: IterationOutcome) -> None:
                    told(outcome)
                    progress.advance(task)

                outcomes.extend(run_slots(root, program, count - len(outcomes), slots, options, recorded,
                                          lambda text: console.print(escape(text)), deadline))
                break
            if slots > 1:
                from autoloop_py.loop.slots.barrier import run_tick

                progress.update(task, description=f"{program.name} · tick of {slots}")
                tick = run_tick(root, program, slots, options)
                outcomes.extend(tick)
                for outcome in tick:
                    told(outcome)
                progress.advance(task)
                continue
            progress.update(task, description=f"{program.name} · iteration")
            # Each record but the last is committed while the next iteration's model request is in flight.
            outcome = _one(root, program, options, settings, console, session, worktrees, done < count - 1)
            if outcome is None:
                break
            outcomes.append(outcome)
            told(outcome)
            progress.advance(task)
    return outcomes


def github_settings() -> GitHubSettings:
    """Returns the GitHub settings of a --ci run or publish, from the environment."""
    from autoloop_py.github import client as github

    settings = github.from_environment(os.environ)
    if settings is None:
        raise AutoloopError("--ci needs GITHUB_REPOSITORY and GITHUB_TOKEN in the environment")
    return settings


def _tracked(stack: ExitStack, trackers: dict[str, tracking.LiveTracker],
             on_outcome: Callable[[IterationOutcome], None] | None) -> Callable[[IterationOutcome], None] | None:
    """Returns on_outcome, first sending the recorded candidates of each program a tracker follows."""
    if not trackers:
        return on_outcome
    for tracker in trackers.values():
        stack.callback(tracker.close)

    def told(outcome: IterationOutcome) -> None:
        if outcome.program in trackers:
            trackers[outcome.program].update()
        if on_outcome is not None:
            on_outcome(outcome)

    return told


def _has_worker(options: RunOptions) -> bool:
    """Returns whether the run's model calls go to its model worker (which the slots' processes share)."""
    factory = options.proposer_factory
    return isinstance(factory, functools.partial) and isinstance(factory.keywords.get("models"), ModelWorker)


def _worker(stack: ExitStack, wanted: bool) -> ModelWorker | None:
    """Returns the run's model worker, started when wanted (None: calls, if any, are made in this process)."""
    worker = start_worker(wanted)
    if worker is not None:
        stack.callback(worker.close)
    return worker


def _warn_once(program: Program, warned: set[str], console: Console) -> None:
    """Says once per run what `check` warns about (unknown keys, lenient values) and an unreadable direction."""
    if program.name in warned:
        return
    warned.add(program.name)
    notes = list(program.warnings)
    if program.direction_problem is not None:  # `check` refuses it; upstream assumes higher
        notes.append(f"{program.direction_problem}; running with {program.direction} is better, as upstream "
                     "autoloop does")
    for note in notes:
        console.print(f"[yellow]warning:[/] {escape(note)}", highlight=False)


def _check_slots(args: argparse.Namespace) -> None:
    """Refuses --parallel and --slot where they cannot work, saying what to drop."""
    if args.parallel is not None and args.parallel > 1:
        clash = [flag for flag, on in (("--dry-run", args.dry_run), ("--outcome-dir", args.outcome_dir is not None),
                                       ("--ci", args.ci), ("--slot", args.slot is not None)) if on]
        if clash:
            raise AutoloopError(
                f"--parallel runs and records its slots on this machine; it cannot go with {', '.join(clash)} "
                "(in Actions each slot is `run --slot I/K --outcome-dir DIR`, and `publish` records the tick)"
            )
    if args.slot is not None and args.outcome_dir is None:
        raise AutoloopError(f"--slot {args.slot} proposes one slot of a tick: give --outcome-dir DIR for its outcome "
                            "and record the tick with `autoloop publish DIR_0 … DIR_K-1`")
    if args.slot is not None and not args.program and not os.environ.get("AUTOLOOP_PROGRAM", "").strip():
        raise AutoloopError(f"--slot {args.slot} needs --program NAME: the slots of a tick run one program")


def _slot_count(
    program: Program, parallel: int | None, options: RunOptions, settings: GitHubSettings | None
) -> int:
    """Returns the slots of this program's tick: --parallel, else its `parallel:` where a tick can run here."""
    if parallel is not None:
        return parallel
    if not options.writes or options.slot is not None or settings is not None:
        return 1  # a dry run, an outcome or a CI job proposes one iteration at a time
    return program.config.parallel or 1


def _slot(text: str) -> Slot:
    try:
        return parse_slot(text)
    except AutoloopError as err:
        raise argparse.ArgumentTypeError(err.message) from None


def _slots(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_SLOTS:
        raise argparse.ArgumentTypeError(f"must be a whole number of slots from 1 to {MAX_SLOTS}, got {text!r}")
    return int(text)


def _one(
    root: Path, program: Program, options: RunOptions, settings: GitHubSettings | None, console: Console,
    session: GitSession | None = None, worktrees: Worktrees | None = None, pipelined: bool = False,
) -> IterationOutcome | None:
    """Runs one iteration, through the GitHub flow when settings are given."""
    if settings is None:
        return run_iteration(root, program, options, datetime.now(timezone.utc), session, worktrees, pipelined)
    from autoloop_py.github import ci

    result = ci.run_ci(root, program, options, settings)
    if result.message:
        console.print(f"CI: {shown(result.message)}")
    return result.accounts[0] if result.accounts else None


def job_end(environ: Mapping[str, str], started: float, wall_now: float) -> float | None:
    """Returns the time.monotonic() at which the job is stopped, None without AUTOLOOP_JOB_TIMEOUT_MINUTES.

    The job started at AUTOLOOP_JOB_STARTED_AT (unix seconds or ISO 8601; the workflow sets it in its
    first step), else when this command started (`started`, a time.monotonic() value).
    """
    minutes = environ.get("AUTOLOOP_JOB_TIMEOUT_MINUTES", "").strip()
    if not minutes:
        return None
    try:
        limit = float(minutes) * 60
    except ValueError:
        raise AutoloopError(f"AUTOLOOP_JOB_TIMEOUT_MINUTES must be a number of minutes, got {minutes!r}") from None
    stamp = environ.get("AUTOLOOP_JOB_STARTED_AT", "").strip()
    if not stamp:
        return started + limit
    try:
        unix = float(stamp)
    except ValueError:
        try:
            unix = utc(datetime.fromisoformat(stamp.replace("Z", "+00:00"))).timestamp()  # naive is UTC
        except ValueError:
            raise AutoloopError(
                f"AUTOLOOP_JOB_STARTED_AT must be unix seconds or an ISO 8601 time, got {stamp!r}"
            ) from None
    return started - (wall_now - unix) + limit


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def _whole(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return int(text)


def _pick(
    root: Path, programs: list[Program], forced: str | None, held: list[str | None], console: Console, force: bool,
    session: GitSession | None = None, slots: int = 1,
) -> Program | None:
    """Returns the program to run next, or None when nothing is due (or a forced program stopped).

    held starts empty and keeps the forced program's skip reason at the first pick: a later iteration
    stops when the program became paused or completed during this run (a --force run goes on while the
    pause it started under stands).
    """
    readable = readable_states(root, programs, forced, session)
    states = machines(readable)
    now = datetime.now(timezone.utc)
    runnable = [p for p in programs if p.name in readable]
    reason = schedule.skip_reason(states.get(forced)) if forced else None
    if held and reason and not reason.startswith("plateau") and not (force and reason == held[0]):
        console.print(f"stopping: {forced} is {reason}")
        return None
    refusal = schedule.paused_refusal(forced, states.get(forced), force) if forced else None
    if refusal:
        console.print(f"not running: {refusal}")
        return None
    # A forced unknown or unconfigured name raises here.
    rank = schedule_rank(root, os.environ)[1]
    plan = schedule.plan(runnable, states, now, forced, force=force, default_slots=slots, rank=rank)
    held[:] = held or [reason]
    if plan.selected is None:
        skipped = ", ".join(f"{s.name} ({s.reason})" for s in plan.skipped)
        console.print(f"nothing is due: {skipped}; `autoloop run --program NAME` runs one now" if skipped else
                      "nothing is due: no configured program (`autoloop check` says why; `autoloop new NAME` adds one)")
        return None
    return find_program(programs, plan.selected)


def print_outcome(outcome: IterationOutcome, console: Console) -> None:
    """Prints the one-line account of an iteration."""
    from autoloop_py.loop.slots.barrier_publish import SLOTS_REF

    mark = STATUS_ICONS.get(outcome.status, "·")
    metric = format_metric(outcome.metric)
    best = format_metric(outcome.best_before)
    text = f"{mark} {outcome.program} · iteration {outcome.iteration} · {outcome.status} · metric {metric} "
    text += f"(best was {best}) · {plain(outcome.summary)}"
    if outcome.commit:
        text += f" · commit {outcome.commit[:8]}"
    if outcome.reason and (outcome.status == "error" or SLOTS_REF in outcome.reason or "stale base" in outcome.reason):
        text += f"\n   {plain(outcome.reason)}"  # an error, or an improver that lost to a sibling or a newer best
    console.print(text, markup=False, highlight=False)


def _summary(outcomes: list[IterationOutcome], console: Console) -> None:
    if not outcomes:
        return
    table = Table("program", "iterations", "✅", "❌", "⚠️", "best before", "best now", title="autoloop run")
    for name in dict.fromkeys(o.program for o in outcomes):
        mine = [o for o in outcomes if o.program == name]
        accepted = [o.metric for o in mine if o.status == "accepted"]
        table.add_row(
            name,
            str(len(mine)),
            str(len(accepted)),
            str(sum(o.status == "rejected" for o in mine)),
            str(sum(o.status == "error" for o in mine)),
            format_metric(mine[0].best_before),
            format_metric(accepted[-1] if accepted else mine[-1].best_before),
        )
    console.print(table)


def run_url() -> str | None:
    server, repo, run_id = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run_id:
        return f"{server}/{repo}/actions/runs/{run_id}"
    return None
