"""Sandbox policy: what an evaluation or agent process may see and use, and the argv that enforces it."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Sequence

AUTO, BWRAP, NONE = "auto", "bwrap", "none"
MODES = (AUTO, BWRAP, NONE)
# An agent's network: the host's own (`host`), or a namespace of its own whose only way out is slirp4netns
# with the host's loopback cut off (`outside-only`; sandbox/private_network.py).
HOST_NETWORK, OUTSIDE_ONLY = "host", "outside-only"
AGENT_NETWORKS = (HOST_NETWORK, OUTSIDE_ONLY)

# The system, read-only. Merged-/usr systems have these as links into /usr; run.py says which are links.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
# Only what programs need from /etc: users, name resolution, TLS roots, the dynamic linker, time zone.
ETC_FILES = (
    "alternatives", "ca-certificates", "ca-certificates.conf", "crypto-policies", "gai.conf", "group",
    "host.conf", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "mime.types",
    "nsswitch.conf", "os-release", "passwd", "pki", "protocols", "resolv.conf", "services", "ssl", "timezone",
    # Debian's system Python reads its sitecustomize from here.
    "python3", "python3.9", "python3.10", "python3.11", "python3.12", "python3.13", "python3.14",
)  # fmt: skip
GIB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """Resource limits of the sandboxed process and each of its descendants (setrlimit).

    Attributes:
      processes: processes the command may add to those its user already runs (RLIMIT_NPROC).
      address_space: bytes of virtual memory per process (RLIMIT_AS); None = unlimited (Node-based
        agents reserve far more than they use).
      file_size: the largest file it may write, in bytes (RLIMIT_FSIZE).
      memory: bytes its processes may hold together, in a memory cgroup where one can be made (None: no cap).
      cpu_from_timeout: limit CPU time per process to timeout × cores (RLIMIT_CPU). Off for
        evaluations: an armed RLIMIT_CPU makes Linux sample the process CPU clock at the scheduler
        tick, so an evaluation that times itself with time.process_time() measures zeros (the wall
        timeout bounds its CPU time anyway).
      memory_fallback: where no memory cgroup can be made, RLIMIT_AS holds `memory` instead (for an agent, whose
        address space is otherwise unlimited, only when the program sets `max-memory`).
    """

    processes: int = 512
    address_space: int | None = 32 * GIB
    file_size: int = 1 * GIB
    cpu_from_timeout: bool = False
    memory: int | None = None
    memory_fallback: bool = False


@dataclass(frozen=True)
class SandboxPolicy:
    """How one kind of command (evaluation or agent) is confined.

    Attributes:
      mode: bwrap (namespaces, read-only system, only the work directory writable) or none (limits and
        a scrubbed environment only). `auto` is resolved to one of them before a policy is made.
      network: keep the network (an agent reaching its model; `evaluation-network: true`).
      outside_only: with network, the command gets a network namespace of its own whose only way out is
        slirp4netns without the host's loopback (`agent-network: outside-only`): no host loopback service,
        no abstract UNIX socket of the host. Needs bubblewrap and slirp4netns; never falls back to the host's.
      read_only: more directories to show read-only (the Python installation, tools on PATH).
      hidden: directories never shown, even inside a read-only one (the user's checkout, $HOME).
      home: the home directory path; inside bwrap it is an empty private directory.
      limits: the resource limits.
      process_limit: how the process limit is held: auto | cgroup | uid | off (sandbox/process_limit.py).
    """

    mode: str = NONE
    network: bool = False
    outside_only: bool = False
    read_only: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    home: str | None = None
    limits: Limits = field(default_factory=Limits)
    process_limit: str = "auto"

    @property
    def sandboxed(self) -> bool:
        """Whether commands run inside bubblewrap."""
        return self.mode == BWRAP


def evaluation_limits(max_memory: int | None, max_disk: int, total_memory: int | None) -> Limits:
    """Returns an evaluation's limits: RLIMIT_AS at `max-memory` (unset: half the machine's memory, 4 to 32 GiB) and
    no file larger than `max-disk` (nor than 1 GiB)."""
    default = 32 * GIB if total_memory is None else min(32 * GIB, max(4 * GIB, total_memory // 2))
    cap = max_memory or default
    return Limits(address_space=cap, file_size=min(1 * GIB, max_disk), memory=cap)


def agent_limits(evaluation: Limits, explicit_memory: bool) -> Limits:
    """Returns an agent's limits: the evaluation's memory cap (its processes together) and file size, CPU time from its
    timeout, and no RLIMIT_AS (Node-based agents reserve far more than they use) unless no memory cgroup can hold an
    explicit `max-memory`."""
    return Limits(
        address_space=None, cpu_from_timeout=True, file_size=evaluation.file_size, memory=evaluation.memory,
        memory_fallback=explicit_memory,
    )


def limit_args(limits: Limits, timeout: float, processes_now: int | None, cpus: int) -> list[str]:
    """Returns `prlimit` options setting the limits.

    Processes are counted on top of processes_now (None: no RLIMIT_NPROC).
    """
    args = [] if processes_now is None else [f"--nproc={processes_now + limits.processes}"]
    args.append(f"--fsize={limits.file_size}")
    if limits.cpu_from_timeout:
        args.append(f"--cpu={math.ceil(min(timeout, 1e7) * max(1, cpus)) + 10}")
    if limits.address_space is not None:
        args.append(f"--as={limits.address_space}")
    return args


def bwrap_args(
    policy: SandboxPolicy,
    workdir: str,
    *,
    cwd: str | None = None,
    writable: Sequence[str] = (),
    links: Sequence[tuple[str, str]] = (),
    present: Sequence[str] = (),
    as_user: bool = False,
) -> list[str]:
    """Returns the bubblewrap options that confine a command to `workdir` (the one writable tree).

    links: (path, target) of the system directories that are symbolic links (merged /usr);
    present: the system and /etc paths that exist (absent ones are skipped). Mounts are applied in
    order, so the private $HOME and /tmp go first and what must show through them is bound later.
    as_user: the command switches to another uid inside (a root runner's process limit): bwrap runs
    privileged, without a user namespace (one maps a single uid, and its root is still uid 0 to the
    kernel), and the directories it makes are open to that uid.
    """
    args = [] if as_user else ["--unshare-user"]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not policy.network or policy.outside_only:
        args.append("--unshare-net")
    args += ["--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev"]
    made: set[str] = set()

    def bind(option: str, path: str) -> None:
        if as_user:  # privileged bwrap makes a bind's missing parents 0700: the uid could not reach it
            for parent in reversed(PurePosixPath(path).parents[:-1]):
                if str(parent) not in made:
                    made.add(str(parent))
                    args.extend(["--perms", "0755", "--dir", str(parent)])
        args.extend([option, path, path])

    def private(path: str, perms: str = "1777") -> None:
        made.add(path)
        args.extend([*(["--perms", perms] if as_user else []), "--tmpfs", path])

    link_paths = {path for path, _ in links}
    for path, target in links:
        args += ["--symlink", target, path]
    for path in SYSTEM_DIRS:
        if path in present and path not in link_paths:
            bind("--ro-bind", path)
    for name in ETC_FILES:
        path = f"/etc/{name}"
        if path in present:
            bind("--ro-bind", path)
    private("/tmp")
    private("/var/tmp")
    private("/run", "0755")
    if policy.home and not _inside_any(policy.home, ("/tmp",)):
        private(policy.home)
    visible = _visible(policy)
    for path in sorted(visible, key=lambda p: len(PurePosixPath(p).parts)):
        bind("--ro-bind-try", path)
    for path in policy.hidden:
        if _inside_any(path, visible) and not _inside_any(workdir, (path,)):
            args += ["--tmpfs", path]
    for path in (workdir, *writable):
        bind("--bind", path)
    args += ["--chdir", cwd or workdir]
    return args


def _visible(policy: SandboxPolicy) -> list[str]:
    """Returns the read-only paths that do not reveal a hidden one (a path holding it would), nor $HOME.

    A path inside another shown one is already visible: binding it again would fail where it is a link (a
    virtualenv's bin/python3), since nothing can be created in a read-only tree.
    """
    private = [*policy.hidden, *([policy.home] if policy.home else [])]
    shown = []
    for path in dict.fromkeys(policy.read_only):
        if any(_inside_any(hidden, (path,)) for hidden in private):
            continue
        if _inside_any(path, SYSTEM_DIRS) or path == "/":
            continue
        shown.append(path)
    return [path for path in shown if not any(_inside_any(path, (other,)) for other in shown if other != path)]


def _inside_any(path: str, parents: Sequence[str]) -> bool:
    """Returns whether path is one of parents or below one of them."""
    parts = _parts(path)
    return any(parts[: len(above)] == above for above in map(_parts, parents))


@functools.lru_cache(maxsize=1024)
def _parts(path: str) -> tuple[str, ...]:
    """Returns a path's components (each evaluation compares the same few hundred paths again)."""
    return PurePosixPath(path).parts
