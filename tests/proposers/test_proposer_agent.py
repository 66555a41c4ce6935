"""Tests for proposers/agent.py: a tiny external agent run in a real temporary git repository."""

from __future__ import annotations

import os
import random
import shlex
import sys
import time
from pathlib import Path

import pytest

from autoloop_py.program.frontmatter import ProgramConfig
from autoloop_py.program.model import Evaluation, Program
from autoloop_py.program.target import Target
from autoloop_py.proposers.agent import NO_COMMAND, AgentProposer, agent_environment, over_caps
from autoloop_py.proposers.base import ProposalRequest
from autoloop_py.sandbox.policy import SandboxPolicy
from autoloop_py.sandbox.process import CommandResult

PYTHON = shlex.quote(sys.executable)

AGENT = """
import os, pathlib
prompt = pathlib.Path(os.environ["AUTOLOOP_PROMPT_FILE"]).read_text()
pathlib.Path("code.py").write_text("x = 2  # " + prompt + "\\n")
pathlib.Path("sub").mkdir()
pathlib.Path("sub/new.py").write_text("y = 1\\n")
pathlib.Path("README.md").unlink()
pathlib.Path(os.environ["AUTOLOOP_REPLY_FILE"]).write_text("SUMMARY: set x to two\\nLESSON: small steps\\n")
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AUTOLOOP_AGENT_COMMAND", "AUTOLOOP_AGENT_TIMEOUT", "AUTOLOOP_AGENT_ENV", "AUTOLOOP_EVAL_ENV"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def repo(git_repo: Path, run_git) -> Path:  # type: ignore[no-untyped-def]
    (git_repo / "code.py").write_text("x = 1\n")
    run_git(git_repo, "add", "code.py")
    run_git(git_repo, "commit", "-q", "-m", "code")
    return git_repo


def _request(workdir: Path, sandbox: SandboxPolicy | None = None) -> ProposalRequest:
    program = Program(
        name="demo",
        path=Path("program.md"),
        directory=None,
        goal="g",
        target=Target(("code.py",)),
        evaluation=Evaluation("python eval.py", "score", 1),
        strategy_text="",
        config=ProgramConfig(),
        unconfigured=False,
        text="",
    )
    return ProposalRequest(program, {"code.py": "x = 1\n"}, "be better", workdir, 1, sandbox=sandbox)


def _script(tmp_path: Path, body: str) -> str:
    script = tmp_path / "agent.py"
    script.write_text(body)
    return f"{PYTHON} {shlex.quote(str(script))}"


def test_agent_changes_are_collected_with_its_summary(repo: Path, tmp_path: Path) -> None:
    proposal = AgentProposer(command=_script(tmp_path, AGENT)).propose(_request(repo), random.Random(0))
    assert proposal.failure is None
    assert proposal.files == {"code.py": "x = 2  # be better\n", "sub/new.py": "y = 1\n", "README.md": None}
    assert (proposal.summary, proposal.lesson) == ("set x to two", "small steps")
    assert proposal.transcript[0] == ("user", "be better")


def test_prompt_file_placeholder_and_default_summary(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOLOOP_AGENT_COMMAND", "cp {prompt_file} copied.md")
    proposal = AgentProposer().propose(_request(repo), random.Random(0))
    assert proposal.files == {"copied.md": "be better"}
    assert proposal.summary == "agent: changed copied.md"
    assert not any(p.name.startswith("autoloop-agent") for p in repo.iterdir())


def test_the_agent_works_in_a_standalone_copy(repo: Path, tmp_path: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    head = run_git(repo, "rev-parse", "HEAD")
    where = tmp_path / "where.txt"
    where.write_text("")  # a file the command names exists: inside the sandbox it stays writable to the agent
    # It may commit in its scratch repository: the change is read from the files, the user's repo is untouched.
    command = (f"pwd > {where}; git rev-parse --git-common-dir >> {where}; echo 'x = 3' > code.py && git add code.py "
               "&& git -c user.name=a -c user.email=a@b commit -qm agent")
    proposal = AgentProposer(command=command).propose(_request(repo), random.Random(0))
    assert proposal.files == {"code.py": "x = 3\n"} and proposal.problems == ()
    assert run_git(repo, "rev-parse", "HEAD") == head and (repo / "code.py").read_text() == "x = 1\n"
    assert run_git(repo, "status", "--porcelain") == ""
    cwd, common = where.read_text().split()
    assert Path(cwd) != repo and common == ".git"
    assert not Path(cwd).exists()  # removed afterwards


def test_links_and_git_paths_are_problems_and_caches_are_dropped(repo: Path) -> None:
    command = ("ln -s /etc/passwd code.py.link && mkdir -p __pycache__ && echo c > __pycache__/code.pyc "
               "&& mkdir -p vendor/.git && echo x > vendor/.git/HEAD")
    proposal = AgentProposer(command=command).propose(_request(repo), random.Random(0))
    assert proposal.failure is None and proposal.files == {}
    assert [p.split(" ", 1)[0] for p in proposal.problems] == ["code.py.link", "vendor/.git/HEAD"]


def test_failing_command_reports_stderr_tail(repo: Path) -> None:
    command = "echo starting; echo 'Traceback' >&2; echo 'model quota exceeded' >&2; exit 3"
    proposal = AgentProposer(command=command).propose(_request(repo), random.Random(0))
    assert proposal.files == {}
    assert proposal.failure == "the agent command exited with status 3: Traceback / model quota exceeded"
    assert "starting" in proposal.transcript[1][1]


def test_no_command_and_no_change_are_failures(repo: Path) -> None:
    assert AgentProposer().propose(_request(repo), random.Random(0)).failure == NO_COMMAND
    assert "AUTOLOOP_AGENT_COMMAND" in NO_COMMAND
    unchanged = AgentProposer(command="true").propose(_request(repo), random.Random(0))
    assert unchanged.failure == "the agent changed no files"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_timeout_kills_the_agent_and_its_children(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOLOOP_AGENT_TIMEOUT", "1")
    # The child's pid on stdout (as root the agent runs as a uid of its own, which cannot write into tmp_path).
    command = "sleep 30 & echo child=$!; wait"
    started = time.monotonic()
    # Unsandboxed, so that the child's pid is one of ours (with bwrap its pid namespace dies with it anyway).
    proposal = AgentProposer(command=command).propose(_request(repo, SandboxPolicy()), random.Random(0))
    assert time.monotonic() - started < 10
    assert proposal.failure == "the agent did not finish within 1 s; its process group was killed"
    child = int(proposal.transcript[-1][1].split("child=", 1)[1].split()[0])
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_secrets_are_absent_unless_allowed(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("GH_TOKEN", "gh-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("AUTOLOOP_AGENT_ENV", "OPENAI_API_KEY")
    dump = tmp_path / "env.txt"
    dump.write_text("")  # a file the command names exists: inside the sandbox it stays writable to the agent
    proposal = AgentProposer(command=f"env > {shlex.quote(str(dump))}; echo x > code.py").propose(
        _request(repo), random.Random(0)
    )
    assert proposal.failure is None
    seen = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert "GITHUB_TOKEN" not in seen and "GH_TOKEN" not in seen and "ANTHROPIC_API_KEY" not in seen
    assert seen["OPENAI_API_KEY"] == "sk-openai"
    assert seen["AUTOLOOP_PROMPT_FILE"].endswith("prompt.md") and "AUTOLOOP_REPLY_FILE" in seen


def test_agent_environment_adds_file_paths() -> None:
    env = agent_environment({"PATH": "/bin", "GITHUB_TOKEN": "x"}, Path("/t/p.md"), Path("/t/r.md"))
    assert env == {"PATH": "/bin", "AUTOLOOP_PROMPT_FILE": "/t/p.md", "AUTOLOOP_REPLY_FILE": "/t/r.md"}
    assert os.environ.get("AUTOLOOP_AGENT_ENV") is None


def test_a_run_over_a_cap_is_named_by_it() -> None:
    ran = CommandResult(0, "", "", False, 1.0)
    assert over_caps(ran, 10, 16) == ""
    over = over_caps(ran, 17, 16)
    assert over == "the agent left 17 more bytes in its copy, over the program's `max-disk` of 16 bytes"
    killed = CommandResult(-9, "", "", False, 1.0, memory_cap=1 << 28)
    assert "killed at the program's `max-memory` of 268435456 bytes" in over_caps(killed, 0, 16)
    refused = CommandResult(1, "", "Traceback ...\nMemoryError\n", False, 1.0, memory_rlimit=1 << 28)
    assert "out of memory at the program's `max-memory` of 268435456 bytes per process" in over_caps(refused, 0, 16)
    assert over_caps(CommandResult(1, "", "MemoryError", False, 1.0), 0, 16) == ""  # no cap held it: its own failure
