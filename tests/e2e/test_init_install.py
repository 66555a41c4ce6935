"""End to end: the pip spec `autoloop init` writes installs autoloop, from what pip recorded of its origin.

autoloop is installed into a scratch venv from a git repository served over loopback HTTP (git's dumb
protocol), so pip writes a real `direct_url.json`; `autoloop init` reads that record and writes the
workflow; the workflow's spec is then installed into a second venv. Both installs use
`--no-deps --no-build-isolation`, so nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import functools
import http.server
import importlib.metadata
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml

from autoloop_py.cli import main
from autoloop_py.commands import init as init_command

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def served_source(tmp_path: Path, run_git: Callable[..., str]) -> Iterator[tuple[str, str]]:
    """Returns (clone URL on 127.0.0.1, commit) of a git repository holding this package's source."""
    source = tmp_path / "served" / "autoloop_py.git"
    work = tmp_path / "source"
    work.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, work / name)
    shutil.copytree(REPO / "autoloop_py", work / "autoloop_py", ignore=shutil.ignore_patterns("__pycache__"))
    run_git(tmp_path, "init", "-q", "-b", "main", str(work))
    run_git(work, "add", "-A")
    run_git(work, "-c", "user.name=t", "-c", "user.email=t@e.invalid", "commit", "-qm", "autoloop source")
    commit = run_git(work, "rev-parse", "HEAD")
    run_git(tmp_path, "clone", "-q", "--bare", str(work), str(source))
    run_git(source, "update-server-info")  # what git's dumb HTTP protocol reads
    handler = functools.partial(QuietHandler, directory=str(source.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{source.name}", commit
    finally:
        server.shutdown()
        thread.join(timeout=10)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files without logging each request to stderr."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 -- the base class's name
        pass


def venv(where: Path) -> Path:
    """Returns the python of a new venv that sees this interpreter's packages (setuptools for the build)."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(where)], check=True, timeout=300)
    return where / "bin" / "python"


def pip_install(python: Path, spec: str) -> subprocess.CompletedProcess[str]:
    """Installs spec with pip, offline apart from the loopback server."""
    command = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
               "--no-index", "--disable-pip-version-check", spec]
    return subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(python.parents[2]), "PIP_NO_CACHE_DIR": "1"})


def installed(python: Path) -> importlib.metadata.Distribution:
    """Returns the autoloop-py distribution installed in the venv of python."""
    found = sorted((python.parents[1] / "lib").glob("python*/site-packages/autoloop_py-*.dist-info"))
    assert len(found) == 1, found
    return importlib.metadata.PathDistribution(found[0])


def test_init_writes_a_spec_that_installs(
    served_source: tuple[str, str], git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The offline build (--no-build-isolation) needs pyproject's build requirements installed here.
    pytest.importorskip("wheel", reason="pip install wheel (in the `test` extra)")
    url, commit = served_source
    first = venv(tmp_path / "venv-user")
    done = pip_install(first, f"git+{url}@main")
    assert done.returncode == 0, done.stderr
    distribution = installed(first)
    assert '"commit_id": "' + commit + '"' in (distribution.read_text("direct_url.json") or "")

    # `autoloop init` as that install runs it: the metadata it finds is the venv's, with pip's record.
    monkeypatch.setattr(init_command.metadata, "distribution", lambda name: distribution)
    assert main(["init", "--repo", str(git_repo)]) == 0
    capsys.readouterr()
    workflow = yaml.safe_load((git_repo / ".github/workflows/autoloop.yml").read_text())
    spec = workflow["env"]["AUTOLOOP_PIP_SPEC"]
    assert spec == f"git+{url}@{commit}"
    agentic = (git_repo / ".github/workflows/autoloop.md").read_text()
    assert f"run: python3 -m pip install --quiet {shlex.quote(spec)}\n" in agentic

    # What the workflow's install step does, in a clean venv.
    second = venv(tmp_path / "venv-ci")
    done = pip_install(second, spec)
    assert done.returncode == 0, done.stderr
    assert installed(second).version == init_command.__version__
    probe = subprocess.run([str(second), "-c", "import autoloop_py, sys; print(autoloop_py.__file__)"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert probe.returncode == 0, probe.stderr
    assert str(tmp_path / "venv-ci") in probe.stdout  # its own copy, not this checkout
