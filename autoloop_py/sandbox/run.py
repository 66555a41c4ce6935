"""The sandbox's edge: decide bwrap or none on this machine, gather what to show, and spawn confined commands."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shlex
import shutil
import site
import subprocess
import sys
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

from autoloop_py.errors import SandboxError
from autoloop_py.program.model import Program
from autoloop_py.sandbox import confinement, evaluation_python, process_limit, slot_user
from autoloop_py.sandbox.cgroup import pids_limit
from autoloop_py.sandbox.memory_cgroup import memory_limit
from autoloop_py.sandbox.private_network import PrivateNetwork, network_report, private_network, require_slirp
from autoloop_py.sandbox.policy import (
    AGENT_NETWORKS,
    AUTO,
    BWRAP,
    ETC_FILES,
    MODES,
    NONE,
    OUTSIDE_ONLY,
    SYSTEM_DIRS,
    Limits,
    SandboxPolicy,
    agent_limits,
    bwrap_args,
    evaluation_limits,
    limit_args,
)
from autoloop_py.sandbox.process import CommandResult, run_process

logger = logging.getLogger(__name__)

# Marks every command with its runner (a hash, not the pid itself): after a crash, the next run kills what
# the dead runner's commands left running.
RUN_TOKEN_ENV_VAR = "AUTOLOOP_RUN_TOKEN"
ISOLATION_ENV = "AUTOLOOP_ISOLATION"
AGENT_NETWORK_ENV = "AUTOLOOP_AGENT_NETWORK"
OUTSIDE_ONLY_NEEDS_BWRAP = (
    "agent-network: outside-only needs bubblewrap (the agent's own network namespace), but the agent would run "
    "with isolation: none; install bubblewrap and use isolation: auto or bwrap, or set agent-network: host"
)
# More directories to show read-only (comma-separated): a tool installed under $HOME, e.g. an agent's runtime.
READ_ONLY_ENV = "AUTOLOOP_SANDBOX_READ_ONLY"
# The runner's own package, shown read-only: an evaluator calls candidate code through autoloop_py.candidate.
PACKAGE_DIR = Path(__file__).resolve().parents[1]
_PREFLIGHT = ("--unshare-user", "--unshare-pid", "--unshare-net", "--die-with-parent", "--ro-bind", "/", "/", "true")


@dataclass(frozen=True)
class Isolation:
    """The resolved isolation of one run: how evaluations and the agent are confined.

    Attributes:
      evaluation: the policy of evaluation commands.
      agent: the policy of an outside agent's command (network kept, no address-space limit).
      reason: why bwrap is not used when `auto` fell back to none (else "").
    """

    evaluation: SandboxPolicy
    agent: SandboxPolicy
    reason: str = ""


def bwrap_status() -> tuple[bool, str]:
    """Returns (usable, why not): bubblewrap is installed and can create its namespaces here."""
    binary = shutil.which("bwrap")
    if binary is None:
        return False, "bubblewrap (`bwrap`) is not installed"
    usable, why = _probe(binary)
    if not usable:
        _probe.cache_clear()  # only a working bwrap is remembered: a failure is tried again
    return usable, why


@functools.lru_cache(maxsize=8)
def _probe(binary: str) -> tuple[bool, str]:
    """Returns bwrap_status of one bwrap binary (each iteration of a run asks; a working one is tried once)."""
    try:
        done = subprocess.run([binary, *_PREFLIGHT], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"bwrap could not run: {err}"
    if done.returncode != 0:
        return False, f"bwrap cannot create its namespaces here: {done.stderr.strip() or done.returncode}"
    return True, ""


def resolve_mode(requested: str | None) -> tuple[str, str]:
    """Returns (bwrap | none, why bwrap is not used) for a requested mode; `bwrap` that cannot run is an error."""
    mode = (requested or AUTO).strip().lower()
    if mode not in MODES:
        raise SandboxError(f"isolation must be one of {', '.join(MODES)}, got {requested!r}")
    if mode == NONE:
        return NONE, "isolation: none was requested"
    usable, why = bwrap_status()
    if usable:
        return BWRAP, ""
    if mode == BWRAP:
        raise SandboxError(f"isolation: bwrap was requested, but {why}; install bubblewrap or set isolation: none")
    return NONE, why


def resolve_agent_network(requested: str | None, mode: str) -> bool:
    """Returns whether the agent's network is outside-only (`agent-network`, host by default) under isolation `mode`.

    Raises SandboxError naming the fix when outside-only cannot be had: never the host's network instead.
    """
    choice = (requested or AGENT_NETWORKS[0]).strip().lower()
    if choice not in AGENT_NETWORKS:
        raise SandboxError(f"agent-network must be one of {', '.join(AGENT_NETWORKS)}, got {requested!r}")
    if choice != OUTSIDE_ONLY:
        return False
    if mode != BWRAP:
        raise SandboxError(OUTSIDE_ONLY_NEEDS_BWRAP)
    require_slirp("agent-network: outside-only")
    return True


def isolation_for(
    requested: str | None, *, network: bool, hidden: Sequence[Path] = (), environ: Mapping[str, str] | None = None,
    limits: Limits | None = None, explicit_memory: bool = False, agent_network: str | None = None,
) -> Isolation:
    """Returns the policies of a run: `requested` (auto | bwrap | none) resolved on this machine.

    hidden: the user's checkout and its git directory, never shown to a command. limits: the evaluation's
    (`program_limits`), whose memory and file size caps bind the agent too; None: the defaults, and none for the agent.
    explicit_memory: the program sets `max-memory` (an agent then falls back to RLIMIT_AS without a memory cgroup).
    agent_network: host | outside-only (None: host).
    """
    env = os.environ if environ is None else environ
    mode, reason = resolve_mode(requested)
    outside_only = resolve_agent_network(agent_network, mode)
    if mode == NONE:
        logger.warning("%s", unsandboxed_line(reason, env))
    choice = process_limit.requested(env)
    limit = process_limit.resolve(choice)
    if limit.problem:
        raise SandboxError(f"{limit.problem}; unset {process_limit.ENV_VAR} or set it to auto")
    if not limit.enforced:
        logger.warning("%s", process_limit.describe(limit))
    hidden_paths = tuple(str(Path(path).resolve()) for path in hidden)
    shown = _read_only_paths(env, hidden_paths)
    base = SandboxPolicy(
        mode=mode, read_only=shown, hidden=hidden_paths, home=env.get("HOME"), process_limit=choice
    )
    agent_caps = (
        agent_limits(limits, explicit_memory)
        if limits is not None
        else Limits(address_space=None, cpu_from_timeout=True)
    )
    agent = replace(base, network=True, outside_only=outside_only, limits=agent_caps)
    evaluation = replace(base, network=network, limits=limits or base.limits)
    return Isolation(evaluation=evaluation, agent=agent, reason=reason)


def program_limits(program: Program) -> Limits:
    """Returns the limits of a program's evaluations (its `max-memory` and `max-disk`, on this machine's memory)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = None
    return evaluation_limits(program.config.max_memory, program.config.max_disk, total)


