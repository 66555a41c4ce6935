"""Tests for autoloop_py.sandbox.environment: what a sandboxed command may see of the environment."""

from __future__ import annotations

from autoloop_py.sandbox.environment import scrub_environment


def test_scrub_environment_keeps_the_allow_list_only() -> None:
    environ = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "PYENV_ROOT": "/p", "RANDOM_THING": "x"}
    assert scrub_environment(environ) == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "PYENV_ROOT": "/p"}


def test_scrub_environment_drops_secrets_even_when_allowed_by_the_env_var() -> None:
    environ = {
        "PATH": "/bin",
        "GITHUB_TOKEN": "t",
        "GH_TOKEN": "t",
        "ACTIONS_RUNTIME_TOKEN": "t",
        "OPENAI_API_KEY": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "DB_PASSWORD": "p",
        "MODEL_NAME": "m",
        "AUTOLOOP_EVAL_ENV": "GITHUB_TOKEN, OPENAI_API_KEY,AWS_SECRET_ACCESS_KEY,DB_PASSWORD,MODEL_NAME",
    }
    assert scrub_environment(environ) == {"PATH": "/bin", "MODEL_NAME": "m"}


def test_scrub_environment_secret_patterns_ignore_case() -> None:
    assert scrub_environment({"my_api_key": "k"}, allow=["my_*"]) == {}


def test_scrub_environment_explicit_allow_keeps_a_secret_but_a_glob_does_not() -> None:
    environ = {"MY_TOKEN": "t", "MY_SETTING": "s", "OTHER": "o"}
    assert scrub_environment(environ, allow=["MY_*"]) == {"MY_SETTING": "s"}
    assert scrub_environment(environ, allow=["MY_*", "MY_TOKEN"]) == {"MY_TOKEN": "t", "MY_SETTING": "s"}


def test_an_evaluation_keeps_the_user_site_the_workflow_installed_autoloop_into() -> None:
    """The generated workflow installs autoloop with PYTHONUSERBASE; an evaluator imports autoloop_py.candidate."""
    assert scrub_environment({"PYTHONUSERBASE": "/w/tmp/autoloop-python"}) == {"PYTHONUSERBASE": "/w/tmp/autoloop-python"}
