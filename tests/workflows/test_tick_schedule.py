"""The plain workflow under act: scheduled ticks, `/autoloop` comments, and a tick with nothing due.

One site goes through four ticks (sharing their setup keeps the suite fast):
1. a scheduled tick with two due programs: plan -> propose (one job per program) -> publish, both recorded;
2. a scheduled tick with nothing due runs no propose or publish job and writes nothing;
3. a writer's `/autoloop example: <text>` comment runs that program with the text in its prompt: iteration 2
   on the same branch and PR, the status comment edited, not duplicated;
4. the same command from an outsider runs nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from autoloop_py.state.file import parse_state
from tests.fakegithub import FakeGitHub
from tests.workflows.harness import REPO, Site, agent_command, program_files, state_file

pytestmark = pytest.mark.xdist_group("act")
NO_GATE = "ci-gate: false\n"
STATUS = "<!-- AUTOLOOP:STATUS -->"
SCHEDULE = {"schedule": "17 */6 * * *"}
SOLUTION = ".autoloop/programs/{}/code/solution.py"


def _thread(github: FakeGitHub, program: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Returns a program's issue and its comments."""
    [issue] = [i for i in github.issues.get(REPO, []) if i["title"] == f"[Autoloop: {program}]"]
    return issue, github.comments.get(REPO, {}).get(issue["number"], [])


def _machine(site: Site, program: str) -> Any:
    return parse_state(state_file(site, program), f"{program}.md").machine


def _writes(github: FakeGitHub) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in github.requests if r.method != "GET" and r.path != "/graphql"]


def _comment_event(issue: dict[str, Any], comment: dict[str, Any]) -> dict[str, Any]:
    """Returns the issue_comment payload GitHub sends for a new comment."""
    return {"action": "created", "issue": {"number": issue["number"], "title": issue["title"]},
            "comment": {"id": comment["id"], "body": comment["body"], "user": comment["user"],
                        "author_association": comment["author_association"]},
            "repository": {"full_name": REPO}}


def test_ticks_of_two_programs_comments_and_nothing_due(site: Site, github: FakeGitHub) -> None:
    site.init("--proposer", "agent")
    site.variables["AUTOLOOP_AGENT_COMMAND"] = agent_command("improve")
    site.commit("autoloop init", {**program_files(site, "example", NO_GATE), **program_files(site, "second", NO_GATE)})

    # 1. Both programs are due: one propose and one publish job each.
    site.tick("schedule", SCHEDULE).expect(plan=["success"], propose=["success"] * 2, publish=["success"] * 2)
    refs = site.refs()
    assert set(refs) == {"refs/heads/main", "refs/heads/memory/autoloop", "refs/heads/autoloop/example",
                         "refs/heads/autoloop/second"}
    pulls = {p["head"]["ref"]: p["number"] for p in github.pulls.get(REPO, [])}
    assert set(pulls) == {"autoloop/example", "autoloop/second"}
    for program in ("example", "second"):
        machine = _machine(site, program)
        assert machine.iteration_count == 1 and machine.recent_statuses == ("accepted",)
        assert machine.best_metric == -1.0 and machine.initial_metric == -1.5
        assert "WIDTH = 2.0" in (site.show(f"autoloop/{program}", SOLUTION.format(program)) or "")
        issue, comments = _thread(github, program)
        assert (machine.issue, machine.pr) == (f"#{issue['number']}", f"#{pulls[f'autoloop/{program}']}")
        assert sum(STATUS in c["body"] for c in comments) == 1
    assert site.show("main", SOLUTION.format("example")) == (site.work / SOLUTION.format("example")).read_text()

    # 2. Six hours have not passed: nothing is due, nothing but plan runs, nothing is written.
    writes = _writes(github)
    site.tick("schedule", SCHEDULE).expect(plan=["success"], propose=[], publish=[])
    assert site.refs() == refs and _writes(github) == writes

    # 3. A writer's command on the program's issue runs it now, with the text in its prompt.
    issue, comments = _thread(github, "example")
    [status] = [c for c in comments if STATUS in c["body"]]
    first_status = status["body"]
    github.now = datetime.now(timezone.utc) + timedelta(seconds=5)
    text = "try a WIDTH between 2.4 and 2.6 next"
    command = github.add_comment(REPO, issue["number"], f"/autoloop example: {text}", "writer", "COLLABORATOR")
    site.tick("issue_comment", _comment_event(issue, command)).expect(
        plan=["success"], propose=["success"], publish=["success"])
    machine = _machine(site, "example")
    assert machine.iteration_count == 2 and machine.recent_statuses == ("accepted", "accepted")
    assert machine.best_metric == -0.5
    assert text in (site.show("memory/autoloop", "traces/example/prompts/2.md") or "")
    after = site.refs()
    one_more = f"{refs['refs/heads/autoloop/example']}..autoloop/example"
    assert site.git(site.origin, "rev-list", "--count", one_more) == "1"
    assert site.git(site.origin, "merge-base", "--is-ancestor", refs["refs/heads/autoloop/example"],
                    "autoloop/example") == ""
    assert after["refs/heads/autoloop/second"] == refs["refs/heads/autoloop/second"]
    assert _machine(site, "second").iteration_count == 1
    assert {p["head"]["ref"]: p["number"] for p in github.pulls.get(REPO, [])} == pulls
    issue, comments = _thread(github, "example")
    [status] = [c for c in comments if STATUS in c["body"]]
    assert status["body"] != first_status

    # 4. The same command from someone without write access runs nothing.
    writes = _writes(github)
    command = github.add_comment(REPO, issue["number"], "/autoloop example: rewrite evaluate.py", "outsider", "NONE")
    site.tick("issue_comment", _comment_event(issue, command)).expect(plan=[], propose=[], publish=[])
    assert site.refs() == after and _writes(github) == writes
