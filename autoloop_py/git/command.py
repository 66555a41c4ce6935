"""Git plumbing shared by memory.py and workspace.py: run a command, refs as compare-and-swap, remotes."""

from __future__ import annotations

import functools
import logging
import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import git

from autoloop_py import tempdirs
from autoloop_py.errors import GitError
from autoloop_py.git import config_guard

logger = logging.getLogger(__name__)

DEFAULT_NAME = "autoloop"
DEFAULT_EMAIL = "autoloop@users.noreply.github.com"

# Settings every runner git command carries: a planted hook, fsmonitor or `ext::` remote never runs.
HARDENING = (
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never",
)  # fmt: skip
# What every runner git command sees of the environment: no secret, no GIT_DIR/GIT_CONFIG_* from outside.
GIT_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "SYSTEMROOT", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL",
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
)  # fmt: skip
# Added for the commands that reach a remote: authentication and proxies.
GIT_NETWORK_ENV = (
    "SSH_AUTH_SOCK", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS", "SSH_ASKPASS",
    "GH_TOKEN", "GITHUB_TOKEN", "GH_HOST", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN", "GH_CONFIG_DIR",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "SSL_CERT_FILE", "SSL_CERT_DIR",
)  # fmt: skip
NETWORK_COMMANDS = frozenset({"push", "fetch", "ls-remote", "pull", "clone"})
FETCH_ATTEMPTS = 5


@dataclass(frozen=True)
class GitResult:
    """The outcome of one git command.

    Attributes:
        args: the arguments after `git`.
        status: the exit code.
        stdout: raw standard output.
        stderr: standard error, decoded, without its final newline.
    """

    args: tuple[str, ...]
    status: int
    stdout: bytes
    stderr: str

    @property
    def ok(self) -> bool:
        """Returns whether the command exited with status 0."""
        return self.status == 0

    @property
    def text(self) -> str:
        """Returns stdout decoded, without trailing newlines."""
        return self.stdout.decode("utf-8", "surrogateescape").rstrip("\n")


def open_repo(root: Path) -> git.Repo:
    """Opens the repository whose top-level directory is `root`."""
    try:
        return git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as err:
        raise GitError(f"not a git repository ({err}); run autoloop from a git checkout", path=root) from err


def where(repo: git.Repo) -> Path:
    """Returns the directory a repository's commands run in (its worktree, or git dir when bare)."""
    return Path(repo.working_tree_dir or repo.git_dir)


