"""CI gate: a kept candidate waits as `pending-ci` until its commit's checks pass, fail into a fix loop, or pause.

Pure transitions of the state file; reading check runs (github.py) and proposing the fix stay with the caller.
A run of a program first calls `reconcile` with the check result of the pending commit:

- `none`: no candidate is pending; the run iterates as usual.
- `wait`: checks are still running (or none reported yet). The run proposes nothing and exits with
  "waiting for CI on <sha>": no job blocks on CI, and no candidate piles up on an unchecked commit.
- `accepted`: checks passed; the candidate is accepted and the run goes on, unless the target is now reached.
- `fix`: checks failed; the run proposes a fix (the FixRequest) instead of a free change. A fix that is kept
  becomes the new pending candidate through `record_pending`, which carries the attempts and signatures over.
- `paused`: the same failure signature came back, or the fix budget is spent; the program is paused.

The pending candidate lives in two Machine State rows that upstream's scheduler ignores:
`Pending CI` = `<sha> · iteration <N> · metric <m> · attempts <k>` (plus ` · ci failed` once its failure is
counted and a fix is due) and `CI Signatures` = the comma-separated failure signatures seen for this candidate.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from autoloop_py.errors import ProgramError, StateError
from autoloop_py.loop.evaluation import acceptance
from autoloop_py.program.model import Program
from autoloop_py.state.file import (
    DEFAULT_BUDGET,
    IterationRecord,
    StateFile,
    apply_iteration,
    with_entry_status,
    with_machine,
)
from autoloop_py.state.machine import RECENT_LIMIT, MachineSection, MachineState, accept_metric
from autoloop_py.state.parts import NO_VALUE, finite_number, format_number, one_line, trim, utc

logger = logging.getLogger(__name__)

CHECK_STATES = ("success", "failure", "pending", "none")
ACTIONS = ("none", "wait", "accepted", "fix", "paused")
MAX_ATTEMPTS = 5
SIGNATURE_LIMIT = 120
NO_CHECKS_GRACE = timedelta(hours=1)
PENDING_LABEL = "Pending CI"
SIGNATURES_LABEL = "CI Signatures"
ACCEPTED_LABEL = "✅ Accepted (CI passed)"
NO_CHECKS_LABEL = "✅ Accepted (no CI checks)"
EXHAUSTED_LABEL = "🛑 CI fix exhausted"
STUCK_LABEL = "🛑 CI fix exhausted (stuck in CI fix loop)"
PENDING_FORMAT = "`<sha> · iteration <N> · metric <m> · attempts <k>`"

_PENDING_KEY = "pending_ci"
_SIGNATURES_KEY = "ci_signatures"
_CI_GATE_KEYS = ("ci-gate", "ci_gate")
_PENDING_RE = re.compile(
    r"`?(?P<commit>[0-9a-f]{4,64})`?\s*·\s*iteration\s+#?(?P<iteration>\d{1,9})\s*·\s*metric\s+(?P<metric>\S+)"
    r"\s*·\s*attempts\s+(?P<attempts>\d{1,4})(?P<failed>\s*·\s*ci\s+failed)?",
    re.IGNORECASE,
)
# A signature lives in a comma-separated table cell and in the Pause Reason, which upstream splits on `|`.
_SIGNATURE_SAFE = str.maketrans({",": ";", "|": "/"})


@dataclass(frozen=True)
class CheckResult:
    """The check runs of one commit, reduced to what the gate decides on.

    Attributes:
      state: "success", "failure", "pending" (still running) or "none" (no checks reported).
      failing: the names of the failing checks.
      first_error: the first error line of the failure output.
      summary: the failure output to show the proposer ('' to use the names and the first error).
    """

    state: str
    failing: tuple[str, ...] = ()
    first_error: str = ""
    summary: str = ""

    def __post_init__(self) -> None:
        if self.state not in CHECK_STATES:
            raise ValueError(f"check state {self.state!r} is not one of {CHECK_STATES}")


@dataclass(frozen=True)
class PendingCI:
    """The kept candidate whose commit awaits CI, as the `Pending CI` and `CI Signatures` rows hold it.

    Attributes:
      commit: the pushed commit's sha.
      iteration: the iteration whose history entry records the candidate.
      metric: the candidate's metric, accepted once CI passes.
      attempts: fix attempts requested so far for this candidate (carried over to its fixes).
      signatures: failure signatures seen so far, oldest first.
      failed: whether this commit's failure is already counted (a fix is due, not a new check).
    """

    commit: str
    iteration: int
    metric: float
    attempts: int = 0
    signatures: tuple[str, ...] = ()
    failed: bool = False


@dataclass(frozen=True)
class FixRequest:
    """What the next proposal must fix: rendered by the caller into the prompt as a directive.

    Attributes:
      summary: the failure output (or the failing checks and the first error).
      signature: the failure signature: sorted failing check names and the first error line.
      commit: the commit whose checks failed.
      iteration: the iteration that kept that commit.
      attempt: which fix attempt this is, from 1.
      max_attempts: the fix budget of the candidate.
    """

    summary: str
    signature: str
    commit: str
    iteration: int
    attempt: int
    max_attempts: int


@dataclass(frozen=True)
class Reconciliation:
    """What a run does about the pending candidate, and the state to write first.

    Attributes:
      action: one of ACTIONS (see the module docstring).
      state: the state file after the decision (the same object when nothing changed).
      message: one line for the user ('' when no candidate is pending).
      pending: the candidate as read before the decision, None when none was pending.
      fix: the fix to propose, for the `fix` action.
    """

    action: str
    state: StateFile
    message: str = ""
    pending: PendingCI | None = None
    fix: FixRequest | None = None

    @property
    def changed(self) -> bool:
        """Returns whether the state must be written back."""
        return self.action in ("accepted", "fix", "paused")

    @property
    def proceeds(self) -> bool:
        """Returns whether the run goes on to propose (a fix or a free change)."""
        return self.action in ("none", "fix") or (self.action == "accepted" and not self.state.machine.completed)


# ---------------------------------------------------------------- program option


def ci_gate_enabled(program: Program) -> bool:
    """Returns whether kept candidates wait for CI; `ci-gate: false` in the frontmatter opts out."""
    extra = program.config.extra
    key = next((k for k in _CI_GATE_KEYS if k in extra), None)
    if key is None:
        return True
    value = extra[key]
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in ("true", "false"):
        return str(value).strip().lower() == "true"
    line = next((i + 1 for i, text in enumerate(program.text.splitlines()) if text.strip().startswith(f"{key}:")), None)
    raise ProgramError(f"frontmatter `{key}` is {value!r}; write `{key}: true` or `{key}: false`", program.path, line)


# ---------------------------------------------------------------- rows


def parse_pending(value: str, signatures: str = "") -> PendingCI:
    """Reads the `Pending CI` and `CI Signatures` values; raises ValueError when the first is malformed."""
    found = _PENDING_RE.fullmatch(value.strip())
    metric = finite_number(found.group("metric")) if found else None
    if found is None or metric is None:
        raise ValueError(value)
    return PendingCI(
        commit=found.group("commit"),
        iteration=int(found.group("iteration")),
        metric=metric,
        attempts=int(found.group("attempts")),
        signatures=tuple(s.strip() for s in signatures.split(",") if s.strip() not in NO_VALUE),
        failed=found.group("failed") is not None,
    )


def format_pending(pending: PendingCI) -> str:
    """Returns the `Pending CI` value of a candidate."""
    text = f"{pending.commit} · iteration {pending.iteration} · metric {format_number(pending.metric)}"
    text += f" · attempts {pending.attempts}"
    return text + (" · ci failed" if pending.failed else "")


def read_pending(state: StateFile) -> PendingCI | None:
    """Returns the pending candidate of the state file; raises StateError naming the row when unreadable."""
    rows = [value for label, value in state.machine.extra if _key(label) == _PENDING_KEY]
    if not rows:
        return None
    if len(rows) > 1:
        raise StateError(f"'{PENDING_LABEL}' appears twice; keep one row", state.path, _row_line(state, 1))
    signatures = next((v for label, v in state.machine.extra if _key(label) == _SIGNATURES_KEY), "")
    try:
        return parse_pending(rows[0], signatures)
    except ValueError:
        raise StateError(
            f"'{PENDING_LABEL}' is '{rows[0]}', which is not {PENDING_FORMAT}; correct the row, "
            "or delete it to drop the pending candidate",
            state.path,
            _row_line(state, 0),
        ) from None


def with_pending(machine: MachineState, pending: PendingCI | None) -> MachineState:
    """Returns the values with the pending rows set in place (appended when new), or removed for None."""
    wanted: dict[str, str] = {}
    if pending is not None:
        wanted[_PENDING_KEY] = format_pending(pending)
        if pending.signatures:
            wanted[_SIGNATURES_KEY] = ", ".join(pending.signatures)
    labels = {_PENDING_KEY: PENDING_LABEL, _SIGNATURES_KEY: SIGNATURES_LABEL}
    extra: list[tuple[str, str]] = []
    for label, value in machine.extra:
        key = _key(label)
        if key not in labels:
            extra.append((label, value))
        elif key in wanted:
            # Keep the label as written so an unchanged row is re-emitted byte-identically.
            extra.append((label, wanted.pop(key)))
    extra.extend((labels[key], value) for key, value in wanted.items())
    return replace(machine, extra=tuple(extra))


def carry_over(previous: PendingCI | None, commit: str, iteration: int, metric: float) -> PendingCI:
    """Returns the new pending candidate; a fix inherits the attempts and signatures of the one it fixes."""
    if previous is None:
        return PendingCI(commit, iteration, metric)
    if not previous.failed:
        logger.warning("%s replaces %s before CI reported on it; carrying its attempts over", commit, previous.commit)
    return PendingCI(commit, iteration, metric, previous.attempts, previous.signatures)


def _key(label: str) -> str:
    return re.sub(r"[\s_\-]+", "_", re.sub(r"[*`]", "", label).strip().lower())


def _row_line(state: StateFile, nth: int) -> int | None:
    """Returns the 1-based file line of the nth `Pending CI` row."""
    offset = 0
    for section in state.sections:
        if isinstance(section, MachineSection):
            lines = section.text.splitlines()
            hits = [i for i, line in enumerate(lines) if _first_cell_key(line) == _PENDING_KEY]
            return offset + hits[nth] + 1 if nth < len(hits) else None
        offset += len(section.text.splitlines())
    return None


def _first_cell_key(line: str) -> str | None:
    body = line.strip()
    return _key(body.strip("|").split("|")[0]) if body.startswith("|") else None


# ---------------------------------------------------------------- recording


def record_pending(
    state: StateFile,
    record: IterationRecord,
    *,
    direction: str,
    target_metric: float | None,
    min_delta: float = 0.0,
    budget: int = DEFAULT_BUDGET,
) -> StateFile:
    """Returns the state after a kept candidate was pushed: a `⏳ Pending CI` entry and the pending rows."""
    if record.status != "pending-ci" or not record.commit or record.metric is None:
        raise ValueError("record_pending needs a pending-ci record with its commit and metric")
    pending = carry_over(read_pending(state), record.commit, state.machine.iteration_count + 1, record.metric)
    if pending.attempts:
        record = replace(record, extra=(*record.extra, ("CI fix attempts", str(pending.attempts))))
    state = with_machine(state, with_pending(state.machine, pending))
    return apply_iteration(
        state, record, direction=direction, target_metric=target_metric, min_delta=min_delta, budget=budget
    )


def failure_signature(result: CheckResult) -> str:
    """Returns the failure signature: the sorted failing check names, `: `, the first error line (trimmed)."""
    names = "+".join(sorted({one_line(name) for name in result.failing if name.strip()})) or "unnamed check"
    error = one_line(result.first_error)
    text = f"{names}: {error}" if error else names
    return trim(text.translate(_SIGNATURE_SAFE), SIGNATURE_LIMIT)


# ---------------------------------------------------------------- reconciling


def reconcile(
    state: StateFile,
    result: CheckResult,
    *,
    direction: str,
    target_metric: float | None,
    max_attempts: int = MAX_ATTEMPTS,
    now: datetime | None = None,
    no_checks_grace: timedelta = NO_CHECKS_GRACE,
    program: Program | None = None,
) -> Reconciliation:
    """Decides what the pending candidate's check result means; see the module docstring for the actions.

    With `now`, a commit that still has no checks `no_checks_grace` after it was recorded is accepted
    (a repository without CI would otherwise wait forever); without `now`, it waits. program: the program whose
    Kept Front (objectives) the candidate joins once accepted.
    """
    pending = read_pending(state)
    if pending is None:
        return Reconciliation("none", state)
    if result.state == "success":
        return _accept(state, pending, direction, target_metric, ACCEPTED_LABEL, "CI passed", program)
    if result.state == "failure":
        return _fail(state, pending, result, max_attempts)
    if result.state == "none" and not pending.failed and _grace_over(state.machine, now, no_checks_grace):
        return _accept(state, pending, direction, target_metric, NO_CHECKS_LABEL, "no CI checks reported", program)
    return Reconciliation("wait", state, f"waiting for CI on {pending.commit}", pending)


def _accept(
    state: StateFile, pending: PendingCI, direction: str, target: float | None, label: str, why: str,
    program: Program | None,
) -> Reconciliation:
    if program is not None:  # kept only now: acceptance compares later candidates with it
        state = acceptance.with_entry_kept(state, pending.iteration, program)
    machine = accept_metric(state.machine, pending.metric, direction, target)
    statuses = _replace_last(machine.recent_statuses, "pending-ci", "accepted")
    machine = replace(machine, recent_statuses=statuses, metric_direction=direction, target_metric=target)
    state = with_entry_status(with_machine(state, with_pending(machine, None)), pending.iteration, label)
    message = f"{why} on {pending.commit}: iteration {pending.iteration} accepted"
    message += f" with metric {format_number(pending.metric)}"
    if machine.completed:
        message += f"; {machine.completed_reason}"
    return Reconciliation("accepted", state, message, pending)


def _fail(state: StateFile, pending: PendingCI, result: CheckResult, max_attempts: int) -> Reconciliation:
    signature = failure_signature(result)
    # A counted failure read again means the last fix attempt kept nothing new: not a repeat, another attempt.
    if not pending.failed and signature in pending.signatures:
        return _pause(state, pending, f"stuck in CI fix loop: {signature}", STUCK_LABEL)
    if pending.attempts >= max_attempts:
        return _pause(state, pending, f"ci-fix-exhausted: {signature}", EXHAUSTED_LABEL)
    attempt = pending.attempts + 1
    seen = pending.signatures if signature in pending.signatures else (*pending.signatures, signature)
    updated = replace(pending, attempts=attempt, signatures=seen, failed=True)
    statuses = _replace_last(state.machine.recent_statuses, "pending-ci", "error")
    machine = with_pending(replace(state.machine, recent_statuses=statuses), updated)
    label = f"⚠️ CI failed (fix attempt {attempt} of {max_attempts})"
    state = with_entry_status(with_machine(state, machine), pending.iteration, label)
    names, first = ", ".join(sorted(set(result.failing))) or "unnamed check", one_line(result.first_error)
    summary = result.summary.strip() or f"failing checks: {names}; first error: {first or '(none reported)'}"
    fix = FixRequest(summary, signature, pending.commit, pending.iteration, attempt, max_attempts)
    message = f"CI failed on {pending.commit}: fix attempt {attempt} of {max_attempts}: {signature}"
    return Reconciliation("fix", state, message, updated, fix)


def _pause(state: StateFile, pending: PendingCI, reason: str, label: str) -> Reconciliation:
    statuses = state.machine.recent_statuses
    if "pending-ci" in statuses:
        statuses = _replace_last(statuses, "pending-ci", "ci-fix-exhausted")
    else:
        statuses = (*statuses, "ci-fix-exhausted")[-RECENT_LIMIT:]
    machine = replace(state.machine, paused=True, pause_reason=reason, recent_statuses=statuses)
    state = with_entry_status(with_machine(state, with_pending(machine, None)), pending.iteration, label)
    return Reconciliation("paused", state, f"paused: {reason}", pending)


def _replace_last(statuses: tuple[str, ...], old: str, new: str) -> tuple[str, ...]:
    """Returns the statuses with the last `old` replaced by `new` (unchanged when there is none)."""
    index = next((i for i in reversed(range(len(statuses))) if statuses[i] == old), None)
    return statuses if index is None else (*statuses[:index], new, *statuses[index + 1 :])


def _grace_over(machine: MachineState, now: datetime | None, grace: timedelta) -> bool:
    return now is not None and machine.last_run is not None and utc(now) - machine.last_run >= grace
