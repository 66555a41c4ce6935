"""The agent proposer: an external coding agent edits a standalone copy of the tree; what it changed is the candidate.

The copy shares nothing writable with the user's checkout or any `.git` of theirs. It is a throwaway git
repository (agents such as Codex or Aider expect one), snapshotted before the agent starts; its changes
are read back by comparing file contents with that snapshot after the agent's whole process group is dead.
"""

from __future__ import annotations

import logging
import os
import random
import shlex
from pathlib import Path
from typing import Mapping

from autoloop_py.program.reply import reply_field, summary_and_lesson
from autoloop_py.proposers.base import Proposal, ProposalRequest
from autoloop_py.sandbox import candidate_dir
from autoloop_py.sandbox.environment import scrub_environment
from autoloop_py.sandbox.memory_cgroup import REFUSED_ALLOCATION
from autoloop_py.sandbox.policy import SandboxPolicy
from autoloop_py.sandbox.process import CommandResult
from autoloop_py.sandbox.run import named_files, run_isolation, run_sandboxed

logger = logging.getLogger(__name__)

COMMAND_ENV = "AUTOLOOP_AGENT_COMMAND"
TIMEOUT_ENV = "AUTOLOOP_AGENT_TIMEOUT"
ALLOW_ENV = "AUTOLOOP_AGENT_ENV"
PROMPT_FILE_ENV = "AUTOLOOP_PROMPT_FILE"
REPLY_FILE_ENV = "AUTOLOOP_REPLY_FILE"
DEFAULT_TIMEOUT = 1800.0
NO_COMMAND = f"no agent command: set {COMMAND_ENV} (or pass --agent-command)"
_TAIL_CHARS = 2000
_FAILURE_LINES = 5
_REPLY_BYTES = 100_000
_FAILURE_CHARS = 500


class AgentProposer:
    """Proposes candidates by running an external coding agent in the worktree."""

    name = "agent"

    def __init__(self, command: str | None = None, timeout: float | None = None) -> None:
        self.command = command
        self.timeout = timeout

    def propose(self, request: ProposalRequest, rng: random.Random) -> Proposal:
        """Runs the agent on the prompt and returns every file it changed, or why it failed."""
        command = self.command or os.environ.get(COMMAND_ENV)
        if not command:
            return Proposal({}, "agent: no command", failure=NO_COMMAND)
        timeout = self.timeout if self.timeout is not None else _env_timeout()
        if timeout is None:
            return Proposal({}, "agent: bad timeout", failure=f"{TIMEOUT_ENV} must be a number of seconds")
        with candidate_dir.copy_of(request.workdir, prefix="autoloop-agent-") as tree:
            candidate_dir.init_scratch_repo(tree)
            before = candidate_dir.snapshot(tree)
            files_dir = tree.parent / "exchange"
            files_dir.mkdir()
            prompt_file, reply_file = files_dir / "prompt.md", files_dir / "reply.md"
            prompt_file.write_text(request.prompt, encoding="utf-8")
            held = candidate_dir.disk_bytes(tree.parent)
            # run_sandboxed kills the agent's whole group (and marked strays) before it returns.
            sandbox = request.sandbox or run_isolation(request.workdir, request.program).agent
            result = _run(command, tree, prompt_file, reply_file, timeout, sandbox)
            reply = _reply(reply_file)
            transcript = (("user", request.prompt), ("agent", _tail(result.stdout + result.stderr)))
            if result.escaped:
                failure = f"the agent broke its confinement: {result.escaped}"
                return Proposal({}, "agent: left its sandbox", failure=failure, transcript=transcript)
            over = over_caps(result, candidate_dir.disk_bytes(tree.parent) - held, request.program.config.max_disk)
            if over:
                return Proposal({}, "agent: over a cap", failure=over, transcript=transcript)
            if result.timed_out:
                failure = f"the agent did not finish within {timeout:g} s; its process group was killed"
                return Proposal({}, "agent: timed out", failure=failure, transcript=transcript)
            if result.returncode != 0:
                failure = f"the agent command exited with status {result.returncode}: {_last_lines(result)}"
                return Proposal({}, "agent: command failed", failure=failure, transcript=transcript)
            changed = candidate_dir.changes(before, tree, request.program.config.max_file_bytes)
        return _collect(changed, reply, transcript)