def call(
    repo: git.Repo, *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> GitResult:
    """Runs `git <args>` in the repository, hardened (see `hardened_command`), and returns its outcome."""
    return start(repo, *args, env=env, stdin=stdin).result()


@dataclass(frozen=True)
class Running:
    """A git command started by `start` and not yet waited for.

    Attributes:
        args: the arguments after `git`.
        process: the running git.
        stdin: what its standard input reads (None: nothing).
    """

    args: tuple[str, ...]
    process: subprocess.Popen[bytes]
    stdin: bytes | None = None

    def result(self) -> GitResult:
        """Waits for the command and returns its outcome."""
        stdout, stderr = self.process.communicate(self.stdin)
        text = stderr.decode("utf-8", "replace").removesuffix("\n")
        return GitResult(self.args, self.process.returncode, stdout, text)


def start(
    repo: git.Repo, *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> Running:
    """Starts `git <args>` as `call` runs it, without waiting: its result() is the outcome."""
    command, environment = _prepared(repo, args, env)
    try:
        piped = subprocess.DEVNULL if stdin is None else subprocess.PIPE
        process = subprocess.Popen(command, cwd=where(repo), env=environment, stdin=piped, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
    except FileNotFoundError as error:
        raise GitError(f"cannot run git ({error}); install git and put it on PATH") from error
    return Running(tuple(args), process, stdin)


def _prepared(repo: git.Repo, args: Sequence[str], env: Mapping[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """Returns the hardened command line and the environment of `git <args>` in the repository."""
    environment = git_environment(os.environ, network=bool(args) and args[0] in NETWORK_COMMANDS)
    environment.update(location(repo))
    environment.update(env or {})
    guard = guarded(repo, environment)
    return hardened_command(guard.command(args), guard.arguments), environment


def hardened_command(args: Iterable[str], guard: Sequence[str] = ()) -> list[str]:
    """Returns the git command line for `args` with hooks, fsmonitor and command-running transports off.

    Whatever a repository's config (or an include it names) says, these `-c` settings win: no hook
    or fsmonitor program runs, and no `ext::` remote runs a command. guard: the `-c` overrides of the
    commands the repository's config names (`guarded`).
    """
    return [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *HARDENING, *guard, *args]


def guarded(repo: git.Repo, environment: Mapping[str, str]) -> config_guard.Guard:
    """Returns the `-c` overrides that keep every command the repository's config names from running."""
    return guarded_at(where(repo), Path(repo.git_dir).resolve(), common_dir(repo), environment)


def guarded_at(cwd: Path, git_dir: Path, common: Path, environment: Mapping[str, str]) -> config_guard.Guard:
    """Returns the `-c` overrides of the config git reads for the repository at git_dir (see `config_guard`), run
    in cwd with environment; listed again whenever a config file, or one it includes, changed."""
    base = config_guard.contents(config_guard.base_files(git_dir, common, environment))
    # What authentication needs (tokens, agents, proxies) changes nothing git reads as config: one listing serves both.
    listed = tuple(sorted((k, v) for k, v in environment.items() if k not in GIT_NETWORK_ENV))
    key = (str(cwd), base, listed)
    guard = _listed_guard(*key)
    if config_guard.contents(guard.watched) != guard.digest:
        _listed_guard.cache_clear()
        guard = _listed_guard(*key)
    return guard


@functools.lru_cache(maxsize=64)
def _listed_guard(cwd: str, base_digest: str, environment: tuple[tuple[str, str], ...]) -> config_guard.Guard:
    """Lists the config git reads in `cwd` with `environment` (base_digest: the content it is cached for)."""
    del base_digest
    command = [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *HARDENING, "config", "--list", "-z", "--includes",
               "--show-scope", "--show-origin"]  # fmt: skip
    try:
        done = subprocess.run(command, cwd=cwd, env=dict(environment), stdin=subprocess.DEVNULL, capture_output=True,
                              check=False)  # fmt: skip
    except FileNotFoundError as error:
        raise GitError(f"cannot run git ({error}); install git and put it on PATH") from error
    if done.returncode not in (0, 1):  # 1: no config at all
        message = done.stderr.decode("utf-8", "replace").strip()
        failed = f"`git config --list` failed (exit {done.returncode}): {message}; fix the config"
        raise GitError(failed, path=Path(cwd))
    return config_guard.fresh_guard(done.stdout, Path(cwd))


def git_environment(environ: Mapping[str, str], *, network: bool = False) -> dict[str, str]:
    """Returns the environment of the runner's git: the allow-listed variables of environ, no system config.

    Only commands that talk to a remote (`network`) also get what authentication needs (an SSH agent,
    askpass, the tokens a credential helper such as `gh auth git-credential` reads, proxies).
    """
    names = set(GIT_ENV) | (set(GIT_NETWORK_ENV) if network else set())
    env = {name: value for name, value in environ.items() if name in names}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LANGUAGE": "C",
                "LC_ALL": "C"})
    return env


def location(repo: git.Repo) -> dict[str, str]:
    """Returns GIT_DIR (and GIT_WORK_TREE) naming the repository, so git never discovers another `.git`."""
    located = {"GIT_DIR": str(Path(repo.git_dir).resolve())}
    if repo.working_tree_dir is not None:
        located["GIT_WORK_TREE"] = str(Path(repo.working_tree_dir).resolve())
    return located


def common_dir(repo: git.Repo) -> Path:
    """Returns the git directory every worktree of the repository shares (`git rev-parse --git-common-dir`, read
    from the `commondir` file instead of asking a git process)."""
    return Path(repo.common_dir).resolve()


def failure(result: GitResult, repo: git.Repo, hint: str = "") -> GitError:
    """Returns the GitError for a failed command: the command, its stderr and the next step."""
    command = shlex.join(["git", *result.args])
    message = f"`{command}` failed (exit {result.status}): {result.stderr.strip() or 'no error output'}"
    return GitError(f"{message}; {hint}" if hint else message, path=where(repo))


def run(
    repo: git.Repo,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    hint: str = "",
) -> str:
    """Runs `git <args>` and returns its stdout as text; raises GitError when it fails."""
    result = call(repo, *args, env=env, stdin=stdin)
    if not result.ok:
        raise failure(result, repo, hint)
    return result.text


def rev_parse(repo: git.Repo, rev: str) -> str | None:
    """Returns the commit sha `rev` names, or None when it names no commit."""
    result = call(repo, "rev-parse", "-q", "--verify", f"{rev}^{{commit}}")
    return result.text if result.ok else None


def tree_paths(repo: git.Repo, commit: str, prefix: str = "") -> list[str]:
    """Returns the sorted paths of the files in commit's tree that start with prefix."""
    raw = call(repo, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit).stdout
    names = (name.decode("utf-8", "surrogateescape") for name in raw.split(b"\0") if name)
    return sorted(name for name in names if name.startswith(prefix))


def is_ancestor(repo: git.Repo, ancestor: str, descendant: str) -> bool:
    """Returns whether commit `ancestor` is reachable from `descendant` (or equal to it)."""
    result = call(repo, "merge-base", "--is-ancestor", ancestor, descendant)
    if result.status in (0, 1):
        return result.ok
    raise failure(result, repo, "check that both commits exist locally")


def update_ref(repo: git.Repo, ref: str, new: str, old: str | None, reason: str = "autoloop") -> bool:
    """Moves `ref` to `new` only if it still points at `old` (None: must not exist); False if it moved."""
    result = call(repo, "update-ref", "-m", reason, ref, new, old or "")
    if result.ok:
        return True
    current = call(repo, "rev-parse", "-q", "--verify", ref)
    if (current.text if current.ok else None) != old:
        logger.debug("compare-and-swap on %s lost: expected %s", ref, old)
        return False
    raise failure(result, repo, f"check that {ref} is a valid, unlocked ref")


def has_remote(repo: git.Repo, remote: str) -> bool:
    """Returns whether the repository has a remote with this name."""
    return remote in run(repo, "remote").split()


def list_remote(repo: git.Repo, remote: str, branches: Iterable[str]) -> dict[str, str]:
    """Returns branch → sha of those `branches` the remote has, with one `git ls-remote`."""
    wanted = {f"refs/heads/{branch}": branch for branch in branches}
    hint = f"check that the remote '{remote}' is reachable and you may read it"
    listing = run(repo, "ls-remote", remote, *wanted, hint=hint)
    pairs = (line.split("\t", 1) for line in listing.splitlines() if "\t" in line)
    return {wanted[ref]: sha for sha, ref in pairs if ref in wanted}


def fetch_branches(
    repo: git.Repo, remote: str, branches: Iterable[str], resolve: Callable[[str], str | None] | None = None,
    listed: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Fetches the branches the remote has into refs/remotes/<remote>/; returns branch → sha.

    A branch whose tracking ref already is at the listed sha is not fetched again (the common case
    right after this runner pushed it): the ref and its objects are here, so a fetch would change nothing.
    resolve: returns the commit a ref names (a session's object reader); None asks `git for-each-ref`.
    listed: branch → sha of what the remote holds, as a listing just made says (None: `git ls-remote` asks it).
    """
    names = list(branches)
    hint = f"check that the remote '{remote}' is reachable and you may read it"
    if listed is None:
        listed = list_remote(repo, remote, names)
    listed = {branch: sha for branch, sha in listed.items() if branch in names}
    if not listed:
        return {}
    tracking = {branch: f"refs/remotes/{remote}/{branch}" for branch in listed}
    if resolve_refs(repo, tracking.values(), resolve) == {tracking[b]: sha for b, sha in listed.items()}:
        return listed
    refspecs = [f"+refs/heads/{b}:{tracking[b]}" for b in listed]
    for attempt in range(FETCH_ATTEMPTS):
        # Runs sharing a clone fetch at once: one loses the tracking ref's update ("cannot lock ref") or
        # reads a pack another is writing ("did not send all necessary objects"); the remote answered
        # ls-remote just now, so the fetch is redone.
        fetched = call(repo, "fetch", "--quiet", "--no-tags", remote, *refspecs)
        if fetched.ok:
            break
        time.sleep(0.05 * (attempt + 1))
    if not fetched.ok:
        raise failure(fetched, repo, hint)
    found = resolve_refs(repo, tracking.values(), resolve)
    return {branch: found[ref] for branch, ref in tracking.items() if ref in found}


def resolve_refs(
    repo: git.Repo, refs: Iterable[str], resolve: Callable[[str], str | None] | None = None
) -> dict[str, str]:
    """Returns full ref name → commit sha for those of `refs` (full names) that exist, with one git process
    (or none: `resolve`, a session's object reader, answers each).

    A ref at an annotated tag maps to the tagged commit; one at no commit is left out.
    """
    names = sorted(set(refs))
    if resolve is not None:
        return {name: sha for name in names if (sha := resolve(name)) is not None}
    if not names:
        return {}
    listing = call(
        repo, "for-each-ref", "--format=%(objectname) %(objecttype) %(*objectname) %(*objecttype) %(refname)", *names
    )
    found: dict[str, str] = {}
    for line in listing.text.splitlines() if listing.ok else ():
        sha, kind, peeled, peeled_kind, name = line.split(" ", 4)
        if name not in names:
            continue  # for-each-ref also lists the refs under a name given as a folder
        if kind == "commit":
            found[name] = sha
        elif peeled_kind == "commit":
            found[name] = peeled
    return found


def push_branch(
    repo: git.Repo, remote: str, sha: str, branch: str, expected: str | None, *, built_on: str | None = None,
    resolve: Callable[[str], str | None] | None = None,
) -> GitResult:
    """Pushes commit `sha` to the remote's `branch` by compare-and-swap; updates the tracking ref when it lands.

    The remote branch moves only if it still is at `expected` (None: it must not exist yet), and only
    forward: `sha` must descend from `expected`. A sha, never a ref name, is pushed, so nothing that
    moved a local ref meanwhile can change what leaves the machine. built_on: a commit that `sha` is
    known to be or to be a child of (the caller made it so); when it is `expected`, the descent holds
    without asking git. resolve: returns the commit a ref names (a session's object reader); git push moves the
    tracking ref itself when the remote's fetch refspec maps the branch, and resolve tells whether it did.
    """
    pushing = start_push(repo, remote, sha, branch, expected, built_on=built_on)
    return pushing if isinstance(pushing, GitResult) else finish_push(repo, pushing, remote, sha, branch, resolve)


def start_push(
    repo: git.Repo, remote: str, sha: str, branch: str, expected: str | None, *, built_on: str | None = None
) -> Running | GitResult:
    """Starts push_branch's push without waiting (finish_push ends it); a GitResult when it is refused at once."""
    known = built_on is not None and built_on == expected
    if expected is not None and not known and not is_ancestor(repo, expected, sha):
        return GitResult(("push", remote, branch), 1, b"", f"{sha[:12]} does not descend from {expected[:12]}")
    lease = f"--force-with-lease=refs/heads/{branch}:{expected or ''}"
    return start(repo, "push", "--quiet", "--no-verify", lease, remote, f"{sha}:refs/heads/{branch}")


def finish_push(
    repo: git.Repo, pushing: Running, remote: str, sha: str, branch: str,
    resolve: Callable[[str], str | None] | None = None,
) -> GitResult:
    """Waits for a push start_push started; returns push_branch's outcome (the tracking ref moved when it landed)."""
    result = pushing.result()
    if not result.ok:  # another run sharing this clone may have pushed it already
        listed = call(repo, "ls-remote", remote, f"refs/heads/{branch}")
        if listed.ok and listed.text.split("\t", 1)[0] == sha:
            result = GitResult(result.args, 0, result.stdout, "")
    tracking = f"refs/remotes/{remote}/{branch}"
    if result.ok and (resolve is None or resolve(tracking) != sha):
        run(repo, "update-ref", "-m", "autoloop push", tracking, sha)
    return result


def tracking_tip(repo: git.Repo, remote: str, branch: str) -> str | None:
    """Returns what the runner last fetched of (or pushed to) the remote's `branch`, None when it has not seen it."""
    return rev_parse(repo, f"refs/remotes/{remote}/{branch}")


def hash_objects(repo: git.Repo, kind: str, contents: Sequence[bytes]) -> list[str]:
    """Stores every content as a `kind` object with one `hash-object --stdin-paths`; returns their ids in order."""
    if not contents:
        return []
    with tempdirs.temporary("autoloop-objects-") as tmp:
        paths = []
        for content in contents:
            path = Path(tmp) / f"{kind}-{len(paths)}"
            path.write_bytes(content)
            paths.append(str(path))
        listing = "".join(p + "\n" for p in paths).encode()
        # --no-filters: the bytes are stored as given, whatever attributes the repository sets.
        shas = run(repo, "hash-object", "-w", "-t", kind, "--no-filters", "--stdin-paths", stdin=listing).split()
    if len(shas) != len(paths):
        raise GitError(f"git hash-object stored {len(shas)} of {len(paths)} objects; run `git fsck`", path=where(repo))
    return shas


def identity_env(repo: git.Repo) -> dict[str, str]:
    """Returns env vars that give commits autoloop's identity when the repository (at any config level) has none."""
    named = (call(repo, "config", "--get", key) for key in ("user.name", "user.email"))  # asked until one is unset
    if all(found.ok and found.text for found in named):
        return {}
    return {
        "GIT_AUTHOR_NAME": DEFAULT_NAME,
        "GIT_AUTHOR_EMAIL": DEFAULT_EMAIL,
        "GIT_COMMITTER_NAME": DEFAULT_NAME,
        "GIT_COMMITTER_EMAIL": DEFAULT_EMAIL,
    }


def default_branch(repo_root: Path, remote: str = "origin") -> str:
    """Returns the remote's HEAD branch if known, else `main`, else `master`, else the current branch."""
    repo = open_repo(repo_root)
    try:
        head = call(repo, "symbolic-ref", "-q", f"refs/remotes/{remote}/HEAD")
        if head.ok and head.text:
            return head.text.removeprefix(f"refs/remotes/{remote}/")
        for name in ("main", "master"):
            if rev_parse(repo, f"refs/heads/{name}") or rev_parse(repo, f"refs/remotes/{remote}/{name}"):
                return name
        current = call(repo, "symbolic-ref", "-q", "--short", "HEAD")
        if current.ok and current.text:
            return current.text
    finally:
        repo.close()
    raise GitError(
        "cannot tell the default branch (no origin HEAD, no main or master, detached HEAD); "
        "name the base branch explicitly",
        path=repo_root,
    )


def changed_paths(repo: git.Repo) -> list[str]:
    """Returns the sorted paths the working tree changed against HEAD, tracked or untracked (both sides of renames)."""
    result = call(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    if not result.ok:
        raise failure(result, repo)
    fields = iter(result.stdout.split(b"\0"))
    paths: set[str] = set()
    for entry in fields:
        if len(entry) < 4:
            continue
        paths.add(entry[3:].decode("utf-8", "surrogateescape"))
        # A rename or copy names its source in the next field.
        if entry[:1] in (b"R", b"C") and (source := next(fields, None)) is not None:
            paths.add(source.decode("utf-8", "surrogateescape"))
    return sorted(paths)
