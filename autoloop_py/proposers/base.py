"""The proposer interface: a request for one candidate change and the proposal that answers it."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Protocol

from autoloop_py.program.model import Program
from autoloop_py.program.models import ModelSpec
from autoloop_py.sandbox.policy import SandboxPolicy


@dataclass(frozen=True)
class Usage:
    """What producing a proposal cost.

    Attributes:
      prompt_tokens: tokens sent to the model, summed over retries.
      completion_tokens: tokens the model returned, summed over retries.
      cost: dollars, when the model's price is known.
      model: the model that answered.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    model: str | None = None


@dataclass(frozen=True)
class ProposalRequest:
    """Everything a proposer may look at to propose one candidate.

    Attributes:
      program: the program being improved.
      files: repo-relative path -> current content of every existing Target file.
      prompt: the rendered iteration prompt.
      workdir: the runner's private worktree root: read it, never write it (the agent proposer edits a copy).
      iteration: the number of the iteration being run.
      sandbox: how an outside agent's command is confined (None: the program's `isolation`).
      model: the model drawn to propose (None: the llm proposer resolves `model:`/AUTOLOOP_MODEL itself).
    """

    program: Program
    files: Mapping[str, str]
    prompt: str
    workdir: Path
    iteration: int
    sandbox: SandboxPolicy | None = None
    model: ModelSpec | None = None


@dataclass(frozen=True)
class Proposal:
    """One candidate change, or why none could be produced.

    Attributes:
      files: changed paths -> new content (None = deleted); empty when failed.
      summary: one line saying what the change does.
      lesson: an optional transferable heuristic learned while proposing.
      usage: tokens and cost, for proposers that call a model.
      failure: set when no valid candidate could be produced (counts as an error).
      transcript: (role, text) of every prompt and reply, kept for traces.
      approach: the reply's one-line APPROACH (the idea, not the code), for strategies' Population entries.
      problems: why some of the changes can never be a candidate (a link, a `.git` path…): rejected unevaluated.
    """

    files: Mapping[str, str | None]
    summary: str
    lesson: str | None = None
    usage: Usage | None = None
    failure: str | None = None
    transcript: tuple[tuple[str, str], ...] = ()
    approach: str | None = None
    problems: tuple[str, ...] = ()


class Proposer(Protocol):
    """Anything that turns a ProposalRequest into a Proposal."""

    name: str

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        """Returns one candidate change for the request (never raises for a bad model reply)."""
        ...
