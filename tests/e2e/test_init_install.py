"""End to end: what `autoloop init` tells the workflows to install installs autoloop, from pip's record of its origin.

autoloop is installed into a scratch venv (from a git repository served over loopback HTTP, or with
`pip install .` / `pip install -e .` of a clone), so pip writes a real `direct_url.json`; `autoloop init`
reads that record and writes the workflow (and, for a local install, the wheel it installs); the
workflow's install step then runs in a second venv. The venvs see this interpreter's packages
(`--system-site-packages`) and pip runs with `--no-index`, so nothing leaves 127.0.0.1.
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
import zipfile
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml

from autoloop_py.cli import main
from autoloop_py import __version__
from autoloop_py.commands import ci_install

REPO = Path(__file__).resolve().parents[2]


def source_repository(tmp_path: Path, run_git: Callable[..., str]) -> Path:
    """Returns a git repository holding this package's source (what a clone of autoloop_py holds)."""
    work = tmp_path / "source"
    work.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, work / name)
    shutil.copytree(REPO / "autoloop_py", work / "autoloop_py", ignore=shutil.ignore_patterns("__pycache__"))
    run_git(tmp_path, "init", "-q", "-b", "main", str(work))
    run_git(work, "add", "-A")
    run_git(work, "-c", "user.name=t", "-c", "user.email=t@e.invalid", "commit", "-qm", "autoloop source")
    return work


@pytest.fixture
def served_source(tmp_path: Path, run_git: Callable[..., str]) -> Iterator[tuple[str, str]]:
    """Returns (clone URL on 127.0.0.1, commit) of a git repository holding this package's source."""
    source = tmp_path / "served" / "autoloop_py.git"
    work = source_repository(tmp_path, run_git)
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
    """Returns the python of a new venv that sees this interpreter's packages (setuptools for the build).

    Its pip is this interpreter's (installing into the venv all the same): ensurepip cost 6 s of CPU a venv.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(where)], check=True,
                   timeout=300)
    return where / "bin" / "python"


def pip_install(python: Path, *spec: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Installs spec with pip, offline apart from the loopback server."""
    command = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
               "--no-index", "--disable-pip-version-check", *spec]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd, env=offline(python))


