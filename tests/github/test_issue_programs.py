"""Tests for issue_programs.py: slugs, and PyGithub discovery against the loopback GitHub."""

from __future__ import annotations

from typing import Iterator

import github
import pytest
from fakegithub import FakeGitHub
from github import Auth

from autoloop_py.github.issue_programs import IssueProgram, assign_slugs, discover_issue_programs, slugify_issue_title

REPO = "octo/widgets"
TOKEN = "fake-token"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as server:
        yield server


def client(fake: FakeGitHub, per_page: int = 100) -> github.Github:
    return github.Github(
        auth=Auth.Token(TOKEN),
        base_url=fake.url,
        per_page=per_page,
        retry=None,
        seconds_between_requests=None,
        lazy=True,
    )


def test_slugify_lowercases_and_collapses_runs_of_other_characters() -> None:
    assert slugify_issue_title("Improve: Accuracy (v2)!!", 5) == "improve-accuracy-v2"
    assert slugify_issue_title("———", 5) == "issue-5"


def test_assign_slugs_suffixes_the_issue_number_on_any_collision() -> None:
    slugs = assign_slugs([(1, "Coverage"), (2, "Speed"), (3, "speed"), (4, "Speed 3")], taken={"coverage"})
    assert slugs == {1: "coverage-1", 2: "speed", 3: "speed-3", 4: "speed-3-4"}


def test_discovers_labelled_issues_across_link_pages(fake: FakeGitHub) -> None:
    for number in range(1, 6):
        fake.add_issue(REPO, number, f"Program {number}", body=f"# Program {number}\n")
    programs = discover_issue_programs(client(fake, per_page=3), REPO)
    assert [p.number for p in programs] == [1, 2, 3, 4, 5]
    assert programs[0] == IssueProgram(1, "Program 1", "program-1", "# Program 1\n")
    pages = fake.requests_to(f"/repos/{REPO}/issues")
    assert [r.query.get("page", "1") for r in pages] == ["1", "2"]
    assert all(r.query["labels"] == "autoloop-program" and r.query["state"] == "open" for r in pages)
    assert all(r.headers["authorization"] == f"token {TOKEN}" for r in fake.requests)


def test_skips_pull_requests_and_autoloops_own_program_issues(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 1, "Reduce latency", body="body")
    fake.add_issue(REPO, 2, "Reduce latency in the PR", pull_request=True)
    fake.add_issue(REPO, 3, "[Autoloop: coverage]", body="status issue")
    fake.add_issue(REPO, 4, "Closed one", state="closed")
    fake.add_issue(REPO, 5, "Unlabelled", labels=("bug",))
    assert discover_issue_programs(client(fake), REPO) == [IssueProgram(1, "Reduce latency", "reduce-latency", "body")]


def test_slug_collisions_with_issues_and_file_programs(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 7, "Speed up")
    fake.add_issue(REPO, 8, "Speed-up!")
    fake.add_issue(REPO, 9, "Coverage", body=None)
    programs = discover_issue_programs(client(fake), REPO, taken=["coverage"])
    found = [(p.number, p.slug, p.body) for p in programs]
    assert found == [(7, "speed-up", ""), (8, "speed-up-8", ""), (9, "coverage-9", "")]


def test_api_errors_reach_the_caller(fake: FakeGitHub) -> None:
    fake.fail("GET", rf"/repos/{REPO}/issues", status=404, message="Not Found")
    with pytest.raises(github.GithubException):
        discover_issue_programs(client(fake), REPO)
