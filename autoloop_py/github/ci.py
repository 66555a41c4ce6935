"""An iteration in GitHub Actions: reconcile pending CI, steer from the program issue, publish the result.

Local runs never come here; `autoloop run --ci` (or GITHUB_REPOSITORY and a token in the environment)
does. The order is: settle the candidate waiting for CI, read people's steering comments, run the
iteration, then update the program issue, its status comment, the one draft PR and the Machine
State's PR/Issue rows.

Split in two jobs, `autoloop run --ci --outcome-dir` does the first half with a read-only token (the
CI verdict goes to the local memory branch only, no issue is opened) and `autoloop publish --ci`
settles the CI gate again, publishes the outcome and writes to GitHub.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from autoloop_py.analysis.mermaid import program_charts
from autoloop_py.github import client as github
from autoloop_py.github import render as bodies
from autoloop_py.loop.iteration.iteration import IterationOutcome, enforce_budget, run_iteration
from autoloop_py.loop.iteration.options import RunOptions
from autoloop_py.loop.record import ci_gate
from autoloop_py.loop.record.outcome import Outcome, idle_outcome, write_outcome
from autoloop_py.loop.record.publishing import check_outcome, publish_outcome
from autoloop_py.loop.record.recording import load_state, parse_or_new, state_path
from autoloop_py.loop.slots.barrier import account_of
from autoloop_py.loop.slots.barrier_publish import Published, publish_tick
from autoloop_py.program.model import Program
from autoloop_py.render import render
from autoloop_py.state import file as statefile
from autoloop_py.state.memory import MemoryConfig, MemoryStore
from autoloop_py.state.memory_folder import Memory
from autoloop_py.state.model_stats import summary_rows

log = logging.getLogger(__name__)

# A remote no repository has: a MemoryStore configured with it commits locally and never pushes.
LOCAL_ONLY = "autoloop-local-only"


@dataclass(frozen=True)
class CiOutcome:
    """What a CI job of one program did: one iteration run (`run_ci`), or outcomes published (`publish_ci`).

    Attributes:
      accounts: each iteration run or recorded, in iteration order (none while waiting for CI or after a CI pause).
      message: the CI gate's one line ('' when nothing was pending).
      issue: the program issue's number.
      pr: the draft PR's number, once there is one.
    """

    accounts: list[IterationOutcome]
    message: str
    issue: int | None
    pr: int | None


def run_ci(
    root: Path,
    program: Program,
    options: RunOptions,
    settings: github.GitHubSettings,
    thread: github.ProgramThread | None = None,
    now: datetime | None = None,
) -> CiOutcome:
    """Runs one iteration of program as a GitHub Actions job and publishes it.

    With `options.outcome_dir` it only proposes: it reads GitHub, opens no issue, pushes nothing and
    leaves the outcome (or why none ran) in the directory for `publish_ci`.
    """
    proposing = options.outcome_dir is not None
    memory = MemoryStore(root)
    memory.sync()
    thread = thread or _thread(memory, program, settings)
    if proposing:
        thread.find_issue()
    else:
        thread.ensure_issue(program.goal)
    gate = ci_gate.ci_gate_enabled(program)
    verdicts = MemoryStore(root, MemoryConfig(remote=LOCAL_ONLY)) if proposing else memory
    settled = _settle_pending(verdicts, program, thread, now) if gate else None
    message = settled.message if settled else ""
    outcome = None
    if settled is None or settled.proceeds:
        since = load_state(memory, program).machine.last_run
        directives = tuple(d.text for d in thread.directives(since)) if thread.issue_number else ()
        if settled is not None and settled.fix is not None:
            directives = (render("ci_fix_directive.md.j2", fix=settled.fix).strip(), *directives)
        run_options = dataclasses.replace(options, ci_gate=gate, directives=directives, run_url=settings.run_url)
        outcome = run_iteration(root, program, run_options, now)
    elif options.outcome_dir is not None:
        write_outcome(options.outcome_dir, idle_outcome(program.name, message))
    ran = [outcome] if outcome is not None else []
    if proposing:
        return CiOutcome(ran, message, thread.issue_number, None)
    issue, pr = _publish(memory, program, thread, outcome, settings)
    return CiOutcome(ran, message, issue, pr)


def publish_ci(
    root: Path,
    program: Program,
    outcomes: list[Outcome],
    options: RunOptions,
    settings: github.GitHubSettings,
    *,
    tick: bool = False,
    thread: github.ProgramThread | None = None,
    now: datetime | None = None,
) -> CiOutcome:
    """Publishes what `run_ci` proposed: settles the CI gate, keeps and records the candidate, writes to GitHub.

    tick: the outcomes are the slots of one tick, published as one update (one CI-gate settlement, one comment,
    one PR update); else outcomes holds one. Every outcome is checked before anything is written, to git or GitHub.
    """
    for outcome in outcomes:
        check_outcome(root, program, outcome)
    memory = MemoryStore(root)
    memory.sync()
    thread = thread or _thread(memory, program, settings)
    thread.ensure_issue(program.goal)
    gate = ci_gate.ci_gate_enabled(program)
    settled = _settle_pending(memory, program, thread, now) if gate else None
    accounts, posted = record_outcomes(root, program, outcomes, budget=options.budget, run_url=settings.run_url,
                                       base_branch=options.base_branch, tick=tick, ci_gate=gate, now=now)
    if tick:
        memory.sync()
    issue, pr = _publish(memory, program, thread, posted, settings)
    return CiOutcome(accounts, settled.message if settled else "", issue, pr)


def record_outcomes(
    root: Path, program: Program, outcomes: list[Outcome], *, budget: int, run_url: str | None,
    base_branch: str | None, tick: bool, ci_gate: bool = False, now: datetime | None = None,
) -> tuple[list[IterationOutcome], IterationOutcome | None]:
    """Keeps and records one outcome, or a tick's slots as one update; returns each recorded iteration's account
    and the one account the program issue is told.

    When none was recorded, a budget reached pauses the program: the proposing job stops before a model call when
    a budget is reached, but may not record the pause.
    """
    if tick:
        slots = publish_tick(root, program, outcomes, budget=budget, run_url=run_url, base_branch=base_branch,
                             ci_gate=ci_gate)
        accounts, posted = [account_of(p) for p in slots if p.record is not None], tick_account(slots)
    else:
        record = publish_outcome(root, program, outcomes[0], budget=budget, run_url=run_url, base_branch=base_branch,
                                 ci_gate=ci_gate)
        posted = account_of(Published(outcomes[0], record)) if record is not None else None
        accounts = [posted] if posted is not None else []
    if not accounts:
        enforce_budget(root, program, now)
    return accounts, posted


def tick_account(slots: list[Published]) -> IterationOutcome | None:
    """Returns the one account a tick posts: its kept candidate (else its last slot), noting every slot's record."""
    recorded = [p for p in slots if p.record is not None]
    if not recorded:
        return None
    lead = next((p for p in recorded if p.record is not None and p.record.commit), recorded[-1])
    account = account_of(lead)
    lines = "; ".join(
        f"iteration {p.outcome.iteration} {p.record.status} "
        f"({'—' if p.record.metric is None else f'{p.record.metric:g}'})"
        for p in recorded if p.record is not None
    )
    note = f"tick of {len(recorded)} slots: {lines}"
    return dataclasses.replace(account, reason=f"{account.reason}; {note}" if account.reason else note)


