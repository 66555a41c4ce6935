"""The plain workflow under act: a scheduled tick proposes and publishes every due program; the next one continues."""

from __future__ import annotations

import pytest

from autoloop_py.state.file import parse_state
from tests.fakegithub import FakeGitHub
from tests.workflows.harness import REPO, Site, agent_command, program_files, state_file

pytestmark = pytest.mark.xdist_group("act")
NO_GATE = "ci-gate: false\n"


def _thread(github: FakeGitHub, program: str) -> tuple[dict, list[dict]]:
    """Returns a program's issue and its comments."""
    [issue] = [i for i in github.issues.get(REPO, []) if i["title"] == f"[Autoloop: {program}]"]
    return issue, github.comments.get(REPO, {}).get(issue["number"], [])


def test_two_due_programs_then_the_next_tick_continues(site: Site, github: FakeGitHub) -> None:
    site.init("--proposer", "agent")
    site.variables["AUTOLOOP_AGENT_COMMAND"] = agent_command("improve")
    site.commit("autoloop init", {**program_files(site, "example", NO_GATE), **program_files(site, "second", NO_GATE)})

    site.tick("schedule", {"schedule": "17 */6 * * *"}).expect(
        plan=["success"], propose=["success", "success"], publish=["success", "success"])
    refs = site.refs()
    assert {"refs/heads/main", "refs/heads/memory/autoloop", "refs/heads/autoloop/example",
            "refs/heads/autoloop/second"} <= set(refs)
    for program in ("example", "second"):
        machine = parse_state(state_file(site, program), f"{program}.md").machine
        assert machine.iteration_count == 1 and machine.recent_statuses == ("accepted",)
        assert machine.best_metric == -1.0
        assert "WIDTH = 2.0" in (site.show(f"autoloop/{program}", f".autoloop/programs/{program}/code/solution.py") or "")
        issue, comments = _thread(github, program)
        assert machine.issue == f"#{issue['number']}"
        assert sum("<!-- AUTOLOOP:STATUS -->" in c["body"] for c in comments) == 1
    first = {p: site.refs()[f"refs/heads/autoloop/{p}"] for p in ("example", "second")}
    pulls = {p["head"]["ref"]: p["number"] for p in github.pulls.get(REPO, [])}

    # Nothing is due 6 hours early; the dispatch names the program, as a maintainer's "Run workflow" does.
    site.tick("workflow_dispatch", {"inputs": {"program": "example"}}).expect(
        plan=["success"], propose=["success"], publish=["success"])
    machine = parse_state(state_file(site, "example"), "example.md").machine
    assert machine.iteration_count == 2 and machine.recent_statuses == ("accepted", "accepted")
    assert machine.best_metric == -0.5
    assert parse_state(state_file(site, "second"), "second.md").machine.iteration_count == 1
    assert site.git(site.origin, "merge-base", "--is-ancestor", first["example"], "autoloop/example") == ""
    assert site.refs()["refs/heads/autoloop/second"] == first["second"]
    assert {p["head"]["ref"]: p["number"] for p in github.pulls.get(REPO, [])} == pulls
    issue, comments = _thread(github, "example")
    status = [c for c in comments if "<!-- AUTOLOOP:STATUS -->" in c["body"]]
    assert len(status) == 1 and status[0]["updated_at"] != status[0]["created_at"]
