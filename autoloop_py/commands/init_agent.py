"""The agent of `autoloop init --proposer agent`: its command, its install step and the credentials it may see.

The propose job installs the agent before any secret is in a step; the proposing step maps the agent's
secrets into its environment and names them in AUTOLOOP_AGENT_ENV, the only secrets the agent proposer
passes through its scrubbed environment.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from typing import Any

from autoloop_py.errors import AutoloopError

# The provider keys the proposing step holds for every proposer.
PROVIDER_SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AZURE_API_KEY")
# GitHub's rule for secret names (and no GITHUB_ prefix, which it reserves).
_SECRET_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A `${{` would be read by GitHub as an expression; a line break would end the YAML value.
_UNSAFE = ("${{", "}}", "\n", "\r")


@dataclass(frozen=True)
class AgentSetup:
    """What the propose job does for an external agent.

    Attributes:
      command: the agent command when the AUTOLOOP_AGENT_COMMAND repository variable is unset (None: none).
      install: the shell command of the "Install the agent" step (None: a commented placeholder).
      env: the secrets the agent sees (AUTOLOOP_AGENT_ENV); empty: the AUTOLOOP_AGENT_ENV variable decides.
    """

    command: str | None = None
    install: str | None = None
    env: tuple[str, ...] = ()


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds --agent-command, --agent-install and --agent-env (for --proposer agent)."""
    parser.add_argument("--agent-command", metavar="CMD",
                        help="the agent's command when the AUTOLOOP_AGENT_COMMAND variable is unset (--proposer agent)")
    parser.add_argument("--agent-install", metavar="CMD",
                        help="the workflow step that installs the agent, e.g. 'npm install -g @openai/codex'")
    parser.add_argument("--agent-env", metavar="NAME[,NAME]",
                        help="the repository secrets the agent sees, e.g. OPENAI_API_KEY (AUTOLOOP_AGENT_ENV)")


def agent_setup_from(args: argparse.Namespace, proposer: str) -> AgentSetup:
    """Returns the checked agent flags; raises AutoloopError naming the bad flag."""
    given = {"--agent-command": args.agent_command, "--agent-install": args.agent_install,
             "--agent-env": args.agent_env}
    used = [flag for flag, value in given.items() if value is not None]
    if used and proposer != "agent":
        raise AutoloopError(f"{', '.join(used)} need --proposer agent")
    for flag in ("--agent-command", "--agent-install"):
        value = given[flag]
        if value is not None and (not value.strip() or any(part in value for part in _UNSAFE)):
            raise AutoloopError(f"{flag} {value!r} must be one line of shell, without `${{{{` or `}}}}`")
    names = tuple(name.strip() for name in (args.agent_env or "").split(",") if name.strip())
    for name in names:
        if not _SECRET_RE.match(name) or name.upper().startswith("GITHUB_"):
            raise AutoloopError(f"--agent-env {name!r} is not a repository secret name (letters, digits, _; "
                                "not GITHUB_…)")
    return AgentSetup(command=args.agent_command, install=args.agent_install, env=tuple(dict.fromkeys(names)))


def agent_words(setup: AgentSetup) -> list[str]:
    """Returns the `autoloop init` flags that give setup again."""
    words: list[str] = []
    if setup.command is not None:
        words += ["--agent-command", setup.command]
    if setup.install is not None:
        words += ["--agent-install", setup.install]
    if setup.env:
        words += ["--agent-env", ",".join(setup.env)]
    return words


def agent_context(setup: AgentSetup) -> dict[str, Any]:
    """Returns the workflow template's agent values, each a YAML scalar ready to write."""
    fallback = f" || '{setup.command.replace(chr(39), chr(39) * 2)}'" if setup.command else ""
    return {
        "agent_command": json.dumps(f"${{{{ vars.AUTOLOOP_AGENT_COMMAND{fallback} }}}}"),
        "agent_install": json.dumps(setup.install) if setup.install is not None else None,
        "agent_env": json.dumps(",".join(setup.env)) if setup.env else "${{ vars.AUTOLOOP_AGENT_ENV }}",
        "agent_secrets": [name for name in setup.env if name not in PROVIDER_SECRETS],
    }
