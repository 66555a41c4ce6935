"""Proposers: where candidate changes come from (tune offline, an llm through litellm, or an external agent).

The package imports its proposers only when one is asked for: the model worker process (model_worker.py)
imports this package too, and everything it imports before litellm delays the run's first model request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autoloop_py.errors import AutoloopError
from autoloop_py.proposers.llm_call import CallLimits

if TYPE_CHECKING:
    from autoloop_py.proposers.base import Proposer
    from autoloop_py.proposers.model_calls import ModelCalls

__all__ = ["get_proposer"]


def get_proposer(
    name: str, *, model: str | None = None, agent_command: str | None = None, max_retries: int = 2,
    limits: CallLimits = CallLimits(), models: ModelCalls | None = None,
) -> Proposer:
    """Returns the proposer called name; raises an AutoloopError listing the valid names for an unknown one.

    models: where the llm proposer's calls are made (the run's model worker; None: in this process).
    """
    if name == "tune":
        from autoloop_py.proposers.tune import TuneProposer

        return TuneProposer()
    if name == "llm":
        from autoloop_py.proposers.llm import LLMProposer

        return LLMProposer(model=model, max_retries=max_retries, limits=limits, models=models)
    if name == "agent":
        from autoloop_py.proposers.agent import AgentProposer

        return AgentProposer(command=agent_command)
    from autoloop_py.program.frontmatter import PROPOSERS

    raise AutoloopError(f"unknown proposer '{name}'; choose one of: {', '.join(PROPOSERS)}")
