"""Shared fixtures: real temporary git repositories, isolated from the user's git config."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import settings

# Property tests check what holds, not how fast: a per-example deadline only measures the machine's load (speed
# targets live in benchmarks/).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

GitRunner = Callable[..., str]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` starts two workers per core: much of the suite's time is spent waiting on other processes (git,
    act, sandboxed evaluations, loopback servers), not computing (with 1.5 per core the cores were busy 79 %).

    PYTEST_XDIST_AUTO_NUM_WORKERS, when set, decides instead (xdist's own hook reads it), as it does without this one.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 2 * len(os.sched_getaffinity(0))


def _git(cwd: Path, *args: str) -> str:
    """Runs git in `cwd` and returns its stripped stdout; fails the test on a non-zero exit."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {done.stderr}")
    return done.stdout.strip()


@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keeps the caller's COLUMNS/LINES (pytest-xdist sets 80x24) from narrowing the CLI's tables."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


# The tests that attack or check a root runner's uid per evaluation (sandbox/slot_user.py) run with it on.
_OWN_UID_TESTS = ("security", "sandbox", "proposers")


@pytest.fixture(autouse=True)
def _evaluations_reach_tmp_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, `isolation: none` runs each evaluation and agent as a uid of its own, which cannot enter tmp_path
    (pytest keeps it in a 0700 folder of root's); the tests that talk to their evaluations through tmp_path (logs,
    pids, agent scripts) run them as root, as a runner with AUTOLOOP_SLOT_USER=off does."""
    folder = Path(str(request.node.path)).parent
    if not any(part in _OWN_UID_TESTS for part in folder.relative_to(Path(__file__).parent).parts):
        monkeypatch.setenv("AUTOLOOP_SLOT_USER", "off")


@pytest.fixture
def run_git() -> GitRunner:
    """Returns a function `run_git(cwd, *args) -> stdout` for arranging and inspecting repos."""
    return _git


@pytest.fixture
def isolated_git_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hides the global and system git config (identity, signing, hooks) from git run by the test."""
    empty = tmp_path_factory.mktemp("gitconfig") / "config"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{name}_NAME", raising=False)
        monkeypatch.delenv(f"GIT_{name}_EMAIL", raising=False)


def _identify(repo: Path) -> None:
    """Configures a local user identity in `repo`."""
    _git(repo, "config", "user.name", "Test User")
    _git(repo, "config", "user.email", "test@example.invalid")


@pytest.fixture
def git_repo(tmp_path: Path, isolated_git_config: None) -> Path:
    """Returns a repository with one commit (README.md) on `main` and a local user identity."""
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    _identify(repo)
    (repo / "README.md").write_text("# repo\n")
    _git(repo, "add", "README.md")
    _git(repo, "commit", "-q", "-m", "initial")
    return repo


@pytest.fixture
def git_repo_with_origin(git_repo: Path, tmp_path: Path) -> Path:
    """Returns `git_repo` with a bare `origin` (at tmp_path/origin.git) that main was pushed to."""
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(git_repo, "remote", "add", "origin", str(origin))
    _git(git_repo, "push", "-q", "-u", "origin", "main")
    return git_repo


@pytest.fixture
def clone_origin(git_repo_with_origin: Path, tmp_path: Path) -> Callable[[str], Path]:
    """Returns a function `clone_origin(name)` that clones origin into tmp_path/<name> with an identity."""

    def clone(name: str) -> Path:
        target = tmp_path / name
        _git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), str(target))
        _identify(target)
        return target

    return clone


class _IndexInstall:
    """A distribution pip installed from a package index: it has no direct_url.json."""

    version = "0.1.0"

    def read_text(self, name: str) -> str | None:
        return None


@pytest.fixture
def installed_from_an_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes `autoloop init` see an autoloop installed from an index (the tests run an editable checkout)."""
    from autoloop_py.commands import ci_install

    monkeypatch.setattr(ci_install.metadata, "distribution", lambda name: _IndexInstall())
