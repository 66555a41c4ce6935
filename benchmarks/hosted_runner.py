"""What a GitHub-hosted runner adds to a tick that the offline act run cannot measure, measured or modelled.

Measured here (`measure_installs`, needs the package index): pip installing this checkout's wheel, without and with
the `llm` extra, into an empty venv of a fresh Python with an empty pip cache from PyPI (cold: what a job paid
before any cache); the same from a local folder of the downloaded wheels (warm: about what a job paid with
setup-python's pip cache restored, minus pip's index queries); the size of those wheels (what that pip cache
restores); and the installed folder packed and unpacked with tar and zstd (what actions/cache stores and restores).

Modelled (`Runner`, constants stated): a job's set-up and completion, checkout, setup-python, apt-get of
bubblewrap, the artifact actions, and the cache service's latency and bandwidth. The act run's other steps
(autoloop's own work) are taken as measured.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from time import monotonic

INDEX = "https://pypi.org/simple"


@dataclass(frozen=True)
class Runner:
    """The modelled seconds of a hosted runner's fixed costs (ubuntu-latest, a small repository).

    Attributes:
      job: "Set up job" plus "Complete job" of every job.
      checkout: actions/checkout of every branch (fetch-depth 0) of a small repository.
      setup_python: actions/setup-python when the version is in the runner's tool cache.
      apt_bubblewrap: `apt-get update` and `apt-get install bubblewrap`.
      artifact: one upload-artifact or download-artifact of a small outcome.
      cache_call: one call to the cache service (lookup, reserve or commit), on top of the transfer.
      cache_mb_per_s: the cache service's download speed in MB/s (upload at the same speed).
    """

    job: float = 3.0
    checkout: float = 2.0
    setup_python: float = 2.0
    apt_bubblewrap: float = 15.0
    artifact: float = 2.0
    cache_call: float = 1.0
    cache_mb_per_s: float = 50.0

    def transfer(self, mb: float) -> float:
        """Returns the seconds of one cache restore or save of mb megabytes (without unpacking)."""
        return self.cache_call + mb / self.cache_mb_per_s


@dataclass(frozen=True)
class Install:
    """One set of packages (base, or with the `llm` extra), measured.

    Wall seconds of a local step swell with this machine's load (it is shared); its CPU seconds (user + system
    of the process tree) stand for the wall time on an otherwise idle runner. The cold install waits on the
    network, so its wall time is the figure.

    Attributes:
      packages: distributions installed.
      cold: wall seconds of pip from the index with an empty cache; cold_cpu its CPU seconds.
      warm: wall seconds of pip from the already downloaded wheels, no index; warm_cpu its CPU seconds.
      wheels_mb: the downloaded wheels (what a warm pip cache holds).
      installed_mb: the installed folder.
      packed_mb: the installed folder as tar + zstd (what actions/cache stores).
      pack, unpack: CPU seconds to pack it and to unpack it.
    """

    packages: int
    cold: float
    cold_cpu: float
    warm: float
    warm_cpu: float
    wheels_mb: float
    installed_mb: float
    packed_mb: float
    pack: float
    unpack: float


def _mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    return sum(p.stat().st_size for p in files) / 1e6


def _run(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Runs a command; returns its wall and CPU seconds (user + system of it and the children it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _pip_env(cache: Path) -> dict[str, str]:
    """Returns pip's environment with no configuration of this machine (no local wheel folders or mirrors)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_CACHE_DIR=str(cache), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def measure_install(python: str, spec: str, scratch: Path) -> Install:
    """Measures one set of packages (see the module's text); scratch must be empty."""
    cold_venv, warm_venv, wheels = scratch / "cold", scratch / "warm", scratch / "wheels"
    _run([python, "-m", "venv", str(cold_venv)])
    cold = _run([str(cold_venv / "bin/python"), "-m", "pip", "install", "-q", "--index-url", INDEX, spec],
                _pip_env(scratch / "cache-cold"))
    _run([str(cold_venv / "bin/python"), "-m", "pip", "download", "-q", "--index-url", INDEX, "-d", str(wheels),
          spec], _pip_env(scratch / "cache-download"))
    _run([python, "-m", "venv", str(warm_venv)])
    warm = _run([str(warm_venv / "bin/python"), "-m", "pip", "install", "-q", "--no-index", "--find-links",
                 str(wheels), spec], _pip_env(scratch / "cache-warm"))
    listed = subprocess.run([str(cold_venv / "bin/python"), "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, env=_pip_env(scratch / "cache-cold")).stdout
    packages = len([line for line in listed.splitlines() if line and not line.startswith(("pip==", "setuptools=="))])
    installed = cold_venv / "lib"
    packed = scratch / "installed.tar.zst"
    _, pack = _run(["tar", "-I", "zstd -T0", "-cf", str(packed), "-C", str(cold_venv), "lib", "bin"])
    unpacked = scratch / "unpacked"
    unpacked.mkdir()
    _, unpack = _run(["tar", "-I", "zstd -T0", "-xf", str(packed), "-C", str(unpacked)])
    return Install(packages, *cold, *warm, _mb(wheels), _mb(installed), _mb(packed), pack, unpack)


def measure_installs(python: str, wheel: Path) -> dict[str, Install]:
    """Returns the measured base and `llm` sets of this checkout's wheel (needs the package index)."""
    found: dict[str, Install] = {}
    for kind, spec in (("base", str(wheel)), ("llm", f"{wheel}[llm]")):
        with tempfile.TemporaryDirectory(prefix=f"hosted-{kind}-") as tmp:
            found[kind] = measure_install(python, spec, Path(tmp))
    return found


def fresh_python() -> str:
    """Returns a Python 3.12 (the workflow's) of pyenv when this machine has one, else this interpreter's base."""
    for candidate in sorted((Path.home() / ".pyenv/versions").glob("3.12*/bin/python3.12")):
        return str(candidate)
    return getattr(sys, "_base_executable", sys.executable)