def _thread(memory: MemoryStore, program: Program, settings: github.GitHubSettings) -> github.ProgramThread:
    """Returns the program's GitHub thread, on the issue the program or its state names (if any)."""
    known = program.issue or _number(load_state(memory, program).machine.issue)
    return github.ProgramThread(github.connect(settings), settings.repository, program.name, issue_number=known)


def _settle_pending(
    memory: MemoryStore, program: Program, thread: github.ProgramThread, now: datetime | None
) -> ci_gate.Reconciliation | None:
    """Reads the checks of the candidate waiting for CI and writes the verdict; None when none waits."""
    state = load_state(memory, program)
    pending = ci_gate.read_pending(state)
    if pending is None:
        return None
    return settle(memory, program, thread.checks(pending.commit), now)


def settle(
    memory: Memory, program: Program, result: ci_gate.CheckResult, now: datetime | None = None
) -> ci_gate.Reconciliation:
    """Decides what the checks of the pending candidate mean and writes the verdict to the state file."""
    verdicts: list[ci_gate.Reconciliation] = []
    reconcile = functools.partial(ci_gate.reconcile, result=result, direction=program.direction,
                                  target_metric=program.config.target_metric, now=now or datetime.now(timezone.utc),
                                  program=program)

    def change(text: str | None) -> str:
        verdicts.append(reconcile(parse_or_new(text, program, state_path(program))))
        return statefile.render_state(verdicts[-1].state)

    first = reconcile(load_state(memory, program))
    if not first.changed:
        log.info("%s: %s", program.name, first.message)
        return first
    memory.update(state_path(program), change, f"[Autoloop: {program.name}] CI {first.action}: {first.message}"[:200])
    return verdicts[-1]