def run_isolation(
    root: Path, program: Program, override: str | None = None, agent_network: str | None = None
) -> Isolation:
    """Returns the isolation of a program's run in the checkout at root (override: --isolation; agent_network:
    --agent-network).

    The mode is the first of: override, AUTOLOOP_ISOLATION, the program's `isolation` frontmatter; the agent's
    network likewise (--agent-network, AUTOLOOP_AGENT_NETWORK, `agent-network`).
    """
    hidden = [root, root / ".git"]
    return isolation_for(
        requested_mode(program, override), network=program.config.evaluation_network, hidden=hidden,
        limits=program_limits(program), explicit_memory=program.config.max_memory is not None,
        agent_network=requested_agent_network(program, agent_network),
    )


def requested_mode(program: Program, override: str | None = None) -> str:
    """Returns the isolation asked for: override (--isolation), else AUTOLOOP_ISOLATION, else the program's."""
    return override or os.environ.get(ISOLATION_ENV, "").strip() or program.config.isolation


def requested_agent_network(program: Program, override: str | None = None) -> str:
    """Returns the agent network asked for: override (--agent-network), else AUTOLOOP_AGENT_NETWORK, else the
    program's `agent-network`."""
    return override or os.environ.get(AGENT_NETWORK_ENV, "").strip() or program.config.agent_network


