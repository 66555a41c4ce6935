"""Attacks on files from an evaluation: credentials, the event payload, the checkout's git, site-packages.

Each evaluator is hostile and run by `autoloop run` inside bubblewrap; it reports what it reached.
"""

from __future__ import annotations

import site
import uuid
from pathlib import Path

import pytest

from tests.security.conftest import SECRET, Hostile, assert_recorded_error

STEAL_FILES = """\
import json, os, pathlib
targets = {targets!r}
found, missing = [], []
for path in targets:
    try:
        found.append(path + ": " + pathlib.Path(path).read_text())
    except OSError as err:
        missing.append(type(err).__name__)
# The worktree's .git file leads to the user's repository and its config.
root = pathlib.Path(os.environ.get("AUTOLOOP_REPO_ROOT", "."))
dotgit = root / ".git"
try:
    gitdir = pathlib.Path(dotgit.read_text().split(":", 1)[1].strip())
    common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
    found.append("config: " + (common / "config").read_text())
except (OSError, IndexError) as err:
    missing.append(type(err).__name__)
written = []
for path in {writes!r}:
    try:
        pathlib.Path(path).write_text("pwned")
        written.append(path)
    except OSError as err:
        missing.append(type(err).__name__)
if found or written:
    print("stolen:", found, written)
    print(json.dumps({{"error": "stole " + " | ".join(found) + " wrote " + " ".join(written)}}))
else:
    print(json.dumps({{"error": f"blocked: {{len(missing)}} reads and writes failed"}}))
"""

WRITE_PTH = """\
import json
target = {target!r}
try:
    with open(target, "w") as handle:
        handle.write("# planted by a candidate\\n")
except OSError as err:
    print(json.dumps({{"error": f"blocked: could not write the .pth ({{err.strerror}})"}}))
    raise SystemExit(0)
print(json.dumps({{"error": "planted " + target}}))
"""


def test_evaluation_reads_no_credentials_and_writes_nothing_of_the_user(
    hostile: Hostile, bwrap: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".git-credentials").write_text("https://x:GITCRED-SECRET-1@github.com\n")
    event = tmp_path / "event.json"
    event.write_text('{"token": "EVENT-SECRET-2"}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    hostile.run_git(hostile.repo, "config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic EXTRA-SECRET-3")
    targets = [str(home / ".git-credentials"), str(event), str(hostile.repo / ".git/config")]
    writes = [str(hostile.repo / "PWNED.txt"), str(hostile.repo / ".git/hooks/post-checkout"), str(home / ".bashrc")]
    hostile.install(STEAL_FILES.format(targets=targets, writes=writes))
    outcome = hostile.run()
    assert_recorded_error(outcome, "blocked: 7 reads and writes failed")
    for secret in (SECRET, "GITCRED-SECRET-1", "EVENT-SECRET-2", "EXTRA-SECRET-3"):
        assert outcome.leaked(secret) == [], secret
    assert not (hostile.repo / "PWNED.txt").exists() and not (hostile.repo / ".git/hooks/post-checkout").exists()
    assert not (home / ".bashrc").exists()
    assert outcome.checkout[0] == outcome.checkout[1]


def test_evaluation_cannot_plant_a_pth_file_in_site_packages(hostile: Hostile, bwrap: None) -> None:
    target = Path(site.getsitepackages()[0]) / f"autoloop-planted-{uuid.uuid4().hex}.pth"
    hostile.install(WRITE_PTH.format(target=str(target)))
    try:
        outcome = hostile.run()
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)
    assert_recorded_error(outcome, "blocked: could not write the .pth (Read-only file system)")
