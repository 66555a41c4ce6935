"""No command a repository's config names runs in the runner's git: the overrides, and real git commands that would
run each planted command (a fetch, a push, `git add`, a checkout, a merge) running none."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.errors import GitError
from autoloop_py.git import command as gitutil
from autoloop_py.git.config_guard import ConfigEntry, fresh_guard, overrides, parse_listing, watched_files
from autoloop_py.sandbox.candidate_dir import init_scratch_repo


def _settings(entries: list[ConfigEntry]) -> dict[str, list[str]]:
    args = overrides(entries)
    found: dict[str, list[str]] = {}
    for flag, setting in zip(args[::2], args[1::2]):
        assert flag == "-c"
        key, _, value = setting.partition("=")
        found.setdefault(key, []).append(value)
    return found


def test_the_listing_is_parsed_with_scope_origin_and_valueless_keys() -> None:
    raw = b"local\0file:.git/config\0remote.Origin.uploadpack\ntouch x\0global\0file:/h/.gitconfig\0core.bare\0"
    assert parse_listing(raw) == [
        ConfigEntry("local", "file:.git/config", "remote.Origin.uploadpack", "touch x"),
        ConfigEntry("global", "file:/h/.gitconfig", "core.bare", None),
    ]


def test_commands_of_the_repository_config_are_set_back_to_the_users_or_gits_default() -> None:
    local = "file:.git/config"
    found = _settings([
        ConfigEntry("local", local, "remote.Origin.uploadpack", "evil"),
        ConfigEntry("local", local, "remote.origin.receivepack", "evil"),
        ConfigEntry("global", "file:/h", "core.sshcommand", "ssh -i key"),
        ConfigEntry("local", local, "core.sshcommand", "evil"),
        ConfigEntry("worktree", local, "core.askpass", "evil"),
        ConfigEntry("local", local, "gpg.x509.program", "evil"),
        ConfigEntry("local", local, "core.gitproxy", "evil for example.com"),
        ConfigEntry("local", local, "pager.log", "evil"),
    ])  # fmt: skip
    assert "remote.Origin.uploadpack" not in found  # git keeps the first value: the command names its own
    assert found["core.sshcommand"] == ["ssh -i key"]  # the user's global value comes back
    assert found["core.askpass"] == [""] and found["gpg.x509.program"] == ["gpgsm"]
    assert found["protocol.git.allow"] == ["never"] and found["pager.log"] == ["false"]
    assert found["core.pager"] == ["cat"] and found["diff.external"] == [""]


def test_drivers_are_neutralised_in_every_scope_and_a_trusted_command_is_left_alone() -> None:
    found = _settings([
        ConfigEntry("global", "file:/h", "filter.lfs.clean", "git-lfs clean -- %f"),
        ConfigEntry("global", "file:/h", "filter.lfs.process", "git-lfs filter-process"),
        ConfigEntry("local", "file:c", "diff.evil.textconv", "evil"),
        ConfigEntry("local", "file:c", "diff.evil.command", "evil"),
        ConfigEntry("local", "file:c", "merge.evil.driver", "evil %A"),
        ConfigEntry("global", "file:/h", "hook.audit.command", "evil"),
        ConfigEntry("global", "file:/h", "core.sshcommand", "ssh -i key"),
    ])  # fmt: skip
    assert found["filter.lfs.clean"] == [""] and found["filter.lfs.process"] == [""]
    assert found["diff.evil.textconv"] == ["cat"] and found["diff.evil.command"] == ["true"]
    assert found["merge.evil.driver"] == ["git merge-file --marker-size=%L %A %O %B"]
    assert found["hook.audit.command"] == ["true"]
    assert "core.sshcommand" not in found  # only the global config names it: the user's own


def test_a_fetch_or_push_names_its_pack_program_when_the_repository_config_sets_one() -> None:
    guard = fresh_guard(
        b"local\0file:c\0remote.Origin.uploadpack\nevil\0local\0file:c\0remote.origin.receivepack\nevil\0", Path("/r")
    )
    assert guard.command(("fetch", "origin")) == ("fetch", "--upload-pack=git-upload-pack", "origin")
    assert guard.command(("ls-remote", "origin")) == ("ls-remote", "--upload-pack=git-upload-pack", "origin")
    assert guard.command(("push", "origin", "a:b")) == ("push", "--receive-pack=git-receive-pack", "origin", "a:b")
    assert guard.command(("status",)) == ("status",)
    assert fresh_guard(b"", Path("/r")).command(("push", "origin")) == ("push", "origin")


def test_credential_helpers_of_the_repository_are_dropped_and_the_users_kept_in_order() -> None:
    found = overrides([
        ConfigEntry("global", "file:/h", "credential.helper", "cache"),
        ConfigEntry("local", "file:c", "credential.https://example.com.helper", "!evil"),
        ConfigEntry("global", "file:/h", "credential.https://github.com.helper", "!gh auth git-credential"),
    ])  # fmt: skip
    joined = [found[i + 1] for i in range(0, len(found), 2)]
    at = joined.index("credential.helper=")
    assert joined[at + 1:] == ["credential.helper=cache", "credential.https://github.com.helper=!gh auth git-credential"]
    assert not any("evil" in setting for setting in joined)


def test_a_remote_helper_named_by_the_repository_config_stops_the_runner_git() -> None:
    with pytest.raises(GitError, match=r"remote\.origin\.vcs .*git config --unset remote\.origin\.vcs"):
        overrides([ConfigEntry("local", "file:.git/config", "remote.origin.vcs", "evil")])


def test_included_files_are_watched_also_before_they_exist(tmp_path: Path) -> None:
    entries = [
        ConfigEntry("local", "file:.git/config", "include.path", "../extra.cfg"),
        ConfigEntry("local", f"file:{tmp_path}/inc.cfg", "includeif.onbranch:main.path", "/abs/later.cfg"),
    ]
    assert watched_files(entries, tmp_path) == sorted({
        tmp_path / ".git/config", tmp_path / ".git/../extra.cfg", tmp_path / "inc.cfg", Path("/abs/later.cfg")
    })  # fmt: skip


@pytest.fixture
def planted(git_repo_with_origin: Path, tmp_path: Path, run_git) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """Returns (repository, marker): its config names a payload for every command-running key a runner git meets."""
    marker = tmp_path / "PAYLOAD-RAN"
    payload = tmp_path / "payload.sh"
    payload.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
    payload.chmod(0o755)
    repo = git_repo_with_origin
    included = tmp_path / "later.cfg"
    for key in ("remote.origin.uploadpack", "remote.origin.receivepack", "filter.evil.clean", "filter.evil.smudge",
                "filter.evil.process", "diff.evil.textconv", "diff.evil.command", "merge.evil.driver",
                "core.sshCommand", "core.askPass", "core.pager", "core.editor", "gpg.program", "credential.helper"):
        run_git(repo, "config", key, f"!{payload}" if key == "credential.helper" else str(payload))
    run_git(repo, "config", "filter.evil.required", "true")
    run_git(repo, "config", "include.path", str(included))
    (repo / ".git/info").mkdir(exist_ok=True)
    (repo / ".git/info/attributes").write_text("* filter=evil diff=evil merge=evil\nlate.txt filter=late\n")
    (repo / "a.txt").write_text("a\n")
    return repo, marker


def test_planted_commands_never_run_in_fetch_push_add_checkout_and_merge(
    planted: tuple[Path, Path], tmp_path: Path, run_git  # type: ignore[no-untyped-def]
) -> None:
    repo, marker = planted
    handle = gitutil.open_repo(repo)
    gitutil.run(handle, "add", "a.txt")
    gitutil.run(handle, "commit", "-qm", "a")
    gitutil.run(handle, "checkout", "-q", "-b", "side")
    (repo / "a.txt").write_text("a\nside\n")
    gitutil.run(handle, "commit", "-qam", "side")
    gitutil.run(handle, "checkout", "-q", "main")
    (repo / "b.txt").write_text("b\n")
    gitutil.run(handle, "add", "b.txt")
    gitutil.run(handle, "commit", "-qm", "b")
    gitutil.run(handle, "merge", "-q", "--no-edit", "side")
    assert (repo / "a.txt").read_text() == "a\nside\n"
    gitutil.run(handle, "show", "HEAD~1", "--textconv")
    sha = gitutil.run(handle, "rev-parse", "HEAD")
    assert gitutil.push_branch(handle, "origin", sha, "pushed", None).ok
    assert gitutil.fetch_branches(handle, "origin", ["main", "pushed"])["pushed"] == sha
    # A filter an include defines after the runner listed the config is seen at the next command.
    (tmp_path / "later.cfg").write_text(f"[filter \"late\"]\n\tclean = {marker.parent / 'payload.sh'} late\n")
    (repo / "late.txt").write_text("late\n")
    gitutil.run(handle, "add", "late.txt")
    assert not marker.exists(), marker.read_text()
    assert run_git(repo, "cat-file", "-p", "HEAD:a.txt") == "a\nside"


def test_a_candidate_attributes_file_switches_on_no_global_filter(
    tmp_path: Path, isolated_git_config: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's global config defines a filter; the candidate's tree names it for every file.
    marker = tmp_path / "FILTER-RAN"
    glob = tmp_path / "global.cfg"
    glob.write_text(f"[filter \"mine\"]\n\tclean = touch {marker}; cat\n\tsmudge = touch {marker}; cat\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(glob))
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / ".gitattributes").write_text("* filter=mine\n")
    (copy / "code.py").write_text("x = 1\n")
    init_scratch_repo(copy)
    assert (copy / ".git").is_dir() and not marker.exists()