def run_sandboxed(
    command: str,
    workdir: Path,
    policy: SandboxPolicy,
    *,
    env: Mapping[str, str],
    timeout: float,
    cwd: Path | None = None,
    writable: Sequence[Path] = (),
    output_cap: int = 1 << 20,
    on_exit: Callable[[], object] | None = None,
) -> CommandResult:
    """Runs `bash -c command` confined by policy: only workdir (and `writable`) can be written; limits apply.

    on_exit: called when the command exits, before what it left running is killed (see run_process).
    """
    if policy.outside_only and not policy.sandboxed:
        raise SandboxError(OUTSIDE_ONLY_NEEDS_BWRAP)
    work = str(workdir.resolve())
    where = str((cwd or workdir).resolve())
    env = {**env, RUN_TOKEN_ENV_VAR: run_token(os.getpid())}
    facts = process_limit.facts(workdir)
    limit = process_limit.decide(policy.process_limit, facts)
    if limit.problem:
        raise SandboxError(limit.problem)
    own_uid = not slot_user.wanted(policy.sandboxed, os.environ, facts)
    if own_uid:
        hidden = [Path(path) for path in policy.hidden]
        for path in slot_user.exposed([*hidden, *(path / "config" for path in hidden)]):
            logger.warning("%s is writable by every user: an evaluation or agent, though run as a uid of its own "
                           "(isolation: none as root), could change it; remove the write permission of others", path)
        # The evaluation venv of `autoloop deps --install` first, when the runner's python3 is out of reach.
        env = {**env, "PATH": evaluation_python.search_path(os.environ, env.get("PATH", os.defpath))}
        _warn_unreachable_python(env["PATH"])
    with private_network() if policy.outside_only else nullcontext() as network, \
            slot_user.slot_user(workdir, writable) if own_uid else nullcontext() as user:  # fmt: skip
        if user is not None:
            env = user.environment(env)
        return _confined(command, policy, limit, user, network, env=env, where=where, work=work, timeout=timeout,
                         writable=writable, output_cap=output_cap, on_exit=on_exit)  # fmt: skip


@functools.lru_cache(maxsize=8)
def _warn_unreachable_python(search_path: str) -> None:
    """Warns once per run and PATH that a slot uid gets another python3 than the runner's (the evaluation may then
    fail on a missing package, for a reason the runner's own python3 never shows)."""
    if slot_user.unreachable_python(search_path):  # the same line `check` and `status` print
        logger.warning("%s", evaluation_python.describe({**os.environ, "PATH": search_path}))


