"""EvoX's records (§3.1): the strategies, the controller state, the refresh's results and the decision."""

from __future__ import annotations

from dataclasses import dataclass

from autoloop_py.state.population import Candidate

STATUSES = ("active", "scored", "failed-validation", "rolled-back")
LABEL_STATES = ("pending", "default", "generated", "failed")
LABEL_WORDS = {"": "none", "diverge": "diverge", "refine": "refine"}


@dataclass(frozen=True)
class StrategyRecord:
    """One search strategy of the run (S<id>).

    Attributes:
      id: k of S<k>; S0 is the initial strategy.
      code: the strategy's Python source (newline-ended; '' while folded and not loaded back).
      status: active | scored | failed-validation | rolled-back.
      j: the strategy score J (None while its window runs, or when it never ran).
      window_start: the iteration its window started (None when it never ran).
      window_end: the iteration its window was scored at (None until scored).
      start_score: the oriented best when its window started (None when unknown).
      end_score: the oriented best of its window when scored (None until scored).
      parent: the strategy it was rewritten from (None for the initial strategy).
      validation: 'passed', or the validator's reasons.
      checksum: the sha256 prefix of the code as last validated (a hand edit changes the code, not this).
      note: the meta LLM's summary, or what happened to the strategy.
      code_ref: where the full source is kept on the memory branch once folded out of the block (None: inline).
    """

    id: int
    code: str
    status: str = "active"
    j: float | None = None
    window_start: int | None = None
    window_end: int | None = None
    start_score: float | None = None
    end_score: float | None = None
    parent: int | None = None
    validation: str = "passed"
    checksum: str = ""
    note: str = ""
    code_ref: str | None = None


@dataclass(frozen=True)
class EvoXState:
    """The controller of §3.1 plus every strategy, as the `### ⚙️ Strategy State` block holds them.

    Attributes:
      switch_interval: H, the stagnant turns before a rewrite (also J's horizon).
      stagnant_count: turns in a row without an improvement above the threshold.
      last_tracked_best: the oriented best at the end of the previous turn.
      evolve_due: the stagnation counter fired; the next iteration asks the meta LLM.
      window_start_iteration: the iteration the current window started.
      window_start_score: the oriented best when it started (None before any score).
      window_bests: the oriented best after each step of the window.
      active: the id of the strategy that samples.
      pending: the id of the active strategy while it is still unscored (None otherwise).
      fallback: the strategy a runtime fault rolls back to (one-shot).
      best_strategy_j: the highest J so far.
      evolutions: meta steps and rollbacks so far.
      meta_failures: meta steps that produced no valid strategy.
      meta_failures_in_row: the latest of them in a row (0 after a valid rewrite).
      meta_backoff: stagnation signals still to pass over before the meta LLM is asked again (backoff_wait of
        meta_failures_in_row after a failed meta step).
      labels: pending | default | generated | failed (where the label texts came from).
      diverge_label: the DIVERGE text ('' until set).
      refine_label: the REFINE text ('' until set).
      rng_seed: the run's seed.
      rng_draws: the seeds drawn for `sample` so far.
      strategies: every strategy, oldest first.
    """

    switch_interval: int
    stagnant_count: int = 0
    last_tracked_best: float | None = None
    evolve_due: bool = False
    window_start_iteration: int = 0
    window_start_score: float | None = None
    window_bests: tuple[float, ...] = ()
    active: int = 0
    pending: int | None = 0
    fallback: int | None = None
    best_strategy_j: float | None = None
    evolutions: int = 0
    meta_failures: int = 0
    meta_failures_in_row: int = 0
    meta_backoff: int = 0
    labels: str = "pending"
    diverge_label: str = ""
    refine_label: str = ""
    rng_seed: int = 42
    rng_draws: int = 0
    strategies: tuple[StrategyRecord, ...] = ()

    def strategy(self, strategy_id: int) -> StrategyRecord:
        """Returns S<strategy_id>; raises KeyError when there is none."""
        for record in self.strategies:
            if record.id == strategy_id:
                return record
        raise KeyError(strategy_id)


@dataclass(frozen=True)
class LabelTexts:
    """The DIVERGE/REFINE texts one guide call produced (or the defaults after it failed).

    Attributes:
      diverge: the DIVERGE text.
      refine: the REFINE text.
      source: generated | default | failed.
    """

    diverge: str
    refine: str
    source: str


@dataclass(frozen=True)
class EditCheck:
    """The validation of an active strategy a person edited by hand.

    Attributes:
      strategy_id: the strategy whose code was edited.
      checksum: the checksum of the edited code that was validated.
      problems: the validator's reasons ([] when valid).
    """

    strategy_id: int
    checksum: str
    problems: tuple[str, ...]


@dataclass(frozen=True)
class MetaOutcome:
    """What the meta LLM's rewrite produced.

    Attributes:
      parent: the strategy it rewrote (the DB parent, argmax J).
      references: the reference strategies shown beside it.
      code: the last rewrite's source (None when no reply held code).
      problems: the validator's reasons for that code ([] when valid).
      attempts: the meta calls made.
      summary: one line of the reply's own description.
    """

    parent: int
    references: tuple[int, ...]
    code: str | None
    problems: tuple[str, ...]
    attempts: int
    summary: str = ""


@dataclass(frozen=True)
class EvoXRefresh:
    """The effects `refresh` ran before the decision, for `decide` to apply.

    Attributes:
      labels: new label texts (None: unchanged).
      edit: a hand edit's validation (None: no edit).
      meta: the meta step's outcome (None: no meta step).
    """

    labels: LabelTexts | None = None
    edit: EditCheck | None = None
    meta: MetaOutcome | None = None


@dataclass(frozen=True)
class EvoXDecision:
    """What an EvoX iteration does, as the runner sees it.

    Attributes:
      parent: the candidate to improve (None: a from-scratch iteration).
      context: the context programs shown beside it.
      label: "", "diverge" or "refine".
      strategy_id: the strategy that chose them.
      state: the strategy state after this decision (labels, meta step, rollbacks applied).
      reason: why, in one line.
      events: what happened to the strategies this iteration.
      seed: the seed `sample` ran with.
      attempt: the attempt of the iteration (1 first; a retry keeps the parent and context).
      previous_error: why the previous attempt failed ('' on the first).
      as_is: the seed turn: the Target evaluated as it is, before any strategy runs (the first window's start).
    """

    parent: Candidate | None
    context: tuple[Candidate, ...]
    label: str
    strategy_id: int
    state: EvoXState
    reason: str
    events: tuple[str, ...] = ()
    seed: int = 0
    attempt: int = 1
    previous_error: str = ""
    as_is: bool = False

    @property
    def operator(self) -> str:
        """Returns the label as an operator ('improve' for the free-form label, 'seed' for the seed turn)."""
        return "seed" if self.as_is else self.label or "improve"

    @property
    def parents(self) -> tuple[Candidate, ...]:
        """Returns the parent as a tuple (empty from scratch)."""
        return (self.parent,) if self.parent is not None else ()

    @property
    def island(self) -> int | None:
        """Returns None: EvoX has no islands."""
        return None