def over_caps(result: CommandResult, disk: int, max_disk: int) -> str:
    """Returns why the agent's run crossed a cap ('' when it did not): killed at `max-memory`, or what it added to its
    copy and prompt folder (`disk` bytes when it ended) over `max-disk`."""
    if result.memory_cap is not None:
        return (f"the agent was killed at the program's `max-memory` of {result.memory_cap} bytes (its processes "
                "together, a memory cgroup)")
    said = result.stdout[-_TAIL_CHARS:] + result.stderr[-_TAIL_CHARS:]
    if result.memory_rlimit is not None and result.returncode != 0 and any(sign in said for sign in REFUSED_ALLOCATION):
        return (f"the agent ran out of memory at the program's `max-memory` of {result.memory_rlimit} bytes per "
                "process (RLIMIT_AS: no memory cgroup can be made here)")
    if disk > max_disk:
        return f"the agent left {disk} more bytes in its copy, over the program's `max-disk` of {max_disk} bytes"
    return ""


def _reply(reply_file: Path) -> str:
    """Returns the agent's reply file, read without following a link it may have put there."""
    if reply_file.is_symlink() or not reply_file.is_file():
        return ""
    with reply_file.open("rb") as handle:  # only what is shown: a huge reply file is never read whole
        return handle.read(_REPLY_BYTES).decode("utf-8", errors="replace")


def _collect(changed: candidate_dir.Changes, reply: str, transcript: tuple[tuple[str, str], ...]) -> Proposal:
    """Returns the proposal made of the agent's changes to its copy and its reply file."""
    if changed.dropped:
        logger.info("agent: left out %d cache file(s), e.g. %s", len(changed.dropped), changed.dropped[0])
    if not changed.files and not changed.problems:
        return Proposal({}, "agent: no change", failure="the agent changed no files", transcript=transcript)
    summary, lesson = summary_and_lesson(reply)
    named = [problem.split(" ", 1)[0] for problem in changed.problems]  # the path each problem names first
    summary = summary or "agent: changed " + ", ".join(sorted([*changed.files, *named]))
    return Proposal(
        changed.files, summary, lesson, transcript=transcript, approach=reply_field(reply, "approach"),
        problems=changed.problems,
    )


def _run(
    command: str, workdir: Path, prompt_file: Path, reply_file: Path, timeout: float, sandbox: SandboxPolicy
) -> CommandResult:
    """Runs the agent command confined by sandbox (its prompt/reply folder writable too), env scrubbed."""
    expanded = command.replace("{prompt_file}", shlex.quote(str(prompt_file)))
    expanded = expanded.replace("{reply_file}", shlex.quote(str(reply_file)))
    logger.info("agent: running %s in %s", expanded, workdir)
    env = agent_environment(os.environ, prompt_file, reply_file)
    # The files the operator's command names (a script and its own state) stay writable to it.
    writable = [prompt_file.parent, *map(Path, named_files(command))]
    return run_sandboxed(expanded, workdir, sandbox, env=env, timeout=timeout, writable=writable)


def agent_environment(environ: Mapping[str, str], prompt_file: Path, reply_file: Path) -> dict[str, str]:
    """Returns the agent's environment: scrubbed of secrets except those AUTOLOOP_AGENT_ENV names, plus file paths."""
    allowed = [name.strip() for name in environ.get(ALLOW_ENV, "").split(",") if name.strip()]
    env = scrub_environment(environ, allow=allowed)
    env[PROMPT_FILE_ENV] = str(prompt_file)
    env[REPLY_FILE_ENV] = str(reply_file)
    return env


def _env_timeout() -> float | None:
    """Returns AUTOLOOP_AGENT_TIMEOUT in seconds (default 1800), or None when it is not a positive number."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value > 0 else None


def _last_lines(result: CommandResult) -> str:
    """Returns the last few lines of stderr (else stdout) on one line, for the iteration record."""
    lines = [line.strip() for line in (result.stderr.strip() or result.stdout).splitlines() if line.strip()]
    text = " / ".join(lines[-_FAILURE_LINES:]) or "no output"
    return text if len(text) <= _FAILURE_CHARS else "..." + text[-_FAILURE_CHARS:]


def _tail(text: str) -> str:
    """Returns the last couple of thousand characters of text."""
    return text if len(text) <= _TAIL_CHARS else "..." + text[-_TAIL_CHARS:]
