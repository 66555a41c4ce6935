"""How iterations run (the options `autoloop run` sets) and the clock that times their steps."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from autoloop_py.proposers import get_proposer
from autoloop_py.proposers.base import Proposer
from autoloop_py.state import file as statefile
from autoloop_py.strategies.slots import Slot


@dataclass(frozen=True)
class RunOptions:
    """How iterations run.

    Attributes:
      proposer: tune | llm | agent; None takes the program's `proposer:` or `tune`.
      model: litellm model for the llm proposer (overrides nothing set in program.md).
      agent_command: the external agent command for the agent proposer.
      dry_run: propose and evaluate, but write no branch.
      run_url: link to the CI run, written into history entries.
      budget: byte budget of the state file.
      base_branch: the default branch program branches start from (None: detect).
      proposer_factory: builds a Proposer from its name (tests inject fakes here).
      ci_gate: keep an improving candidate as `pending-ci` until its commit's checks pass.
      directives: steering for this iteration (people's comments, a CI fix request), quoted as data.
      isolation: auto | bwrap | none, overriding the program's `isolation` (None: AUTOLOOP_ISOLATION, else the
        program's).
      agent_network: host | outside-only, overriding the program's `agent-network` (None: AUTOLOOP_AGENT_NETWORK,
        else the program's).
      llm_timeout: seconds per model request (overrides `llm-timeout`); llm_retries: likewise `llm-retries`.
      job_deadline: time.monotonic() at which the job is stopped (AUTOLOOP_JOB_TIMEOUT_MINUTES); model calls
        end early enough to leave the evaluation its time.
      outcome_dir: write the decided iteration there as an Outcome instead of committing, pushing or
        recording anything (`autoloop publish` does that, in a job that runs no candidate code).
      slot: this iteration is slot i of a tick of k parallel ones (needs outcome_dir): it records iteration
        `next + i`, seeds its draws from the slot, and a strategy with islands works the slot's island.
    """

    proposer: str | None = None
    model: str | None = None
    agent_command: str | None = None
    dry_run: bool = False
    run_url: str | None = None
    budget: int = statefile.DEFAULT_BUDGET
    base_branch: str | None = None
    proposer_factory: Callable[..., Proposer] = get_proposer
    ci_gate: bool = False
    directives: tuple[str, ...] = ()
    isolation: str | None = None
    agent_network: str | None = None
    llm_timeout: float | None = None
    llm_retries: int | None = None
    job_deadline: float | None = None
    outcome_dir: Path | None = None
    slot: Slot | None = None

    @property
    def writes(self) -> bool:
        """Returns whether the iteration itself commits, pushes and records (not a dry run, no outcome directory)."""
        return not self.dry_run and self.outcome_dir is None


class Clock:
    """Accumulates wall time per named step."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[step] = self.timings.get(step, 0.0) + time.perf_counter() - start
