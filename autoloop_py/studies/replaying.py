"""Same-prompt replay, effects: re-send a saved prompt through litellm and evaluate the child in a private worktree."""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Callable, Mapping

from autoloop_py.analysis.replay import Applied, ReplayEvent, Trial, apply_text, retry_user
from autoloop_py.analysis.replay_prompts import EXACT, VariantPrompt
from autoloop_py.errors import AutoloopError
from autoloop_py.git.command import open_repo, run
from autoloop_py.loop.evaluation.fresh_copies import evaluate_copy
from autoloop_py.program.model import Program
from autoloop_py.program.regions import primary_target
from autoloop_py.program.target import target_files
from autoloop_py.proposers import llm
from autoloop_py.proposers.base import Usage
from autoloop_py.studies.tuning_run import trial_worktree

logger = logging.getLogger(__name__)

# (model, system prompt, user prompt) -> the model's reply.
Ask = Callable[[str, str, str], str]
# The key of the one source a bare trace directory gives, when no program says where it lives.
SOURCE_KEY = "program"
_INVALID = (0, -1)


def send(model: str, system: str, user: str, spent: list[Usage] | None = None) -> str:
    """Returns the model's reply to a saved prompt (AUTOLOOP_MOCK_RESPONSE, when set, answers instead).

    spent: gets the reply's usage appended (replays count in the program's spend).
    """
    return llm.complete(model, user, system=system, spent=spent)


class Bench:
    """The program branch (else HEAD) checked out in a private, detached worktree where children are evaluated."""

    def __init__(self, root: Path, program: Program) -> None:
        self.root = Path(root)
        self.program = program
        self.primary = ""
        self.files: dict[str, str] = {}
        self._path: Path | None = None
        self._worktree = ExitStack()

    @property
    def path(self) -> Path:
        """Returns the worktree root (valid inside the `with` block)."""
        if self._path is None:
            raise AutoloopError("the replay worktree is not open; use Bench in a `with` block")
        return self._path

    def __enter__(self) -> Bench:
        with ExitStack() as worktree:
            self._path = worktree.enter_context(trial_worktree(self.root, self.program.name, with_origin=False))
            self.primary = primary_target(self.program, self.path)
            self._worktree = worktree.pop_all()
        for rel in target_files(self.program.target, self.path):
            self.files[rel] = (self.path / rel).read_bytes().decode("utf-8", errors="replace")
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._worktree.close()
        self._path = None

    def evaluate(self, files: Mapping[str, str]) -> tuple[bool, float | None, str | None]:
        """Writes files, evaluates the program, restores the worktree; returns (ok, metric, error)."""
        for rel, content in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode("utf-8"))
        try:
            # In standalone copies (one per stage): the evaluated child never sees the worktree's `.git` file.
            result = evaluate_copy(self.program, self.path)
        finally:
            worktree = open_repo(self.path)
            run(worktree, "reset", "--hard", "--quiet", "HEAD")
            run(worktree, "clean", "-fdq")
        if not result.ok or result.metric is None:
            return False, None, result.error or "no metric"
        if result.metrics.get("validity") in _INVALID:
            return False, None, f"the evaluation reported validity {result.metrics['validity']}"
        return True, result.metric, None


@dataclass(frozen=True)
class Replay:
    """How to replay an event.

    Attributes:
        model: the litellm model to re-send with.
        repeats: how many replays to make.
        attempts: how many replies one replay may ask for; a failed one is fed back into the next prompt.
        prompt: the prompt to re-send (None: the event's saved prompt, unchanged).
    """

    model: str
    repeats: int = 1
    attempts: int = 1
    prompt: VariantPrompt | None = None


def replay_event(event: ReplayEvent, how: Replay, bench: Bench | None = None, ask: Ask = send) -> list[Trial]:
    """Re-sends the event's prompt `repeats` times; applies each reply to the parent and evaluates it on the bench."""
    primary = bench.primary if bench else SOURCE_KEY
    files = {**bench.files, primary: event.parent_source} if bench else {SOURCE_KEY: event.parent_source}
    prompt = how.prompt or VariantPrompt(EXACT, event.system, event.user)
    trials = []
    for number in range(how.repeats):
        logger.info("replay %d/%d of %s (%s) with %s", number + 1, how.repeats, event.id, prompt.variant, how.model)
        trials.append(_attempts(event, how, prompt, _Setup(files, primary, bench, ask)))
    return trials


@dataclass(frozen=True)
class _Setup:
    """What every attempt of a replay shares: the parent's files, the primary path, the bench and the model call."""

    files: Mapping[str, str]
    primary: str
    bench: Bench | None
    ask: Ask


def _attempts(event: ReplayEvent, how: Replay, prompt: VariantPrompt, setup: _Setup) -> Trial:
    """Returns the first attempt that neither fails to parse nor to evaluate, or the last one."""
    user, errors, number = prompt.user, [], 1
    trial, applied = _trial(event, how.model, prompt.system, user, setup)
    while trial.failed and number < how.attempts:
        errors.append(trial.parse_error or trial.eval_error or "the evaluation failed")
        # A call that got no reply is simply asked again; a reply that failed is shown with why.
        if trial.reply:
            user = retry_user(prompt.user, trial, applied)
        trial, applied = _trial(event, how.model, prompt.system, user, setup)
        number += 1
    return replace(trial, attempts=number, earlier_errors=tuple(errors))


def _trial(event: ReplayEvent, model: str, system: str, user: str, setup: _Setup) -> tuple[Trial, Applied | None]:
    """Returns one reply's trial (whether it applied, how its child evaluated) and how it applied."""
    bench = setup.bench
    failed = False if bench is not None else None
    try:
        reply = setup.ask(model, system, user)
    except Exception as err:  # litellm raises provider-specific types; each counts as a failed replay
        return Trial("", f"no reply from {model}: {llm.error_line(err)}", eval_ok=failed), None
    applied = apply_text(reply, setup.files, setup.primary, bench.program.target.allows if bench else None)
    if applied.error is not None:
        return Trial(reply, applied.error, eval_ok=failed), applied
    source = applied.changed.get(setup.primary, event.parent_source)
    if bench is None:
        return Trial(reply, None, source), applied
    ok, score, error = bench.evaluate({setup.primary: event.parent_source, **applied.changed})
    return Trial(reply, None, source, ok, error, score), applied

