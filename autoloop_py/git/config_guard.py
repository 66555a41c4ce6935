"""No command a repository's config names runs in the runner's git: each is overridden on the command line.

Git runs programs its config names: `remote.<r>.uploadpack` on a fetch, `remote.<r>.receivepack` on a push,
`core.sshCommand`, credential helpers, `filter.<d>.clean` when an attribute names the filter, diff and merge
drivers, `gpg.program`, config-based hooks... An agent or evaluation that reaches the user's checkout (with no
sandbox, through `/proc/<pid>/cwd`) can write any of them into `.git/config`, and a candidate's `.gitattributes`
can switch on a filter the user's global config defines. So the runner reads the config git would read
(`git config --list --includes`, once per content of the config files) and adds a `-c` for every such key:
the command line is the last word in git's config (but for a remote's upload/receive-pack, where git keeps the
first value: the fetch or push then names the program itself, `--upload-pack=git-upload-pack`).

- Keys of the repository's own config (scope `local` or `worktree`, with what they include) that run a command
  are set back to the user's global value, else to git's default (`git-upload-pack`, `ssh`...); credential
  helpers are reset (`credential.helper=`) and the global ones named again, in order.
- Filter, diff and merge drivers are neutralised whatever their scope (attributes that switch them on come from
  the candidate's tree): no clean/smudge/process filter, no textconv, no external diff, the built-in text merge.
- A key that cannot be overridden (`remote.<r>.vcs`, a remote helper run by name) stops the runner's git.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from autoloop_py.errors import GitError

TRUSTED_SCOPES = frozenset({"global", "system", "command"})
# Set on every runner git command: nothing these switch on runs a program.
STATIC = (
    "core.pager=cat", "core.editor=:", "sequence.editor=:", "diff.external=", "commit.gpgSign=false",
    "tag.gpgSign=false", "push.gpgSign=false", "log.showSignature=false", "merge.verifySignatures=false",
    "submodule.recurse=false", "fetch.recurseSubmodules=false", "push.recurseSubmodules=no",
)  # fmt: skip
MERGE_FILE = "git merge-file --marker-size=%L %A %O %B"
# Untrusted `section.name` (no subsection) → git's default, unless the user's global config sets one.
_PLAIN_DEFAULTS = {
    "core.sshcommand": "ssh", "core.askpass": "", "core.alternaterefscommand": "", "gpg.program": "gpg",
    "diff.external": "",
}  # fmt: skip
# Untrusted `section.<sub>.name` → its default.
_SUB_DEFAULTS = {
    ("gpg", "program"): "", ("gpg", "defaultkeycommand"): "", ("trailer", "command"): "", ("trailer", "cmd"): "",
}  # fmt: skip
_GPG_PROGRAMS = {"openpgp": "gpg", "x509": "gpgsm", "ssh": "ssh-keygen"}
# Neutralised in every scope: the candidate's attributes choose which of them would run.
_DRIVERS = {
    ("filter", "clean"): "", ("filter", "smudge"): "", ("filter", "process"): "", ("filter", "required"): "false",
    ("diff", "textconv"): "cat", ("diff", "command"): "true", ("merge", "driver"): MERGE_FILE,
    ("hook", "command"): "true",
}  # fmt: skip
_REFUSED = {("remote", "vcs"): "a remote helper git runs by name"}
# `remote.<r>.uploadpack`/`receivepack`: git takes the FIRST value, so `-c` cannot override them; the command's own
# option does (`git push --receive-pack=…`). Key → (its default, the option, the commands that take it).
_PACKS = {
    "uploadpack": ("git-upload-pack", "--upload-pack", ("fetch", "ls-remote", "pull", "clone")),
    "receivepack": ("git-receive-pack", "--receive-pack", ("push",)),
}

@dataclass(frozen=True)
class ConfigEntry:
    """One line of `git config --list --show-scope --show-origin`.

    Attributes:
        scope: `local`, `worktree`, `global`, `system` or `command`.
        origin: where it was read (`file:<path>`, relative to the repository's directory when git says so).
        key: the key as git prints it (section and name lower-case, subsection as written).
        value: its value (None for a key written without `=`).
    """

    scope: str
    origin: str
    key: str
    value: str | None

    @property
    def parts(self) -> tuple[str, str | None, str]:
        """Returns (section, subsection or None, name)."""
        section, _, rest = self.key.partition(".")
        middle, _, name = rest.rpartition(".")
        return section.lower(), middle or None, name.lower()

    @property
    def trusted(self) -> bool:
        """Returns whether the user wrote it outside the repository (global config, the command line)."""
        return self.scope in TRUSTED_SCOPES


def parse_listing(raw: bytes) -> list[ConfigEntry]:
    """Returns the entries of `git config --list -z --show-scope --show-origin` output."""
    fields = raw.decode("utf-8", "surrogateescape").split("\0")
    entries = []
    for at in range(0, len(fields) - 2, 3):
        key, newline, value = fields[at + 2].partition("\n")
        entries.append(ConfigEntry(fields[at], fields[at + 1], key, value if newline else None))
    return entries


def overrides(entries: Sequence[ConfigEntry]) -> tuple[str, ...]:
    """Returns the `-c key=value` arguments that keep every command the config names from running.

    Raises GitError for a key no override can make safe, naming it and where it is set.
    """
    settings: dict[str, str] = {}
    for entry in entries:
        section, sub, name = entry.parts
        if (section, name) in _DRIVERS and sub is not None:
            settings[entry.key] = _DRIVERS[(section, name)]
        if entry.trusted:
            continue
        if (section, name) in _REFUSED and sub is not None:
            raise GitError(
                f"the repository's config sets {entry.key} ({_REFUSED[(section, name)]}, in {entry.origin}); "
                "autoloop's git runs no command a repository's config names: remove it with "
                f"`git config --unset {entry.key}`"
            )
        default = _untrusted_default(section, sub, name)
        if default is not None:
            trusted = [e.value or "" for e in entries if e.trusted and e.key.lower() == entry.key.lower()]
            settings[entry.key] = trusted[-1] if trusted else default
        elif f"{section}.{name}" == "core.gitproxy":
            settings["protocol.git.allow"] = "never"  # first match wins for gitProxy: git:// is refused instead
    arguments = [f"{key}={value}" for key, value in settings.items()]
    if any(not e.trusted and _is_credential_helper(e) for e in entries):
        helpers = [f"{e.key}={e.value or ''}" for e in entries if e.trusted and _is_credential_helper(e)]
        arguments += ["credential.helper=", *helpers]  # the empty helper resets the list; the user's come back
    return tuple(item for setting in (*STATIC, *arguments) for item in ("-c", setting))


def _untrusted_default(section: str, sub: str | None, name: str) -> str | None:
    """Returns git's default for a command-running key of the repository's config (None: not one)."""
    if section == "pager":
        return "false"  # pager.<command>: a pager (a command) for that git command
    if sub is None:
        return _PLAIN_DEFAULTS.get(f"{section}.{name}")
    if section == "gpg" and name == "program":
        return _GPG_PROGRAMS.get(sub.lower(), "")
    return _SUB_DEFAULTS.get((section, name))


def _is_credential_helper(entry: ConfigEntry) -> bool:
    section, _, name = entry.parts
    return section == "credential" and name == "helper"


def watched_files(entries: Iterable[ConfigEntry], cwd: Path) -> list[Path]:
    """Returns the files the listing came from and those its includes name (also those that do not exist yet)."""
    found: list[Path] = []
    for entry in entries:
        origin = Path(entry.origin.removeprefix("file:")) if entry.origin.startswith("file:") else None
        if origin is not None:
            origin = origin if origin.is_absolute() else cwd / origin
            found.append(origin)
        section, _, name = entry.parts
        if section in ("include", "includeif") and name == "path" and entry.value:
            named = Path(os.path.expanduser(entry.value))
            found.append(named if named.is_absolute() or origin is None else origin.parent / named)
    return sorted(set(found))


def base_files(git_dir: Path, common: Path, environ: Mapping[str, str]) -> list[Path]:
    """Returns the config files git reads for a repository before any include: its own and the user's global ones."""
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    xdg = Path(environ["XDG_CONFIG_HOME"]) if environ.get("XDG_CONFIG_HOME") else home / ".config"
    globals_ = [Path(environ["GIT_CONFIG_GLOBAL"])] if environ.get("GIT_CONFIG_GLOBAL") else [
        home / ".gitconfig", xdg / "git" / "config"
    ]
    return [common / "config", common / "config.worktree", git_dir / "config.worktree", *globals_]


def contents(paths: Iterable[Path]) -> str:
    """Returns a digest of the files' contents (a missing or unreadable file counts as such)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.fsencode(path) + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest() if path.is_file() else b"-")
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()


@dataclass(frozen=True)
class Guard:
    """The overrides for one content of a repository's config files.

    Attributes:
        arguments: the `-c` arguments.
        watched: the included files the listing named, and the digest of their contents when it was made.
    """

    arguments: tuple[str, ...]
    watched: tuple[Path, ...]
    digest: str
    packs: Mapping[str, str] = field(default_factory=dict)

    def command(self, args: Sequence[str]) -> tuple[str, ...]:
        """Returns `args` (a git subcommand and its arguments) with the upload/receive-pack option it needs."""
        for key, value in self.packs.items():
            _, option, commands = _PACKS[key]
            if args and args[0] in commands:
                return (args[0], f"{option}={value}", *args[1:])
        return tuple(args)


def packs(entries: Sequence[ConfigEntry]) -> dict[str, str]:
    """Returns uploadpack/receivepack → the program a fetch/push must name, when the repository's config sets one."""
    found = {}
    for entry in entries:
        section, sub, name = entry.parts
        if section == "remote" and sub is not None and name in _PACKS and not entry.trusted:
            trusted = [e.value for e in entries
                       if e.trusted and e.parts[0] == "remote" and e.parts[2] == name and e.value]
            found[name] = trusted[0] if trusted else _PACKS[name][0]
    return found


def fresh_guard(raw: bytes, cwd: Path) -> Guard:
    """Returns the guard of a config listing."""
    entries = parse_listing(raw)
    watched = tuple(watched_files(entries, cwd))
    return Guard(overrides(entries), watched, contents(watched), packs(entries))
