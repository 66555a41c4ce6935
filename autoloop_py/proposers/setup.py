"""A proposer's setup: the settings without which no iteration can run (a model litellm can place, its key, an agent).

Checked before an iteration starts, so that a configuration mistake stops the run with one sentence naming
the setting instead of becoming an iteration error that uses up an iteration number and counts toward a pause.
"""

from __future__ import annotations

import logging
import os

from autoloop_py.errors import ConfigurationError
from autoloop_py.program.frontmatter import key_line
from autoloop_py.program.model import Program
from autoloop_py.program.models import ModelSpec
from autoloop_py.proposers import agent, llm
from autoloop_py.proposers.base import Proposer

logger = logging.getLogger(__name__)


def check_setup(proposer: Proposer, program: Program) -> None:
    """Raises ConfigurationError when the llm or agent proposer lacks a setting it needs (other proposers pass)."""
    if isinstance(proposer, llm.LLMProposer):
        if program.config.models and not proposer.model:
            for spec in program.config.models:
                _check_spec(spec, _change(program, None))
            return
        model = llm.resolve_model(program, proposer.model)
        if model is None:
            raise ConfigurationError(
                f"no model configured for the llm proposer: set `model:` in {program.path}'s frontmatter "
                f"(e.g. `model: openai/gpt-4o-mini`), or {llm.MODEL_ENV}, or pass --model"
            )
        check_model(model, _change(program, proposer.model))
    elif isinstance(proposer, agent.AgentProposer):
        if not (proposer.command or os.environ.get(agent.COMMAND_ENV)):
            raise ConfigurationError(agent.NO_COMMAND)


def check_model(model: str, change: str = "pass --model with") -> None:
    """Raises ConfigurationError when litellm cannot place the model, or says its API key is missing.

    change: how the user names another model, completing `…; <change> a provider-prefixed litellm model name`.
    The key is not asked for when AUTOLOOP_MOCK_RESPONSE answers instead of the model.
    """
    problem = provider_problem(model)
    if problem is not None:
        raise ConfigurationError(f"{problem}; {change} a provider-prefixed litellm model name such as openai/gpt-4o-mini")
    if os.environ.get(llm.MOCK_ENV) is not None:
        return
    missing = missing_keys(model)
    if missing:
        raise ConfigurationError(
            f"model '{model}' needs {', '.join(missing)} in the environment; set it, or {change} a litellm model "
            "whose key you have"
        )


def _check_spec(spec: ModelSpec, change: str) -> None:
    """Raises ConfigurationError for a `models:` entry litellm cannot place or whose key variable is unset."""
    if spec.api_key_env is None:
        check_model(spec.name, change)
        return
    problem = provider_problem(spec.name)
    if problem is not None:
        raise ConfigurationError(f"{problem}; {change} a provider-prefixed litellm model name such as openai/gpt-4o-mini")
    if os.environ.get(llm.MOCK_ENV) is None and not os.environ.get(spec.api_key_env):
        raise ConfigurationError(f"model '{spec.name}' reads its key from {spec.api_key_env} (api-key-env), which is not set")


def provider_problem(model: str) -> str | None:
    """Returns why litellm cannot tell the model's provider (None when it can).

    Raises AutoloopError (llm.LITELLM_MISSING) when litellm is not installed.
    """
    litellm = llm.litellm_module()
    try:
        litellm.get_llm_provider(model)
    except Exception as err:  # litellm.BadRequestError: the name has no provider litellm knows
        return f"litellm cannot tell the provider of model '{model}' ({llm.error_line(err)})"
    return None


def missing_keys(model: str) -> list[str]:
    """Returns the API key variables litellm says the model needs and the environment lacks."""
    litellm = llm.litellm_module()
    try:
        found = litellm.validate_environment(model)
    except Exception as err:  # litellm raises assorted errors for models it cannot place
        logger.debug("could not check the environment of %s: %s", model, err)
        return []
    # A missing *_API_BASE has a local default (ollama); only keys are required.
    return [key for key in found.get("missing_keys") or () if not key.endswith("_API_BASE")]


def _change(program: Program, option: str | None) -> str:
    """Returns how to name another model, at the setting this model came from (resolve_model's order)."""
    if program.config.models and not option:
        line = key_line(program.text, "models")
        return f"give the `models:` list at {program.path}{'' if line is None else f':{line}'}"
    if program.config.model:
        line = key_line(program.text, "model")
        return f"set `model:` at {program.path}{'' if line is None else f':{line}'} to"
    if os.environ.get(llm.MODEL_ENV):
        return f"set {llm.MODEL_ENV} to"
    return "pass --model with" if option else "name"