def _confined(
    command: str, policy: SandboxPolicy, limit: process_limit.ProcessLimit, user: slot_user.SlotUser | None,
    network: PrivateNetwork | None, *, env: Mapping[str, str], where: str, work: str, timeout: float,
    writable: Sequence[Path], output_cap: int, on_exit: Callable[[], object] | None,
) -> CommandResult:
    """Runs the command as run_sandboxed decided: as `user` (a root runner's uid per command) or the runner's own."""
    as_user = limit.mechanism == process_limit.UID
    argv = ["bash", "-c", command]
    if user is not None:  # its own uid: RLIMIT_NPROC holds for it, and it cannot reach root's files or other slots
        argv = [*user.prefix(), *argv]
    elif as_user:  # RLIMIT_NPROC holds for nobody, not for root: the command becomes nobody, in a copy it owns
        process_limit.hand_over([Path(work), *writable])
        argv = [*process_limit.setpriv_prefix(), *argv]
    if policy.sandboxed:
        env = {**env, "TMPDIR": "/tmp"}
        links, present = _system_layout()
        policy = replace(policy, read_only=(*policy.read_only, *command_paths(command)))
        options = bwrap_args(
            policy, work, cwd=where, writable=[str(p.resolve()) for p in writable], links=links, present=present,
            as_user=as_user,
        )
        argv = ["bwrap", *options, *(network.options if network is not None else ()), "--", *argv]
    if not limit.enforced:
        counted: int | None = None
    elif user is not None:
        counted = 0  # slot_user allocates only a uid no process runs as
    else:
        counted = process_limit.processes_of(process_limit.NOBODY if as_user else None)
    # The kernel holds a pids cgroup's limit for every user, root included.
    grouped = limit.mechanism == process_limit.CGROUP
    with (pids_limit(policy.limits.processes, root_only=False) if grouped else nullcontext()) as group, \
            memory_limit(policy.limits.memory, group) as memory:
        limits = policy.limits
        if memory is None and limits.memory is not None and limits.address_space is None and limits.memory_fallback:
            limits = replace(limits, address_space=limits.memory)  # no memory cgroup here: RLIMIT_AS holds the cap
        argv = _prlimited(argv, limit_args(limits, timeout, counted, os.cpu_count() or 1))
        if memory is not None:
            argv = memory.wrap(argv)
        if group is not None:
            argv = group.wrap(argv)
        audit = group.escaped if group is not None else None
        done = run_process(
            argv, Path(where), timeout=timeout, env=env, output_cap=output_cap, on_exit=on_exit, audit=audit,
            pass_fds=network.pass_fds if network is not None else (),
            on_start=network.start if network is not None else None,
        )
        if memory is not None and memory.oom_kills():
            done = replace(done, memory_cap=memory.limit)
        if limits is not policy.limits:
            done = replace(done, memory_rlimit=limits.address_space)
        return done


def _prlimited(argv: list[str], limits: list[str]) -> list[str]:
    """Returns argv started under `prlimit` with the limits (unchanged where prlimit is not installed)."""
    if shutil.which("prlimit"):
        return ["prlimit", *limits, "--", *argv]
    logger.debug("prlimit is not installed: the command runs without resource limits")
    return argv


def run_token(pid: int) -> str:
    """Returns the marker of the commands of the runner with this pid (recovery derives it from a dead pid)."""
    return hashlib.sha256(f"autoloop-run:{pid}".encode()).hexdigest()[:16]


