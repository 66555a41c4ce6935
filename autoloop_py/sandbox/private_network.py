"""An outside-only network for one sandboxed command: its own namespace, reached only through slirp4netns.

bubblewrap gives the command a fresh network namespace (`--unshare-net`) and reports the pid of its
first process on `--info-fd`; slirp4netns then attaches a `tap0` device to that namespace with
`--disable-host-loopback` (the gateway 10.0.2.2 does not lead to the host's 127.0.0.1), and only once it
is ready does bubblewrap start the command (`--block-fd`). The command reaches what the host reaches
through its routes, but not the host's loopback services, and no abstract UNIX socket of the host (those
belong to a network namespace). Its DNS is slirp's 10.0.2.3, named in a resolv.conf bound over
/etc/resolv.conf. Whatever fails here is a SandboxError: the command never runs on the host's network instead.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import subprocess
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Callable, Iterator, Sequence

from autoloop_py import tempdirs
from autoloop_py.errors import SandboxError

logger = logging.getLogger(__name__)

SLIRP = "slirp4netns"
DEVICE = "tap0"
DNS = "10.0.2.3"  # slirp's built-in resolver, which forwards to the host's
MTU = 65520
SETUP_TIMEOUT = 30.0
INSTALL_HINT = "install slirp4netns (Debian/Ubuntu: `apt-get install slirp4netns`) or set `agent-network: host`"
_LOG_CHARS = 600


def slirp_status() -> tuple[bool, str]:
    """Returns (usable, why not): slirp4netns is installed."""
    if shutil.which(SLIRP) is None:
        return False, f"{SLIRP} is not installed"
    return True, ""


def require_slirp(setting: str) -> None:
    """Raises SandboxError naming the fix when slirp4netns is missing (`setting` says who asked for it)."""
    usable, why = slirp_status()
    if not usable:
        raise SandboxError(f"{setting} needs {SLIRP}, but {why}; {INSTALL_HINT}")


class PrivateNetwork:
    """The bwrap options, descriptors and slirp4netns process of one command's outside-only network.

    Use `options` and `pass_fds` when spawning bwrap, call `start` right after it was spawned, `close` at the end.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.resolv = folder / "resolv.conf"
        self.resolv.write_text(f"nameserver {DNS}\n", encoding="utf-8")
        self.log = folder / "slirp4netns.log"
        self._info_r, self._info_w = os.pipe()
        self._block_r, self._block_w = os.pipe()
        self._slirp: subprocess.Popen[bytes] | None = None
        self._exit_w: int | None = None

    @property
    def options(self) -> list[str]:
        """Returns the bwrap options: report the child pid, wait for the network, resolve through slirp."""
        return [
            "--info-fd", str(self._info_w), "--block-fd", str(self._block_r),
            "--ro-bind", str(self.resolv), "/etc/resolv.conf",
        ]  # fmt: skip

    @property
    def pass_fds(self) -> tuple[int, int]:
        """Returns the descriptors bwrap inherits."""
        return self._info_w, self._block_r

    def start(self, process: subprocess.Popen[bytes]) -> None:
        """Attaches slirp4netns to the namespace of the bwrap just spawned, then lets its command start."""
        _close(self._info_w)
        _close(self._block_r)
        self._info_w = self._block_r = -1
        deadline = time.monotonic() + SETUP_TIMEOUT
        pid = _child_pid(self._info_r, deadline, lambda: _exited(process.pid))
        _wait_for_loopback(pid, deadline, lambda: _exited(process.pid))
        ready_r, ready_w = os.pipe()
        exit_r, self._exit_w = os.pipe()  # slirp4netns exits once this closes, also when the runner dies
        with self.log.open("wb") as log:
            self._slirp = subprocess.Popen(
                [
                    SLIRP, "--configure", f"--mtu={MTU}", "--disable-host-loopback", "--enable-sandbox",
                    "--enable-seccomp", f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", str(pid), DEVICE,
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(ready_w, exit_r),
            )  # fmt: skip
        _close(ready_w)
        _close(exit_r)
        try:
            slirp = self._slirp
            if not _readable(ready_r, deadline, lambda: slirp.poll() is not None) or not os.read(ready_r, 1):
                raise SandboxError(f"{SLIRP} could not attach the agent's network: {self._log_tail()}")
        finally:
            _close(ready_r)
        try:
            os.write(self._block_w, b"1")
        except OSError as err:
            raise SandboxError(f"bubblewrap ended before its network was ready: {err}") from None
        logger.debug("agent network: %s attached %s to pid %d (no host loopback)", SLIRP, DEVICE, pid)

    def close(self) -> None:
        """Stops slirp4netns and closes every descriptor."""
        for fd in (self._info_r, self._info_w, self._block_r, self._block_w, self._exit_w):
            if fd is not None and fd >= 0:
                _close(fd)
        self._exit_w = None
        if self._slirp is not None:
            self._slirp.terminate()
            try:
                self._slirp.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._slirp.kill()
                self._slirp.wait()

    def _log_tail(self) -> str:
        """Returns the end of slirp4netns's output, on one line."""
        try:
            text = self.log.read_text("utf-8", "replace")
        except OSError:
            text = ""
        code = self._slirp.poll() if self._slirp is not None else None
        said = " / ".join(line.strip() for line in text.splitlines() if line.strip())[-_LOG_CHARS:]
        return f"{said or 'no output'}{f' (exit status {code})' if code is not None else ''}"


@contextmanager
def private_network() -> Iterator[PrivateNetwork]:
    """Yields the outside-only network of one command; slirp4netns and the folder are gone afterwards."""
    require_slirp("agent-network: outside-only")
    with tempdirs.temporary("autoloop-net-") as folder:
        network = PrivateNetwork(folder)
        try:
            yield network
        finally:
            network.close()


def _child_pid(fd: int, deadline: float, ended: Callable[[], bool]) -> int:
    """Returns the sandbox's first pid from bwrap's --info-fd JSON."""
    data = b""
    while _readable(fd, deadline, ended):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            info = json.loads(data)
        except ValueError:
            continue
        if isinstance(info, dict) and isinstance(info.get("child-pid"), int):
            return info["child-pid"]
    why = "it exited" if ended() else f"not within {SETUP_TIMEOUT:g} s"
    raise SandboxError(f"bubblewrap did not report its sandbox's pid ({why}), so no network could be attached")


def _wait_for_loopback(pid: int, deadline: float, ended: Callable[[], bool]) -> None:
    """Waits until bubblewrap has set up the namespace's loopback (127.0.0.1 in its routing table).

    bubblewrap reports the pid before its loopback is up, and its netlink requests fail when slirp4netns
    configures tap0 in the same namespace at that moment (`loopback: Failed RTM_NEWADDR`): half the starts, here.
    """
    table = Path(f"/proc/{pid}/net/fib_trie")
    while time.monotonic() < deadline and not ended():
        with suppress(OSError):
            if "127.0.0.1" in table.read_text("utf-8", "replace"):
                return
        time.sleep(0.002)
    why = "it exited" if ended() else f"not within {SETUP_TIMEOUT:g} s"
    raise SandboxError(f"bubblewrap did not set up its sandbox's loopback ({why}), so no network could be attached")


def _readable(fd: int, deadline: float, ended: Callable[[], bool]) -> bool:
    """Waits until fd is readable (True), or the deadline passed or its writer ended with nothing to read (False)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while (remaining := deadline - time.monotonic()) > 0:
        if poller.poll(int(min(remaining, 0.2) * 1000) + 1):
            return True
        if ended():
            return bool(poller.poll(0))
    return False


def _exited(pid: int) -> bool:
    """Returns whether the child pid has exited, leaving it unreaped (its group is killed by pid afterwards)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _close(fd: int) -> None:
    with suppress(OSError):
        os.close(fd)


def network_report(requested: Sequence[tuple[str, str, str]]) -> tuple[list[str], list[str]]:
    """Returns (lines, problems) for `status` and `check`: requested holds (program, its `agent-network`, why its
    agent would not run in bubblewrap or '').

    A program asking for outside-only that this machine cannot give it (no bubblewrap, no slirp4netns) is a
    problem, named with its fix; its agent would refuse to start rather than use the host's network.
    """
    slirp_ok, slirp_why = slirp_status()
    outside = [(name, no_bwrap) for name, choice, no_bwrap in requested if choice.strip().lower() == "outside-only"]
    problems = []
    for name, no_bwrap in outside:
        if no_bwrap:
            problems.append(f"{name}: agent-network: outside-only needs bubblewrap, but {no_bwrap}")
        if not slirp_ok:
            problems.append(f"{name}: agent-network: outside-only needs {SLIRP}, but {slirp_why}; {INSTALL_HINT}")
    lines = []
    if outside:
        lines.append(
            f"sandbox: agents of {', '.join(name for name, _ in outside)} get a network of their own through {SLIRP} "
            "(no host loopback service, no abstract UNIX socket of the host)"
        )
    return lines, problems
