"""Proposers: where candidate changes come from (tune offline, an llm through litellm, or an external agent)."""

from __future__ import annotations

from autoloop_py.errors import AutoloopError
from autoloop_py.program.frontmatter import PROPOSERS
from autoloop_py.proposers.agent import AgentProposer
from autoloop_py.proposers.base import Proposal, ProposalRequest, Proposer, Usage
from autoloop_py.proposers.llm import LLMProposer
from autoloop_py.proposers.llm_call import CallLimits
from autoloop_py.proposers.model_calls import ModelCalls
from autoloop_py.proposers.tune import TuneProposer

PROPOSER_NAMES = PROPOSERS

__all__ = ["PROPOSER_NAMES", "Proposal", "ProposalRequest", "Proposer", "Usage", "get_proposer"]


def get_proposer(
    name: str, *, model: str | None = None, agent_command: str | None = None, max_retries: int = 2,
    limits: CallLimits = CallLimits(), models: ModelCalls | None = None,
) -> Proposer:
    """Returns the proposer called name; raises an AutoloopError listing the valid names for an unknown one.

    models: where the llm proposer's calls are made (the run's model worker; None: in this process).
    """
    if name == "tune":
        return TuneProposer()
    if name == "llm":
        return LLMProposer(model=model, max_retries=max_retries, limits=limits, models=models)
    if name == "agent":
        return AgentProposer(command=agent_command)
    raise AutoloopError(f"unknown proposer '{name}'; choose one of: {', '.join(PROPOSER_NAMES)}")
