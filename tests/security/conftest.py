"""Shared arrangement of the attack tests: a repository whose evaluator is hostile, run by `autoloop run`.

Each attack is a real program in `code/evaluate.py` that tries to reach something, prints what it
found in its JSON `error` and on stdout, and says `blocked: …` when it could not. `Hostile.run`
runs `python3 -m autoloop_py run` as its own process (so the runner's hardening applies to it, not
to pytest) with a fake secret in its environment and returns everything that could have leaked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import pytest

from autoloop_py.sandbox.run import bwrap_status
from tests.programs import program_md

PROG = ".autoloop/programs/hostile"
SECRET = "s3cr3t-value-4711"
SECRET_ENV = {"FAKE_TOKEN": SECRET}
VALUE = "# EVOLVE-BLOCK-START\nx = 1.0\n# EVOLVE-BLOCK-END\n"
_PEAK = "autoloop-test-peak-rss-kib="
_MEASURE = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:])\n"
    f"print('{_PEAK}' + str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss), file=sys.stderr)\n"
    "sys.exit(done.returncode)\n"
)


@dataclass(frozen=True)
class Outcome:
    """What one `autoloop run` of a hostile program left behind.

    Attributes:
      process: the finished runner (its stdout and stderr are the log output).
      state: the program's state file on origin's memory branch ("" when none).
      published: every object of the checkout and of origin, decompressed (branches, trace blobs, messages).
      checkout: the user's checkout's `.git/config` and refs, before and after, for comparison.
      peak_rss_kib: the largest resident set of any process of the runner's tree, in KiB.
    """

    process: subprocess.CompletedProcess[str]
    state: str
    published: bytes
    checkout: tuple[bytes, bytes]
    peak_rss_kib: int | None = None

    @property
    def log(self) -> str:
        """Returns everything the runner printed."""
        return self.process.stdout + self.process.stderr

    def leaked(self, value: str) -> list[str]:
        """Returns where value appears among the things that leave the runner."""
        places = {"log output": self.log.encode(), "state file": self.state.encode(), "git objects": self.published}
        return [name for name, data in places.items() if value.encode() in data]


@dataclass
class Hostile:
    """A repository with a bare origin whose program runs `evaluator` as its evaluation."""

    repo: Path
    origin: Path
    run_git: Callable[..., str]

    def install(self, evaluator: str, frontmatter: Mapping[str, object] | None = None) -> None:
        """Commits the program with the hostile evaluator and pushes it."""
        folder = self.repo / PROG
        (folder / "code").mkdir(parents=True, exist_ok=True)
        front = {"evaluation-timeout": 60, **(frontmatter or {})}
        (folder / "program.md").write_text(program_md("Hostile", "Make `x` large.", frontmatter=front))
        (folder / "code/value.py").write_text(VALUE)
        (folder / "code/evaluate.py").write_text(evaluator)
        self.run_git(self.repo, "add", "-A")
        self.run_git(self.repo, "commit", "-qm", "hostile program")
        self.run_git(self.repo, "push", "-q", "origin", "main")

    def run(self, *args: str, env: Mapping[str, str] | None = None, wrap: Sequence[str] = ()) -> Outcome:
        """Runs one iteration through the CLI as a subprocess, the fake secret in its environment.

        wrap: an argv prefix the runner is started under (an outer `timeout`, an outer pids cgroup).
        """
        before = self._checkout()
        # Through a wrapper that reports the largest resident set of the runner's process tree.
        command = [*wrap, sys.executable, "-c", _MEASURE, sys.executable, "-m", "autoloop_py", "run", "--repo",
                   str(self.repo), "--program", "hostile", *args]
        full_env = {**os.environ, **SECRET_ENV, **(env or {})}
        process = subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=300)
        state = subprocess.run(
            ["git", "cat-file", "blob", "memory/autoloop:hostile.md"], cwd=self.origin, capture_output=True, text=True
        ).stdout
        published = self._objects(self.repo) + self._objects(self.origin)
        peak = int(process.stderr.rsplit(_PEAK, 1)[1].split()[0]) if _PEAK in process.stderr else None
        return Outcome(process, state, published, (before, self._checkout()), peak)

    def _objects(self, where: Path) -> bytes:
        done = subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=where, capture_output=True, check=True
        )
        return done.stdout

    def _checkout(self) -> bytes:
        """Returns the checkout's .git/config, its refs and HEAD: they must not change."""
        config = (self.repo / ".git/config").read_bytes()
        refs = subprocess.run(
            ["git", "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/main"],
            cwd=self.repo, capture_output=True, check=True,
        ).stdout  # fmt: skip
        status = subprocess.run(
            ["git", "status", "--porcelain", "--ignored"], cwd=self.repo, capture_output=True, check=True
        ).stdout  # the checkout's files too: nothing written, nothing left
        return config + refs + (self.repo / ".git/HEAD").read_bytes() + status


@pytest.fixture
def hostile(git_repo_with_origin: Path, tmp_path: Path, run_git: Callable[..., str]) -> Hostile:
    """Returns the hostile-program repository (install an evaluator, then run)."""
    return Hostile(git_repo_with_origin, tmp_path / "origin.git", run_git)


@pytest.fixture
def bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes the runs use bubblewrap; skips the test, with the reason, where it cannot create its sandbox."""
    usable, why = bwrap_status()
    if not usable:
        pytest.skip(f"needs a working bubblewrap sandbox: {why}")
    monkeypatch.setenv("AUTOLOOP_ISOLATION", "bwrap")


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """Returns a folder of the test's own that every user may enter (removed afterwards): as root, tmp_path lies in
    a 0700 folder, which a command running as a uid of its own could not even traverse."""
    folder = Path(tempfile.mkdtemp(prefix="open-test-"))
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def assert_recorded_error(outcome: Outcome, *phrases: str) -> None:
    """Asserts the iteration was recorded as an error whose note holds each phrase."""
    assert outcome.process.returncode == 0, outcome.log
    assert "⚠️ Error" in outcome.state or "error" in outcome.state.lower(), outcome.state
    for phrase in phrases:
        assert phrase in outcome.state, f"{phrase!r} not in the state file:\n{outcome.state}"
