"""A proposer's setup: the settings without which no iteration can run (a model litellm can place, its key, an agent).

Checked before an iteration records anything, so that a configuration mistake stops the run with one sentence
naming the setting instead of becoming an iteration error that uses up an iteration number and counts toward a
pause. The run starts the checks (start_setup_check) before its baseline evaluation and waits for them after it:
in the model worker, litellm's import and the checks overlap the evaluation.
"""

from __future__ import annotations

import os
from typing import Callable

from autoloop_py.errors import ConfigurationError
from autoloop_py.program.frontmatter import key_line
from autoloop_py.program.model import Program
from autoloop_py.proposers import llm
from autoloop_py.proposers.base import Proposer
from autoloop_py.proposers.model_calls import InProcess, ModelCalls


def start_setup_check(proposer: Proposer, program: Program) -> Callable[[], None]:
    """Starts the checks that the llm or agent proposer has the settings it needs (in the proposer's model worker,
    when it has one); returns the call that waits for them and raises ConfigurationError for a missing one."""
    if isinstance(proposer, llm.LLMProposer):
        models = proposer.models
        if program.config.models and not proposer.model:
            change = _change(program, None)
            return _start_models([(spec.name, spec.api_key_env) for spec in program.config.models], change, models)
        model = llm.resolve_model(program, proposer.model)
        if model is None:
            raise ConfigurationError(
                f"no model configured for the llm proposer: set `model:` in {program.path}'s frontmatter "
                f"(e.g. `model: openai/gpt-4o-mini`), or {llm.MODEL_ENV}, or pass --model"
            )
        return _start_models([(model, None)], _change(program, proposer.model), models)
    from autoloop_py.proposers import agent  # here: a run with the llm proposer never loads the agent's

    if isinstance(proposer, agent.AgentProposer):
        if not (proposer.command or os.environ.get(agent.COMMAND_ENV)):
            raise ConfigurationError(agent.NO_COMMAND)
    return lambda: None


def check_model(model: str, change: str = "pass --model with") -> None:
    """Raises ConfigurationError when litellm cannot place the model, or says its API key is missing.

    change: how the user names another model, completing `…; <change> a provider-prefixed litellm model name`.
    The key is not asked for when AUTOLOOP_MOCK_RESPONSE answers instead of the model.
    """
    _start_models([(model, None)], change, InProcess())()


def _start_models(entries: list[tuple[str, str | None]], change: str, models: ModelCalls) -> Callable[[], None]:
    """Starts the check of each (model, the variable holding its key, for a `models:` entry that names one); returns
    the call that waits for each in turn and raises ConfigurationError for the first problem found."""
    started = [(model, key_env, models.check(model)) for model, key_env in entries]

    def settle() -> None:
        for model, key_env, found in started:
            check = found()
            if check.problem is not None:
                raise ConfigurationError(
                    f"{check.problem}; {change} a provider-prefixed litellm model name such as openai/gpt-4o-mini")
            if os.environ.get(llm.MOCK_ENV) is not None:
                continue
            if key_env is not None and not os.environ.get(key_env):
                raise ConfigurationError(
                    f"model '{model}' reads its key from {key_env} (api-key-env), which is not set")
            if key_env is None and check.missing:
                raise ConfigurationError(
                    f"model '{model}' needs {', '.join(check.missing)} in the environment; set it, or {change} a "
                    "litellm model whose key you have"
                )

    return settle


def provider_problem(model: str) -> str | None:
    """Returns why litellm cannot tell the model's provider (None when it can).

    Raises AutoloopError (llm.LITELLM_MISSING) when litellm is not installed.
    """
    return InProcess().check(model)().problem


def missing_keys(model: str) -> list[str]:
    """Returns the API key variables litellm says the model needs and the environment lacks."""
    return list(InProcess().check(model)().missing)


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

