"""Every place a hostile text reaches, through a real `autoloop run --ci` against the loopback GitHub (real PyGithub).

The agent's summary and the evaluator's error carry terminal escapes (window title, OSC 8 link, screen clear), rich
markup (`[link=…]`), a team mention, a mention behind backticks meant to unbalance a code span, an `<img>`, a
`javascript:` link and `Closes #4242`. Asserted per surface: the iteration comment, the status comment (its pause reason
quotes the evaluator), the draft PR body and title, the program issue body, the job summary, the commit messages and
the terminal (`run` and `status`). GitHub-rendered bodies are rendered here with mistune: no mention or issue reference
outside a code span, no image, no `javascript:` link, no raw HTML; no escape anywhere.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import mistune
import pytest

from tests.fakegithub import FakeGitHub
from tests.programs import program_md
from tests.security.counter_checkout import EVALUATE, PROG, VALUE, counter_checkout

REPO, TOKEN = "octo/counter", "t0ken"
HOSTILE = (
    "set x to 5 \x1b]0;pwned\x07\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\\x1b[2J cc @octo-org/security-team "
    "<img src=x onerror=alert(1)> [docs](javascript:alert(1)) Closes #4242 [link=https://evil.example]rich[/link] "
    "a` @octocat `b"
)
# Short, so that the pause reason, which is cut to a couple of hundred characters, quotes all of it.
HOSTILE_ERROR = "\x1b]0;t\x07@octocat @octo-org/security-team <img src=x onerror=alert(1)> Closes #4242 \x1b[2J"
ESCAPES = ("\x1b", "\x07", "\x9b")
AGENT = """
import os, pathlib, sys
pathlib.Path("{prog}/code/value.py").write_text({value!r})
summary = pathlib.Path({summary!r}).read_text()
pathlib.Path(os.environ["AUTOLOOP_REPLY_FILE"]).write_text("SUMMARY: " + summary + "\\n")
"""
FAILING_EVALUATE = """
import json, pathlib
print(json.dumps({"error": pathlib.Path({error}).read_text()}))
"""


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as server:
        yield server


def _env(fake: FakeGitHub, tmp_path: Path, agent: Path) -> dict[str, str]:
    return {
        **os.environ, "GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.url,
        "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "77", "AUTOLOOP_ISOLATION": "none",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "AUTOLOOP_AGENT_COMMAND": f"{sys.executable} {agent}",
        "AUTOLOOP_SLOT_USER": "off",  # the agent script lives in tmp_path, which a uid of its own cannot enter
    }  # fmt: skip


def _autoloop(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoloop_py", *args, "--repo", str(work)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def _assert_inert_on_github(body: str, where: str) -> None:
    """Asserts a body GitHub renders acts on nothing hostile: checked on its HTML, as mistune renders it."""
    assert not [c for c in ESCAPES if c in body], f"an escape reached the {where}: {body!r}"
    html = mistune.html(body)
    outside_code = re.sub(r"<code>.*?</code>", "", html, flags=re.DOTALL)
    for active in ("@octocat", "@octo-org/security-team", "#4242", "<img"):  # the escaped `&lt;img` is text
        assert active not in outside_code, f"{active!r} is live in the {where}:\n{html}"
    assert "javascript:" not in " ".join(re.findall(r'href="([^"]*)"', html)), html
    assert "`@octocat`" in body and "`@octo-org/security-team`" in body, body  # shown, not acted on


def _world(tmp_path: Path, run_git: Callable[..., str], evaluate: str = EVALUATE) -> tuple[Path, Path, Path]:
    """Returns (checkout, origin, agent script) of a counter program whose goal and agent summary are hostile."""
    work, origin = counter_checkout(tmp_path, run_git)
    text, error = tmp_path / "hostile.txt", tmp_path / "error.txt"
    text.write_text(HOSTILE)
    error.write_text(HOSTILE_ERROR)
    (work / PROG / "program.md").write_text(
        program_md("Counter", "Make `x` large.\x1b]0;goal title\x07", frontmatter={"evaluation-timeout": 20})
    )
    (work / PROG / "code/evaluate.py").write_text(evaluate.replace("{error}", repr(str(error))))
    run_git(work, "commit", "-qam", "hostile goal")
    run_git(work, "push", "-q", "origin", "main")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT.format(prog=PROG, value=VALUE.format(x=5.0), summary=str(text)))
    return work, origin, agent


def test_a_hostile_summary_is_inert_on_every_surface(
    tmp_path: Path, isolated_git_config: None, run_git: Callable[..., str], fake: FakeGitHub
) -> None:
    work, origin, agent = _world(tmp_path, run_git)
    env = _env(fake, tmp_path, agent)
    done = _autoloop(work, env, "run", "--program", "counter", "--proposer", "agent", "--ci")
    assert done.returncode == 0, done.stdout + done.stderr
    [issue] = [i for i in fake.issues[REPO] if "pull_request" not in i]
    comments = [c["body"] for c in fake.comments[REPO][issue["number"]]]
    [iteration] = [c for c in comments if "Iteration 1" in c]
    [pull] = fake.pulls[REPO]
    _assert_inert_on_github(iteration, "iteration comment")
    _assert_inert_on_github(pull["body"], "draft PR body")
    assert "Closes `#4242`" in pull["body"]  # merging the PR closes no issue
    assert not [c for c in ESCAPES if c in pull["title"] + issue["body"]], (pull["title"], issue["body"])
    assert "Make `x` large." in issue["body"]
    summary = (tmp_path / "summary.md").read_text()
    assert "## 🤖 Autoloop: `counter`" in summary
    assert not [c for c in ESCAPES if c in summary] and "octocat" not in summary and "<img" not in summary
    log = run_git(origin, "log", "--format=%B", "refs/heads/autoloop/counter", "refs/heads/memory/autoloop")
    assert "set x to 5" in log and not [c for c in ESCAPES if c in log], repr(log)
    # The terminal: no escape, and rich markup printed as the text it is (not turned into an OSC 8 hyperlink).
    status = _autoloop(work, env, "status", "counter")
    for name, output in (("run", done.stdout + done.stderr), ("status", status.stdout + status.stderr)):
        assert not [c for c in ESCAPES if c in output], f"an escape reached the terminal of `{name}`: {output!r}"
        assert "[link=https://evil.example]rich[/link]" in output, output


def test_an_evaluators_hostile_error_is_inert_in_the_status_comment_that_quotes_it(
    tmp_path: Path, isolated_git_config: None, run_git: Callable[..., str], fake: FakeGitHub
) -> None:
    work, _origin, agent = _world(tmp_path, run_git, FAILING_EVALUATE)
    env = _env(fake, tmp_path, agent)
    for _ in range(3):  # three errors in a row pause the program; the pause reason quotes the last error
        done = _autoloop(work, env, "run", "--program", "counter", "--proposer", "agent", "--ci", "--force")
        assert done.returncode == 0, done.stdout + done.stderr
        assert not [c for c in ESCAPES if c in done.stdout + done.stderr]
    [issue] = [i for i in fake.issues[REPO] if "pull_request" not in i]
    comments = [c["body"] for c in fake.comments[REPO][issue["number"]]]
    [status] = [c for c in comments if "<!-- AUTOLOOP:STATUS -->" in c]
    assert "paused: 3 consecutive errors" in status, status
    _assert_inert_on_github(status, "status comment")
    for body in (c for c in comments if "Iteration" in c):
        _assert_inert_on_github(body, "iteration comment")
    status_output = _autoloop(work, env, "status", "counter")
    assert not [c for c in ESCAPES if c in status_output.stdout + status_output.stderr]
