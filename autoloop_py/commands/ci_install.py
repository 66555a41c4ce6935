"""What the workflows install autoloop from: the requirement pip recorded, or a wheel of a local source.

An autoloop installed from an index (or pinned to a reachable URL) is installed again that way. One that a
GitHub runner cannot reach (`pip install .` of a clone, an editable install, a local git repository or
archive) travels with the repository: `autoloop init` builds a wheel of it into `.autoloop/wheels/` and the
workflows install that file; pip resolves its dependencies from the index as usual.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import unquote, urlparse

import autoloop_py
from autoloop_py import __version__
from autoloop_py.errors import AutoloopError

DISTRIBUTION = "autoloop-py"
# What an autoloop installed from a package index installs again; only then is it the default.
DEFAULT_PIP_SPEC = f"{DISTRIBUTION}=={__version__}"
WHEELS_DIR = Path(".autoloop/wheels")
WHEEL_GLOB = "autoloop_py-*.whl"
# pyproject.toml's [build-system] requires: when this interpreter has them, the wheel builds offline with them.
BUILD_REQUIREMENTS = ("setuptools", "wheel")
# Left out of the copy a folder's wheel is built from: a stale build/ would put deleted modules back in.
NOT_SOURCE = (".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".ci", ".*_cache",
              ".hypothesis", ".benchmarks", "node_modules")
BUILD_TIMEOUT_SECONDS = 600
_SPEC_RE = re.compile(r"^[^\s-]\S*$")


@dataclass(frozen=True)
class InstallSource:
    """Where the running autoloop came from, as a workflow can install it again.

    Attributes:
      version: the installed version.
      spec: the requirement the workflows install (an index pin or a reachable URL); None: build a wheel.
      build_from: what pip builds the wheel from when spec is None (a local folder, an archive or a
        git+file URL pinned to a commit).
    """

    version: str
    spec: str | None = None
    build_from: str | None = None


def running_source() -> InstallSource:
    """Returns where the running autoloop came from, as pip recorded its origin (PEP 610 direct_url.json)."""
    try:
        found = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return source_from_install(__version__, None, installed=False)
    return source_from_install(found.version, found.read_text("direct_url.json"), installed=True)


def source_from_install(
    version: str, direct_url: str | None, *, installed: bool, running_from: Path | None = None
) -> InstallSource:
    """Returns the install source for a PEP 610 record direct_url (None: installed from an index).

    running_from is the folder the code runs from (default: this package's parent), used when autoloop is
    not installed at all. Raises AutoloopError, asking for --pip-spec, when nothing local can be built.
    """
    example = "--pip-spec git+https://github.com/OWNER/REPO@COMMIT"
    if not installed:
        folder = running_from or Path(autoloop_py.__file__).resolve().parents[1]
        if (folder / "pyproject.toml").is_file():
            return InstallSource(version, build_from=str(folder))
        raise AutoloopError(f"autoloop is not installed as a package here, so the workflow cannot know what to "
                            f"install; `pip install .` in a clone of autoloop_py, or pass {example} "
                            f"(or {DEFAULT_PIP_SPEC} once an index serves it)")
    if direct_url is None:
        return InstallSource(version, spec=f"{DISTRIBUTION}=={version}")
    try:
        origin = json.loads(direct_url)
        url = str(origin["url"])
    except (ValueError, KeyError, TypeError):
        raise AutoloopError(f"pip's record of where autoloop came from (direct_url.json) is unreadable; "
                            f"reinstall autoloop, or pass {example}") from None
    vcs = origin.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("commit_id"):
        pinned = f"{vcs.get('vcs', 'git')}+{url}@{vcs['commit_id']}"
        return InstallSource(version, build_from=pinned) if url.startswith("file:") else InstallSource(version, pinned)
    if isinstance(origin.get("archive_info"), dict) and url.startswith(("https://", "http://")):
        return InstallSource(version, spec=url)
    if url.startswith("file:"):
        return InstallSource(version, build_from=unquote(urlparse(url).path))
    raise AutoloopError(f"autoloop was installed from {url}, which neither a GitHub runner nor a local build "
                        f"can reach; pass {example}")


def wheel_path(version: str) -> Path:
    """Returns where the wheel of an autoloop version goes in a repository (pure-Python: py3-none-any)."""
    return WHEELS_DIR / f"autoloop_py-{version}-py3-none-any.whl"


def build_wheel(build_from: str, into: Path) -> Path:
    """Builds a wheel of autoloop from build_from with `pip wheel --no-deps` into the folder into.

    A folder is copied first (without build/, .git, venvs), so the user's checkout is left as it was and
    an editable install's wheel holds the real package files. Returns the wheel; raises AutoloopError
    naming what failed.
    """
    with tempfile.TemporaryDirectory(prefix="autoloop-wheel-") as scratch:
        source = build_from
        if Path(build_from).is_dir():
            source = str(Path(scratch) / "source")
            shutil.copytree(build_from, source, ignore=shutil.ignore_patterns(*NOT_SOURCE), symlinks=True)
        elif "+" not in build_from.split(":", 1)[0] and not Path(build_from).is_file():
            raise AutoloopError(f"autoloop was installed from {build_from}, which no longer exists; reinstall "
                                "autoloop from a clone (`pip install .`) or pass --pip-spec")
        built = Path(scratch) / "wheels"
        _pip_wheel(source, built, build_from)
        wheels = sorted(built.glob(WHEEL_GLOB))
        if len(wheels) != 1:
            found = ", ".join(p.name for p in built.iterdir()) or "nothing"
            raise AutoloopError(f"building a wheel of autoloop from {build_from} made {found}, not one "
                                f"{WHEEL_GLOB}")
        into.mkdir(parents=True, exist_ok=True)
        return Path(shutil.move(str(wheels[0]), into / wheels[0].name))


def _pip_wheel(source: str, into: Path, named: str) -> None:
    """Runs `pip wheel --no-deps`, offline when this interpreter has the build backend."""
    if find_spec("pip") is None:
        raise AutoloopError(f"building a wheel of autoloop needs pip in {sys.executable}; "
                            f"`{sys.executable} -m ensurepip`, or pass --pip-spec")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "--quiet",
               "--wheel-dir", str(into)]
    if all(find_spec(name) is not None for name in BUILD_REQUIREMENTS):
        command.append("--no-build-isolation")
    command.append(source)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise AutoloopError(f"building a wheel of autoloop from {named} took over {BUILD_TIMEOUT_SECONDS} s "
                            f"(`{' '.join(command)}`); pass --pip-spec instead") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise AutoloopError(f"building a wheel of autoloop from {named} failed (`{' '.join(command)}` exited "
                            f"{done.returncode}):\n{tail}\nfix the build, or pass --pip-spec")


def stale_wheels(root: Path, keep: Path) -> list[Path]:
    """Returns the autoloop wheels under the repository's wheels folder other than keep (repository-relative)."""
    folder = root / WHEELS_DIR
    if not folder.is_dir():
        return []
    return [p.relative_to(root) for p in sorted(folder.glob(WHEEL_GLOB)) if p.relative_to(root) != keep]


def check_spec(spec: str) -> str:
    """Returns spec when it is one pip requirement (no option, no second word); raises AutoloopError otherwise."""
    if not _SPEC_RE.match(spec):
        raise AutoloopError(f"--pip-spec {spec!r} must be one requirement, e.g. {DEFAULT_PIP_SPEC}")
    return spec