def command_words(command: str) -> list[str]:
    """Returns a shell command's words, operators apart ([] for an unclosed quote: the command will fail anyway)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True  # `> /path;` yields `/path` apart from the operators
    try:
        return list(lexer)
    except ValueError:
        return []


def named_files(command: str) -> list[str]:
    """Returns the existing files a command names by absolute path (an agent's script): shown read-only."""
    return [word for word in command_words(command) if word.startswith("/") and os.path.isfile(word)]


def command_paths(command: str) -> list[str]:
    """Returns what the files a command names need shown read-only: each file, and for an interpreter its
    virtualenv and the installation it links to, wherever they live (/tmp included)."""
    shown: list[str] = []
    for word in named_files(command):
        path = Path(word)
        venv = next((p for p in path.parents if (p / "pyvenv.cfg").is_file()), None)
        if venv is not None:
            shown.append(str(venv.resolve()))
            home = _venv_home(venv / "pyvenv.cfg")
            if home is not None and home.name == "bin":
                shown.append(str(home.parent))
        real = path.resolve()
        # A link to an interpreter (`venv/bin/python3` -> `/opt/py/bin/python3.12`) needs that installation;
        # any other link shows only the file it points to.
        linked_bin = real != path.absolute() and real.parent.name == "bin"
        shown.append(str(real.parent.parent if linked_bin else real))
        shown.append(word)
    return list(dict.fromkeys(shown))


def _venv_home(config: Path) -> Path | None:
    """Returns the `home` directory a pyvenv.cfg names (the base interpreter's bin), None when it names none."""
    try:
        lines = config.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip().startswith("/"):
            return Path(value.strip()).resolve()
    return None


def _read_only_paths(environ: Mapping[str, str], hidden: Sequence[str]) -> tuple[str, ...]:
    """Returns the directories a command needs to see: the Python installation, autoloop_py and the tools on PATH.

    The Python installation is shown even inside the user's checkout (a project's .venv), read-only;
    other PATH directories inside it are not.
    """
    python = [sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages(), str(PACKAGE_DIR)]
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT"):
        if environ.get(name):
            python.append(environ[name])
    user_site = site.getusersitepackages()
    if user_site:
        python.append(user_site)
    tools = [entry for entry in environ.get("PATH", "").split(os.pathsep) if entry]
    tools += [entry.strip() for entry in environ.get(READ_ONLY_ENV, "").split(",") if entry.strip()]
    paths = [str(Path(p).resolve()) for p in python if p and Path(p).is_dir()]
    for entry in tools:
        resolved = Path(entry).resolve()
        if resolved.is_dir() and not any(resolved.is_relative_to(h) for h in hidden):
            paths.append(str(resolved))
    return tuple(dict.fromkeys(paths))


def _system_layout() -> tuple[list[tuple[str, str]], list[str]]:
    """Returns (system directories that are symbolic links and their targets, system and /etc paths that exist)."""
    links = [(path, os.readlink(path)) for path in SYSTEM_DIRS if os.path.islink(path)]
    candidates = [*SYSTEM_DIRS, *(f"/etc/{name}" for name in ETC_FILES)]
    return links, [path for path in candidates if os.path.lexists(path)]


def unsandboxed_line(reason: str, environ: Mapping[str, str], whose: str = "") -> str:
    """Returns confinement's line for evaluations run without bubblewrap on this machine (reason: why not)."""
    facts = process_limit.facts()
    why_no_uid = slot_user.wanted(False, environ, facts)
    return confinement.describe(sandboxed=False, reason=reason, root=facts.root, why_no_uid=why_no_uid, whose=whose)


def own_uid_evaluations(program: Program | None = None) -> bool:
    """Returns whether evaluations (of program, when given: it may ask for bubblewrap) run as a root runner's uid of
    their own, without bubblewrap."""
    if program is not None and resolve_mode(requested_mode(program))[0] == BWRAP:
        return False
    return os.geteuid() == 0 and not slot_user.wanted(False, os.environ, process_limit.facts())


def isolation_report(programs: Sequence[Program]) -> tuple[list[str], list[str]]:
    """Returns (lines saying how each program's evaluations run, problems): for `status` and `check`."""
    usable, why = bwrap_status()
    sandboxed, bare, problems = [], [], []
    networks = []
    for program in programs:
        mode = requested_mode(program).lower()
        if mode == BWRAP and not usable:
            problems.append(f"{program.path}: isolation: bwrap, but {why}")
        elif mode == NONE or not usable:
            bare.append(program.name)
        else:
            sandboxed.append(program.name)
        no_bwrap = "isolation: none" if mode == NONE else why if not usable else ""
        networks.append((str(program.path), requested_agent_network(program), no_bwrap))
    network_lines, network_problems = network_report(networks)
    problems += network_problems
    lines = []
    if sandboxed:
        lines.append(confinement.describe(sandboxed=True, whose=f" of {', '.join(sandboxed)}"))
    if bare:
        reason = why if not usable else "isolation: none"
        lines.append(unsandboxed_line(reason, os.environ, whose=f" of {', '.join(bare)}"))
    if bare and own_uid_evaluations():
        lines.append(evaluation_python.describe(os.environ, bare[0] if len(bare) == 1 else "PROGRAM"))
    if programs:
        limit = process_limit.resolve(process_limit.requested(os.environ))
        line = process_limit.describe(limit)
        lines.append(line if line.startswith("NOT") else f"sandbox: {line}")
        if limit.problem:
            problems.append(limit.problem)
    return lines + network_lines, problems
