"""The runner's git is hardened: planted hooks, fsmonitor, includes and `ext::` remotes never run, its
environment holds no secret unless the command reaches a remote, and pushes are compare-and-swap of its own shas."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.git import command as gitutil
from autoloop_py.loop.checkout.workspace import Workspace
from autoloop_py.state.memory import MemoryStore

HOOKS = ("pre-commit", "post-commit", "commit-msg", "reference-transaction", "post-checkout", "post-index-change",
         "pre-push", "pre-auto-gc")


@pytest.fixture
def planted(git_repo_with_origin: Path, tmp_path: Path, run_git) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """Returns (repository, marker): every hook, an fsmonitor, a hooksPath and an include run a payload."""
    marker = tmp_path / "PAYLOAD-RAN"
    payload = tmp_path / "payload.sh"
    payload.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\n')
    payload.chmod(0o755)
    git_dir = git_repo_with_origin / ".git"
    for hook in HOOKS:
        (git_dir / "hooks" / hook).write_text(f"#!/bin/sh\n{payload} {hook}\n")
        (git_dir / "hooks" / hook).chmod(0o755)
    (tmp_path / "evil.cfg").write_text(f"[core]\n\tfsmonitor = {payload}\n\thooksPath = {git_dir / 'hooks'}\n")
    run_git(git_repo_with_origin, "config", "include.path", str(tmp_path / "evil.cfg"))
    run_git(git_repo_with_origin, "config", "core.fsmonitor", str(payload))
    return git_repo_with_origin, marker


def test_planted_hooks_and_fsmonitor_never_run_for_the_runner(planted: tuple[Path, Path]) -> None:
    repo, marker = planted
    with Workspace(repo, "demo") as workspace:
        workspace.prepare()
        workspace.write({"a.txt": "a\n"})
        assert workspace.changed_paths() == ["a.txt"]
        workspace.commit_candidate("a")
        workspace.push()
    memory = MemoryStore(repo)
    memory.sync()
    memory.update("demo.md", lambda old: "state\n", "record")
    gitutil.run(gitutil.open_repo(repo), "status")
    assert not marker.exists(), marker.read_text()


def test_an_ext_remote_never_runs_a_command(git_repo: Path, tmp_path: Path, run_git) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "EXT-RAN"
    run_git(git_repo, "remote", "add", "evil", f"ext::sh -c touch% {marker}")
    result = gitutil.call(gitutil.open_repo(git_repo), "ls-remote", "evil")
    assert not result.ok and not marker.exists()


def test_local_commands_see_no_secret_and_no_outside_git_dir(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_git  # type: ignore[no-untyped-def]
) -> None:
    # A clean filter from the repository's own config would run on `git add` and dump its environment: it does not
    # run; the environment the runner hands git is read where it starts the process.
    dump = tmp_path / "env.txt"
    run_git(git_repo, "config", "filter.dump.clean", f"env > {dump}; cat")
    (git_repo / ".gitattributes").write_text("*.txt filter=dump\n")
    (git_repo / "a.txt").write_text("a\n")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret_value")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/tmp/evil'")
    seen: list[dict[str, str]] = []
    real_run = gitutil.subprocess.run

    def spy(command, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(dict(kwargs["env"]))
        return real_run(command, **kwargs)

    monkeypatch.setattr(gitutil.subprocess, "run", spy)
    gitutil.run(gitutil.open_repo(git_repo), "add", "a.txt")
    assert not dump.exists()
    assert seen and all("GITHUB_TOKEN" not in env and "OPENAI_API_KEY" not in env for env in seen)
    assert all(env["GIT_DIR"] == str((git_repo / ".git").resolve()) for env in seen)
    assert all("GIT_CONFIG_PARAMETERS" not in env and env["GIT_CONFIG_NOSYSTEM"] == "1" for env in seen)


def test_network_commands_get_what_authentication_needs() -> None:
    environ = {"PATH": "/bin", "GH_TOKEN": "t", "SSH_AUTH_SOCK": "/s", "OPENAI_API_KEY": "k", "GIT_DIR": "/x"}
    assert gitutil.git_environment(environ, network=True).keys() >= {"GH_TOKEN", "SSH_AUTH_SOCK", "PATH"}
    local = gitutil.git_environment(environ)
    assert "GH_TOKEN" not in local and "SSH_AUTH_SOCK" not in local
    assert "OPENAI_API_KEY" not in gitutil.git_environment(environ, network=True)
    assert "GIT_DIR" not in gitutil.git_environment(environ, network=True)


def test_push_is_compare_and_swap_of_a_descendant(
    git_repo_with_origin: Path, run_git  # type: ignore[no-untyped-def]
) -> None:
    repo = gitutil.open_repo(git_repo_with_origin)
    origin = git_repo_with_origin.parent / "origin.git"
    base = run_git(git_repo_with_origin, "rev-parse", "main")
    run_git(git_repo_with_origin, "commit", "-q", "--allow-empty", "-m", "next")
    child = run_git(git_repo_with_origin, "rev-parse", "HEAD")
    forged = run_git(git_repo_with_origin, "commit-tree", f"{base}^{{tree}}", "-m", "forged")
    # Not a descendant of what the runner saw: refused before anything is sent.
    assert not gitutil.push_branch(repo, "origin", forged, "main", base).ok
    # A stale expectation (the remote is at base, not at child): the lease refuses.
    assert not gitutil.push_branch(repo, "origin", child, "main", child).ok
    # The branch must not exist yet, but does.
    assert not gitutil.push_branch(repo, "origin", child, "main", None).ok
    assert run_git(origin, "rev-parse", "main") == base
    assert gitutil.push_branch(repo, "origin", child, "main", base).ok
    assert run_git(origin, "rev-parse", "main") == child
    assert run_git(git_repo_with_origin, "rev-parse", "origin/main") == child
    # Already there (another run sharing this clone pushed it): done, whatever the stale expectation said.
    assert gitutil.push_branch(repo, "origin", child, "main", base).ok


PLANT_GIT = """\
import json, pathlib, subprocess
here = pathlib.Path.cwd()
root = next(p for p in [here, *here.parents] if (p / ".autoloop").is_dir())
if not (root / ".git").exists():  # a repository in its own copy, whose fsmonitor is a command of the attacker's
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", ".autoloop"], check=True)
    subprocess.run(["git", "-C", str(root), "config", "core.fsmonitor", "echo escaped > {marker}; false #"], check=True)
print(json.dumps({{"score": 1.0}}))
"""


def test_a_git_repository_planted_by_the_evaluation_runs_nothing_as_the_runner(
        hostile, bwrap: None, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The runner reads back the protected files of the evaluated copy; a git started there would run the fsmonitor.
    marker = tmp_path / "ESCAPED"
    hostile.install(PLANT_GIT.format(marker=marker))
    outcome = hostile.run()
    assert outcome.process.returncode == 0, outcome.log
    assert "Iteration 1" in outcome.state and "git init" not in outcome.log
    assert not marker.exists()
    assert outcome.checkout[0] == outcome.checkout[1]
