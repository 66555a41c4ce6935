"""Tests for github.py: the real PyGithub client against the loopback GitHub, checked through its request log.

The bodies themselves are tested in test_github_render.py.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Iterator

import github
import pytest
from fakegithub import REPO as REPO_PATTERN
from fakegithub import FakeGitHub, Request, Response, _list_pulls
from github import Auth
from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.errors import AutoloopError
from autoloop_py.github.client import (
    COMPLETED_LABEL,
    PROGRAM_LABELS,
    Directive,
    GitHubSettings,
    ProgramThread,
    connect,
    from_environment,
    parse_command,
)
from autoloop_py.github.render import (
    DISCLOSURE,
    STATUS_MARKER,
    ProgramView,
    render_completion,
    render_iteration,
    render_pull_request,
    render_status,
)
from autoloop_py.loop.iteration.iteration import IterationOutcome
from autoloop_py.loop.record.ci_gate import CheckResult
from autoloop_py.state.machine import MachineState

REPO = "octo/widgets"
TOKEN = "fake-token"
PROGRAM = "speed"
ISSUES = f"/repos/{REPO}/issues"
PULLS = f"/repos/{REPO}/pulls"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as server:
        yield server


def client(fake: FakeGitHub) -> github.Github:
    return github.Github(
        auth=Auth.Token(TOKEN),
        base_url=fake.url,
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


def thread(fake: FakeGitHub, issue_number: int | None = None) -> ProgramThread:
    return ProgramThread(client(fake), REPO, PROGRAM, issue_number=issue_number)


def writes(fake: FakeGitHub) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests if r.method != "GET"]


def status_view(iterations: int, best: float, pr: int | None = None) -> ProgramView:
    machine = MachineState(iteration_count=iterations, best_metric=best, initial_metric=0.5,
                           recent_statuses=("accepted",))
    return ProgramView(PROGRAM, "score", machine, pr=pr)


# ---------------------------------------------------------------- the program thread over 5 iterations


def test_five_iterations_make_one_issue_one_draft_pr_one_status_comment(fake: FakeGitHub) -> None:
    best, pr = 0.5, None
    for iteration in range(1, 6):
        program = thread(fake)  # a new job (process) every iteration
        issue = program.ensure_issue("Make it faster.")
        accepted = iteration != 1  # the first iteration is rejected: no PR yet
        metric = best + 0.1 if accepted else best - 0.1
        status = "accepted" if accepted else "rejected"
        outcome = IterationOutcome(PROGRAM, iteration, status, f"change {iteration}", metric, best)
        program.post_iteration(render_iteration(outcome))
        if accepted:
            best = metric
            machine = MachineState(best_metric=best, initial_metric=0.5)
            view = ProgramView(PROGRAM, "score", machine, issue=issue, latest_change=f"change {iteration}",
                               latest_iteration=iteration)
            pr = program.ensure_pr(f"autoloop/{PROGRAM}", f"Improve score to {best:.1f}", render_pull_request(view))
        program.update_status(render_status(status_view(iteration, best, pr)))

    assert [path for method, path in writes(fake) if path in (ISSUES, PULLS)] == [ISSUES, PULLS]
    created = fake.requests_to(ISSUES, "POST")[0].body
    assert created["title"] == "[Autoloop: speed]" and created["labels"] == list(PROGRAM_LABELS)
    assert DISCLOSURE in created["body"]
    opened = fake.requests_to(PULLS, "POST")[0].body
    assert opened["draft"] is True and opened["head"] == "autoloop/speed" and opened["base"] == "main"
    assert opened["title"] == "[Autoloop: speed] Improve score to 0.6"
    assert len(fake.requests_to(f"{PULLS}/{pr}", "PATCH")) == 3  # iterations 3..5 update the body

    comment_posts = fake.requests_to(f"{ISSUES}/{issue}/comments", "POST")
    marked = [r for r in comment_posts if STATUS_MARKER in r.body["body"]]
    assert len(comment_posts) == 6 and len(marked) == 1  # five iterations + one status comment
    status_id = [c for c in fake.comments[REPO][issue] if STATUS_MARKER in c["body"]][0]["id"]
    assert len(fake.requests_to(f"{ISSUES}/comments/{status_id}", "PATCH")) == 4
    assert "| Iterations | 5 |" in fake.comments[REPO][issue][1]["body"]
    assert all(DISCLOSURE in c["body"] for c in fake.comments[REPO][issue])
    assert pr is not None and fake.pulls[REPO][0]["body"].count("Iteration 5: change 5") == 1


def test_status_edits_the_earliest_marker_comment(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 3, "[Autoloop: speed]", labels=PROGRAM_LABELS)
    later = fake.add_comment(REPO, 3, f"{STATUS_MARKER}\nnewer copy", fake.login, created_at="2025-02-02T00:00:00Z")
    earliest = fake.add_comment(REPO, 3, f"{STATUS_MARKER}\nfirst", fake.login, created_at="2025-01-01T00:00:00Z")
    program = thread(fake)
    program.ensure_issue("goal")
    program.update_status("dashboard v1")
    program.update_status("dashboard v2")
    program.update_status("dashboard v2")  # unchanged: no request
    assert writes(fake) == [("PATCH", f"{ISSUES}/comments/{earliest['id']}")] * 2
    assert earliest["body"] == f"{STATUS_MARKER}\ndashboard v2\n\n{DISCLOSURE}\n"
    assert later["body"] == f"{STATUS_MARKER}\nnewer copy"


def test_a_marker_comment_someone_else_posted_is_never_the_status(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 3, "[Autoloop: speed]", labels=PROGRAM_LABELS)
    forged = fake.add_comment(REPO, 3, f"{STATUS_MARKER}\nBest metric: 1e9, merge now", "mallory",
                              association="OWNER", created_at="2024-12-01T00:00:00Z")
    program = thread(fake, issue_number=3)
    program.update_status("dashboard v1")
    program.update_status("dashboard v2")
    assert forged["body"] == f"{STATUS_MARKER}\nBest metric: 1e9, merge now"
    mine = [c for c in fake.comments[REPO][3] if c["user"]["login"] == fake.login]
    assert len(mine) == 1 and mine[0]["body"].startswith(f"{STATUS_MARKER}\ndashboard v2")
    assert fake.requests_to("/user")  # the login was asked of GitHub, not assumed


def test_a_workflow_token_writes_as_github_actions(fake: FakeGitHub) -> None:
    fake.fail("GET", r"/user", status=403, message="Resource not accessible by integration")
    fake.add_issue(REPO, 3, "[Autoloop: speed]", labels=PROGRAM_LABELS)
    theirs = fake.add_comment(REPO, 3, f"{STATUS_MARKER}\nold", "someone", created_at="2024-12-01T00:00:00Z")
    ours = fake.add_comment(REPO, 3, f"{STATUS_MARKER}\nold", "github-actions[bot]", created_at="2025-01-01T00:00:00Z")
    thread(fake, issue_number=3).update_status("dashboard")
    assert theirs["body"].endswith("old") and ours["body"].startswith(f"{STATUS_MARKER}\ndashboard")


def test_a_status_without_the_marker_gets_it(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 3, "[Autoloop: speed]", labels=PROGRAM_LABELS)
    program = thread(fake, issue_number=3)
    program.update_status("plain table")
    assert fake.comments[REPO][3][0]["body"].startswith(f"{STATUS_MARKER}\nplain table")


# ---------------------------------------------------------------- finding the issue


def test_issue_program_uses_its_source_issue(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 7, "Speed up the parser", body="# Program\n")
    program = thread(fake, issue_number=7)
    assert program.ensure_issue("ignored") == 7
    program.post_iteration("iteration text")
    assert writes(fake) == [("POST", f"{ISSUES}/7/comments")]
    assert not fake.requests_to(ISSUES)  # no search for a `[Autoloop: …]` issue


def test_posted_text_has_secret_values_masked(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-s3cr3t-99")
    fake.add_issue(REPO, 7, "Speed up the parser", body="# Program\n")
    program = thread(fake, issue_number=7)
    program.post_iteration("the evaluation printed tok-s3cr3t-99")
    posted = [r.body for r in fake.requests if r.method == "POST"]
    assert posted and "tok-s3cr3t-99" not in str(posted) and "printed ***" in str(posted)


def test_finds_the_program_issue_without_labels_and_never_a_pr(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 2, "[Autoloop: speed]", pull_request=True, labels=("autoloop",))
    fake.add_issue(REPO, 4, "[Autoloop: speed-up]", labels=PROGRAM_LABELS)
    fake.add_issue(REPO, 5, "[Autoloop: speed]", labels=())
    fake.add_issue(REPO, 6, "[Autoloop: speed]", labels=(), state="closed")
    assert thread(fake).ensure_issue("goal") == 5
    listings = fake.requests_to(ISSUES)
    assert [r.query.get("labels") for r in listings] == ["autoloop", None]
    assert not fake.requests_to(ISSUES, "POST")


def test_a_completed_program_issue_is_still_found(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 9, "[Autoloop: speed]", labels=("automation", "autoloop", COMPLETED_LABEL))
    assert thread(fake).ensure_issue("goal") == 9
    assert len(fake.requests_to(ISSUES)) == 1


# ---------------------------------------------------------------- steering


def test_only_people_with_write_access_steer(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 3, "[Autoloop: speed]", labels=PROGRAM_LABELS)
    fake.add_comment(REPO, 3, "old news", "owner", "OWNER", created_at="2025-01-01T00:00:00Z")
    fake.now = datetime(2025, 3, 1, tzinfo=timezone.utc)
    for login, association in [("alice", "OWNER"), ("bob", "MEMBER"), ("carol", "COLLABORATOR"),
                                ("mallory", "NONE"), ("eve", "CONTRIBUTOR"), ("fred", "FIRST_TIME_CONTRIBUTOR")]:
        fake.add_comment(REPO, 3, f"try idea of {login}", login, association)
    fake.add_comment(REPO, 3, "beep", "ci[bot]", "MEMBER", user_type="Bot")
    fake.add_comment(REPO, 3, f"{STATUS_MARKER}\nstatus", "alice", "OWNER")
    fake.add_comment(REPO, 3, f"our iteration\n\n{DISCLOSURE}", "alice", "OWNER")
    fake.add_comment(REPO, 3, f"> {DISCLOSURE}\n\nI disagree, go back", "alice", "OWNER")

    found = thread(fake, issue_number=3).directives(datetime(2025, 2, 1))  # naive: read as UTC
    assert [(d.author, d.text, d.command) for d in found] == [
        ("alice", "try idea of alice", False),
        ("bob", "try idea of bob", False),
        ("carol", "try idea of carol", False),
        ("alice", f"> {DISCLOSURE}\n\nI disagree, go back", False),
    ]
    assert found[0].created_at == datetime(2025, 3, 1, tzinfo=timezone.utc)
    assert fake.requests_to(f"{ISSUES}/3/comments")[0].query["since"] == "2025-02-01T00:00:00Z"
    assert not [r for r in fake.requests if "/collaborators/" in r.path]  # association only


def test_autoloop_commands_become_flagged_directives(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 3, "[Autoloop: speed]", labels=PROGRAM_LABELS)
    fake.add_comment(REPO, 3, "/autoloop try numpy", "alice", "OWNER")
    fake.add_comment(REPO, 3, "/autoloop speed: cache the parser", "bob", "MEMBER")
    fake.add_comment(REPO, 3, "/autoloop coverage: add tests", "bob", "MEMBER")
    fake.add_comment(REPO, 3, "/autoloop please go", "mallory", "NONE")
    fake.add_comment(REPO, 3, "/autoloop approve", "alice", "OWNER")  # approves an issue program, steers nothing
    found = thread(fake, issue_number=3).directives(None)
    assert [(d.author, d.text, d.command) for d in found] == [("alice", "try numpy", True),
                                                               ("bob", "cache the parser", True)]
    assert "since" not in fake.requests_to(f"{ISSUES}/3/comments")[0].query
    assert isinstance(found[0], Directive)


@pytest.mark.parametrize(
    ("body", "program", "expected"),
    [
        ("/autoloop try a cache", None, (None, "try a cache")),
        ("/autoloop try a cache", "speed", (None, "try a cache")),
        ("/autoloop speed: try a cache", None, ("speed", "try a cache")),
        ("/autoloop speed: try a cache", "speed", ("speed", "try a cache")),
        ("/autoloop coverage: add tests", "speed", None),
        ("  /autoloop speed:\n  line one\n  line two", "speed", ("speed", "line one\n  line two")),
        ("/autoloop", "speed", (None, "")),
        ("/autoloop see https://example.com/x", "speed", (None, "see https://example.com/x")),
        ("/autoloops now", None, None),
        ("please /autoloop now", None, None),
        ("plain steering", "speed", None),
    ],
)
def test_parse_command(body: str, program: str | None, expected: tuple[str | None, str] | None) -> None:
    assert parse_command(body, program) == expected


@given(st.text(), st.sampled_from([None, "speed"]))
def test_parse_command_reads_any_text_without_raising(body: str, program: str | None) -> None:
    parsed = parse_command(body, program)
    assert parsed is None or (body.strip().startswith("/autoloop") and parsed[1] == parsed[1].strip())
    assert parsed is None or program is None or parsed[0] in (None, program)


# ---------------------------------------------------------------- the one PR


def test_pr_found_by_title_when_the_head_lookup_misses(fake: FakeGitHub) -> None:
    fake.add_pull(REPO, 11, "[Autoloop: speed] Iteration 3: old", head_ref="autoloop/speed-3f2a")
    fake.add_pull(REPO, 12, "[Autoloop: speed-up] other program", head_ref="autoloop/speed-up")
    number = thread(fake).ensure_pr("autoloop/speed", "[Autoloop: speed] Improve score", "new body")
    assert number == 11
    assert writes(fake) == [("PATCH", f"{PULLS}/11")]
    heads = [r.query.get("head") for r in fake.requests_to(PULLS)]
    assert heads == ["octo:autoloop/speed", None]
    assert fake.pulls[REPO][0]["title"] == "[Autoloop: speed] Improve score"  # prefixed once
    assert fake.pulls[REPO][0]["body"] == f"new body\n\n{DISCLOSURE}\n"


def test_unchanged_pr_is_not_edited(fake: FakeGitHub) -> None:
    program = thread(fake)
    program.ensure_pr("autoloop/speed", "Improve", "body")
    thread(fake).ensure_pr("autoloop/speed", "Improve", "body")
    assert writes(fake) == [("POST", PULLS)]


def test_a_pr_opened_meanwhile_by_another_run_is_reused(fake: FakeGitHub) -> None:
    calls = []

    def racing_list(f: FakeGitHub, request: Request, match: re.Match[str]) -> Response:
        calls.append(request)
        if len(calls) <= 2:  # the other run opens its PR right after our lookups (by head, by title)
            if len(calls) == 2:
                f.add_pull(REPO, 20, "[Autoloop: speed] theirs", head_ref="autoloop/speed")
            return f.paginate(request, [])
        return _list_pulls(f, request, match)

    fake.route("GET", rf"/repos/{REPO_PATTERN}/pulls", racing_list)
    assert thread(fake).ensure_pr("autoloop/speed", "ours", "body") == 20
    assert [r.path for r in fake.requests_to(PULLS, "POST")] == [PULLS]
    assert len(fake.pulls[REPO]) == 1 and fake.pulls[REPO][0]["title"] == "[Autoloop: speed] ours"


def test_refuses_a_pr_from_any_other_branch(fake: FakeGitHub) -> None:
    with pytest.raises(AutoloopError, match="refusing to open a PR from 'autoloop/speed-2'"):
        thread(fake).ensure_pr("autoloop/speed-2", "t", "b")
    assert fake.requests == []


# ---------------------------------------------------------------- completion


def test_completion_posts_the_comment_and_swaps_the_labels_once(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 3, "[Autoloop: speed]", labels=PROGRAM_LABELS)
    program = thread(fake, issue_number=3)
    text = render_completion(ProgramView(PROGRAM, "score", MachineState(best_metric=0.97), target_metric=0.95, pr=11,
                                          run_url="https://run/1"), 8)
    program.complete(text)
    program.complete(text)
    assert fake.labels_of(REPO, 3) == ["automation", "autoloop", COMPLETED_LABEL]
    assert writes(fake) == [
        ("POST", f"{ISSUES}/3/comments"),
        ("DELETE", f"{ISSUES}/3/labels/autoloop-program"),
        ("POST", f"{ISSUES}/3/labels"),
    ]
    assert "🎉 **Target metric reached!**" in fake.comments[REPO][3][0]["body"]


# ---------------------------------------------------------------- checks


def test_checks_of_a_commit(fake: FakeGitHub) -> None:
    sha = "a" * 40
    fake.add_check_run(REPO, sha, "tests", summary="3 passed")
    fake.add_status(REPO, sha, "ci/lint", "success")
    assert thread(fake).checks(sha) == CheckResult("success")

    red = "b" * 40
    fake.add_check_run(REPO, red, "tests", conclusion="failure",
                       summary="collected 12 items\nFAILED tests/test_io.py::test_read - KeyError: 'x'\nmore")
    fake.add_check_run(REPO, red, "lint", conclusion="success")
    fake.add_status(REPO, red, "ci/types", "error", description="mypy: 2 errors")
    summary = thread(fake).checks(red)
    assert summary.state == "failure" and summary.failing == ("ci/types", "tests")
    assert summary.first_error == "mypy: 2 errors"

    waiting = "c" * 40
    fake.add_check_run(REPO, waiting, "tests", status="in_progress", conclusion=None)
    assert thread(fake).checks(waiting).state == "pending"
    assert thread(fake).checks("d" * 40).state == "none"
    paths = {r.path for r in fake.requests}
    assert f"/repos/{REPO}/commits/{sha}" not in paths  # the commit itself is never fetched
    assert f"/repos/{REPO}/commits/{red}/check-runs" in paths and f"/repos/{REPO}/commits/{red}/status" in paths


def test_checks_first_error_comes_from_the_first_failing_check_with_output(fake: FakeGitHub) -> None:
    sha = "e" * 40
    fake.add_check_run(REPO, sha, "tests", conclusion="failure",
                       summary="collected 12 items\nFAILED tests/test_io.py::test_read - KeyError: 'x'")
    summary = thread(fake).checks(sha)
    assert summary.first_error == "FAILED tests/test_io.py::test_read - KeyError: 'x'"


# ---------------------------------------------------------------- settings and errors


def test_from_environment() -> None:
    assert from_environment({}) is None
    assert from_environment({"GITHUB_REPOSITORY": REPO}) is None
    assert from_environment({"GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": "  "}) is None
    environ = {
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": "t",
        "GITHUB_RUN_ID": "42",
        "GITHUB_SERVER_URL": "https://ghe.example/",
        "GITHUB_API_URL": "https://ghe.example/api/v3",
    }
    settings = from_environment(environ)
    assert settings == GitHubSettings(REPO, "t", "https://ghe.example/api/v3", "https://ghe.example", "42")
    assert settings.run_url == "https://ghe.example/octo/widgets/actions/runs/42"
    assert from_environment({"GITHUB_REPOSITORY": REPO, "GH_TOKEN": "t"}) == GitHubSettings(REPO, "t")
    assert GitHubSettings(REPO, "t").run_url is None
    with pytest.raises(AutoloopError, match="GITHUB_REPOSITORY is 'widgets', not 'owner/name'"):
        from_environment({"GITHUB_REPOSITORY": "widgets", "GITHUB_TOKEN": "t"})


def test_connect_authenticates_with_the_token(fake: FakeGitHub) -> None:
    gh = connect(GitHubSettings(REPO, TOKEN, api_url=fake.url), retry=None, seconds_between_requests=None)
    assert gh.get_repo(REPO).default_branch == "main"
    assert fake.requests[-1].headers["authorization"] == f"token {TOKEN}"


def test_api_failures_become_autoloop_errors(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 3, "[Autoloop: speed]", labels=PROGRAM_LABELS)
    fake.fail("POST", rf"/repos/{REPO}/issues/3/comments", status=403, message="Resource not accessible by integration")
    with pytest.raises(AutoloopError) as raised:
        thread(fake, issue_number=3).post_iteration("text")
    assert str(raised.value).startswith(
        "GitHub: could not post the iteration comment for program 'speed' in octo/widgets "
        "(403 Resource not accessible by integration); check the token"
    )


def test_comments_need_an_issue_first(fake: FakeGitHub) -> None:
    with pytest.raises(AutoloopError, match="call ensure_issue"):
        thread(fake).post_iteration("text")


@pytest.mark.parametrize(("api_url", "spaced"), [("http://127.0.0.1:8123", False), ("https://api.github.com", True)])
def test_requests_are_spaced_for_github_but_not_for_a_loopback_api(
    api_url: str, spaced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[dict[str, object]] = []
    monkeypatch.setattr(github, "Github", lambda **options: made.append(options))
    connect(GitHubSettings(REPO, TOKEN, api_url=api_url))
    assert ("seconds_between_writes" not in made[0]) is spaced
    if not spaced:
        assert made[0]["seconds_between_writes"] == 0 and made[0]["seconds_between_requests"] == 0