def offline(python: Path) -> dict[str, str]:
    """Returns the environment of a command of python's venv: its bin first on PATH, pip without an index."""
    return {"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": str(python.parents[2]), "PIP_NO_CACHE_DIR": "1",
            "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


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
    monkeypatch.setattr(ci_install.metadata, "distribution", lambda name: distribution)
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
    assert installed(second).version == __version__
    probe = subprocess.run([str(second), "-c", "import autoloop_py, sys; print(autoloop_py.__file__)"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert probe.returncode == 0, probe.stderr
    assert str(tmp_path / "venv-ci") in probe.stdout  # its own copy, not this checkout


WHEEL = ".autoloop/wheels/autoloop_py-{}-py3-none-any.whl"


def autoloop(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Runs the `autoloop` command of python's venv."""
    return subprocess.run([str(python.parent / "autoloop"), *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=offline(python))


def install_steps(repo: Path) -> tuple[str, list[str], str]:
    """Returns the plain workflow's AUTOLOOP_PIP_SPEC, its install steps' commands and the agentic install line."""
    workflow = yaml.safe_load((repo / ".github/workflows/autoloop.yml").read_text())
    runs = [step["run"] for job in workflow["jobs"].values() for step in job["steps"]
            if step.get("name") == "Install autoloop"]
    agentic = (repo / ".github/workflows/autoloop.md").read_text()
    line = next(line.strip() for line in agentic.splitlines() if "pip install" in line)
    return workflow["env"]["AUTOLOOP_PIP_SPEC"], runs, line


def set_version(source: Path, version: str) -> None:
    """Changes the version a source checkout builds (pyproject.toml and the package's __version__)."""
    for rel in ("pyproject.toml", "autoloop_py/__init__.py"):
        path = source / rel
        path.write_text(path.read_text().replace('version = "0.1.0"', f'version = "{version}"')
                        .replace('__version__ = "0.1.0"', f'__version__ = "{version}"'))


def test_pip_install_of_a_clone_then_init_needs_no_pip_spec_and_the_workflow_installs_its_wheel(
    git_repo: Path, tmp_path: Path, run_git: Callable[..., str]
) -> None:
    pytest.importorskip("wheel", reason="pip install wheel (in the `test` extra)")
    run_git(tmp_path, "clone", "-q", str(source_repository(tmp_path, run_git)), str(tmp_path / "clone"))
    clone = tmp_path / "clone"
    user = venv(tmp_path / "venv-user")
    done = pip_install(user, ".", cwd=clone)
    assert done.returncode == 0, done.stderr

    done = autoloop(user, "init", "--repo", str(git_repo), "--model", "openai/gpt-4o-mini", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    wheel = WHEEL.format("0.1.0")
    assert f"building a wheel of autoloop 0.1.0 from {clone} …\n" in done.stdout
    assert f"wrote {wheel}\n" in done.stdout and "autoloop init --upgrade" in done.stdout
    spec, runs, agentic = install_steps(git_repo)
    assert spec == wheel and (git_repo / wheel).is_file()
    plain, with_llm = 'python -m pip install --user "$AUTOLOOP_PIP_SPEC"', ' "autoloop-py[llm]"'
    # plan, propose (the llm proposer: the `llm` extra), publish (no cache: into setup-python's own site)
    assert runs == [plain, plain + with_llm, 'python -m pip install "$AUTOLOOP_PIP_SPEC"']
    assert agentic == f"run: python3 -m pip install --quiet {wheel}"
    assert sorted(p.name for p in (git_repo / ".autoloop/wheels").iterdir()) == [Path(wheel).name]

    # The propose job's install step as a runner runs it: in the checkout, a fresh venv, the dependencies
    # and the `llm` extra's litellm from what pip finds (this interpreter's packages, no index). Its --user
    # install goes where PYTHONUSERBASE says (the workflow names a folder of its own; here the venv itself).
    ci = venv(tmp_path / "venv-ci")
    step = subprocess.run(["bash", "-c", runs[1]], capture_output=True, text=True, timeout=600, cwd=git_repo,
                          env={**offline(ci), "AUTOLOOP_PIP_SPEC": spec, "PYTHONUSERBASE": str(ci.parents[1])})
    assert step.returncode == 0, step.stderr
    assert "does not provide the extra" not in step.stderr
    assert installed(ci).version == "0.1.0"
    helped = autoloop(ci, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "init" in helped.stdout, helped.stderr
    package = installed(ci).locate_file("autoloop_py")
    assert str(package).startswith(str(tmp_path / "venv-ci"))  # its own copy, not this checkout
    assert (Path(str(package)) / "templates/workflows/autoloop.yml.j2").is_file()

    # A newer autoloop: --upgrade swaps the wheel and the spec, and nothing else.
    workflow = git_repo / ".github/workflows/autoloop.yml"
    workflow.write_text(workflow.read_text() + "# a hand edit\n")
    program = (git_repo / ".autoloop/programs/example/program.md").read_bytes()
    set_version(clone, "0.1.1")
    done = pip_install(user, ".", cwd=clone)
    assert done.returncode == 0, done.stderr
    done = autoloop(user, "init", "--upgrade", "--repo", str(git_repo), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    newer = WHEEL.format("0.1.1")
    assert f"wrote {newer}\n" in done.stdout and f"removed {wheel}\n" in done.stdout
    spec, runs, agentic = install_steps(git_repo)
    assert (spec, agentic) == (newer, f"run: python3 -m pip install --quiet {newer}")
    assert sorted(p.name for p in (git_repo / ".autoloop/wheels").iterdir()) == [Path(newer).name]
    assert workflow.read_text().endswith("# a hand edit\n")
    assert f"--pip-spec {newer} " in workflow.read_text().splitlines()[2]
    assert (git_repo / ".autoloop/programs/example/program.md").read_bytes() == program


def test_an_editable_install_travels_as_a_wheel_of_the_real_files(
    git_repo: Path, tmp_path: Path, run_git: Callable[..., str]
) -> None:
    pytest.importorskip("wheel", reason="pip install wheel (in the `test` extra)")
    source = source_repository(tmp_path, run_git)
    user = venv(tmp_path / "venv-user")
    done = pip_install(user, "-e", str(source))
    assert done.returncode == 0, done.stderr
    assert '"editable": true' in (installed(user).read_text("direct_url.json") or "")

    done = autoloop(user, "init", "--repo", str(git_repo), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    wheel = git_repo / WHEEL.format("0.1.0")
    names = set(zipfile.ZipFile(wheel).namelist())
    packaged = {f"autoloop_py/{p.relative_to(source / 'autoloop_py').as_posix()}"
                for p in (source / "autoloop_py").rglob("*") if p.is_file() and p.suffix in (".py", ".j2")}
    assert packaged and packaged <= names  # every module and template, not an editable finder
    assert not any(name.endswith(".pth") or "__editable__" in name for name in names)
    assert not (source / "build").exists()  # built from a copy: the checkout is as it was
