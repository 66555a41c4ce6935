"""The python3 an evaluation runs as a root runner's uid of its own (no bubblewrap), and the venv giving it packages.

Such a uid cannot reach a Python installed under a folder closed to others (a pyenv or venv under a 0700 /root):
its PATH would find /usr/bin/python3 without the program's packages, and the metric silently fall. So `autoloop deps
--install` installs the requirements into the evaluation venv, made from a python3 every uid can reach, in a folder
every uid can read ($AUTOLOOP_EVALUATION_VENV, else /opt/autoloop/evaluation-venv); that venv's bin comes first on
those commands' PATH, and `check`/`status` name the python3 they run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Mapping

from autoloop_py.errors import SandboxError
from autoloop_py.sandbox.slot_user import ENV_VAR, closed_to_others, unreachable_python

VENV_ENV = "AUTOLOOP_EVALUATION_VENV"
DEFAULT_VENV = "/opt/autoloop/evaluation-venv"


def venv_folder(environ: Mapping[str, str]) -> Path:
    """Returns where the evaluation venv is (or would be made)."""
    return Path(environ.get(VENV_ENV, "").strip() or DEFAULT_VENV)


def venv_python(environ: Mapping[str, str]) -> Path | None:
    """Returns the evaluation venv's python3 when there is one every uid can run (None otherwise)."""
    python = venv_folder(environ) / "bin" / "python3"
    return python if python.exists() and closed_to_others(python) is None else None


def search_path(environ: Mapping[str, str], path: str | None = None) -> str:
    """Returns the PATH (default: environ's) of a command run as a uid of its own: the evaluation venv's bin first,
    when there is one and that uid cannot reach the first python3 of PATH."""
    path = environ.get("PATH", os.defpath) if path is None else path
    python = venv_python(environ)
    return f"{python.parent}{os.pathsep}{path}" if python is not None and unreachable_python(path) else path


def needs_venv(environ: Mapping[str, str]) -> bool:
    """Returns whether a uid of its own cannot reach the runner's first python3 on PATH."""
    return bool(unreachable_python(environ.get("PATH", os.defpath)))


def describe(environ: Mapping[str, str], program: str = "PROGRAM") -> str:
    """Returns the one line saying which python3 evaluations run as a uid of their own."""
    runner = shutil.which("python3", path=environ.get("PATH", os.defpath))
    python = venv_python(environ)
    if python is not None and needs_venv(environ):
        return (f"python3: evaluations run {python}, the evaluation venv `autoloop deps {program} --install` fills, "
                f"because their uid cannot reach the runner's {runner}")
    why = unreachable_python(search_path(environ))
    if why:
        return (f"NOT the runner's python3: {why}; or run `autoloop deps {program} --install`, which installs the "
                f"requirements into {venv_folder(environ)} for them")
    return f"python3: evaluations run the runner's {runner}" if runner else "python3: evaluations find no python3"


def prepare(environ: Mapping[str, str]) -> Path:
    """Returns the evaluation venv's python3, making the venv (without pip: the runner's pip installs into it) from
    the first python3 on PATH every uid can reach; raises SandboxError when there is none or it stays unreadable."""
    python = venv_python(environ)
    if python is not None:
        return python
    folders = environ.get("PATH", os.defpath).split(os.pathsep)
    found = (shutil.which("python3", path=folder) for folder in folders if folder)
    base = next((Path(p) for p in found if p and closed_to_others(Path(p)) is None), None)
    if base is None:
        raise SandboxError(f"no python3 on PATH can be run by other users, so evaluations run as a uid of their own "
                           f"have none; install one outside folders closed to others, or set {ENV_VAR}=off")
    folder = venv_folder(environ)
    folder.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    made = subprocess.run([str(base), "-m", "venv", "--without-pip", str(folder)], capture_output=True, text=True)
    if made.returncode != 0:
        raise SandboxError(f"`{base} -m venv {folder}` failed: {made.stderr.strip()[-300:]}")
    python = folder / "bin" / "python3"
    closed = closed_to_others(python)
    if closed is not None:
        raise SandboxError(f"{closed} is closed to other users, so evaluations run as a uid of their own cannot use "
                           f"the venv made in {folder}; set {VENV_ENV} to a folder every user can read")
    return python