def _publish(
    memory: MemoryStore,
    program: Program,
    thread: github.ProgramThread,
    outcome: IterationOutcome | None,
    settings: github.GitHubSettings,
) -> tuple[int, int | None]:
    """Updates the program issue, the draft PR and the comments; records their numbers in the Machine State."""
    state = load_state(memory, program)
    machine = state.machine
    issue = thread.ensure_issue(program.goal)
    metric = program.metric or "metric"
    pr = _number(machine.pr)
    charts = program_charts(memory, program)
    kept = outcome is not None and outcome.commit
    view = bodies.ProgramView(program.name, metric, machine, program.direction, program.config.target_metric,
                              issue=issue, charts=charts)
    if kept or (machine.stale_reason and pr is not None):  # a stale PR says so on the next tick, kept or not
        change, iteration = (outcome.summary, outcome.iteration) if kept and outcome else _latest_kept(state)
        current = dataclasses.replace(machine, best_metric=outcome.metric) if kept and outcome else machine
        body = bodies.render_pull_request(dataclasses.replace(view, machine=current, latest_change=change,
                                                              latest_iteration=iteration))
        pr = thread.ensure_pr(f"autoloop/{program.name}", f"improve {metric}", body)
    if outcome is not None:
        thread.post_iteration(bodies.render_iteration(outcome, settings.run_url))
    models = tuple(summary_rows(statefile.models_of(state)))
    status = dataclasses.replace(view, pr=pr, run_url=settings.run_url, models=models)
    thread.update_status(bodies.render_status(status))
    write_job_summary(settings, program.name, charts)
    if outcome is not None and machine.completed and outcome.status == "accepted" and machine.best_metric is not None:
        thread.complete(bodies.render_completion(status, outcome.iteration))
    _remember_numbers(memory, program, issue, pr)
    return issue, pr


def _latest_kept(state: statefile.StateFile) -> tuple[str, int | None]:
    """Returns the newest kept change the history still details, and its iteration (('—', None) when folded)."""
    entry = next((e for e in state.history if e.is_detailed and e.status == "accepted"), None)
    return (entry.change or "—", entry.iteration) if entry is not None else ("—", None)


def write_job_summary(settings: github.GitHubSettings, program: str, charts: str) -> None:
    """Appends the program's charts to the Actions job summary, when the job has one."""
    if not settings.step_summary or not charts:
        return
    with Path(settings.step_summary).open("a", encoding="utf-8") as summary:
        summary.write(render("github/job_summary.md.j2", program=program, charts=charts))


def _remember_numbers(memory: MemoryStore, program: Program, issue: int, pr: int | None) -> None:
    """Writes the PR and Issue rows of the Machine State when they changed."""
    wanted = (f"#{pr}" if pr else None, f"#{issue}")
    machine = load_state(memory, program).machine
    if (machine.pr, machine.issue) == wanted:
        return

    def change(text: str | None) -> str:
        state = parse_or_new(text, program, state_path(program))
        updated = dataclasses.replace(state.machine, pr=wanted[0] or state.machine.pr, issue=wanted[1])
        return statefile.render_state(statefile.with_machine(state, updated))

    message = f"[Autoloop: {program.name}] issue #{issue}" + (f", PR #{pr}" if pr else "")
    memory.update(state_path(program), change, message)


def _number(value: str | None) -> int | None:
    digits = (value or "").lstrip("#")
    return int(digits) if digits.isdigit() else None
