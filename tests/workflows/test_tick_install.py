"""Under act: every job installs the wheel `autoloop init` wrote, and a broken workflow makes the scenario fail.

The broken workflows are the generated file with one edit, each what a careless template change would do; the
harness must report the failure (a job that did not run, a step that failed), never pass.
"""

from __future__ import annotations

import json
from typing import Callable

import pytest

from autoloop_py.state.file import parse_state
from tests.workflows.harness import Site, Tick, agent_command, program_files, state_file

pytestmark = pytest.mark.xdist_group("act")
SCHEDULE = {"schedule": "17 */6 * * *"}


def _due_tick(site: Site, edit: Callable[[str], str] | None = None) -> Tick:
    """Runs a scheduled tick of the due sample program and asserts what a working workflow does."""
    tick = site.tick("schedule", SCHEDULE, edit=edit)
    tick.expect(plan=["success"], propose=["success"], publish=["success"])
    state = parse_state(state_file(site, "example"), "example.md")
    assert state.machine.recent_statuses == ("accepted",), tick.explain()
    return tick


def _sample(site: Site, *, own_wheel: bool = False) -> Site:
    out = site.init("--proposer", "agent", own_wheel=own_wheel)
    site.variables["AUTOLOOP_AGENT_COMMAND"] = agent_command("improve")
    site.commit("autoloop init", program_files(site, "example", "ci-gate: false\n"))
    assert "wrote .github/workflows/autoloop.yml" in out
    return site


def test_every_job_installs_the_wheel_init_wrote(site: Site) -> None:
    _sample(site, own_wheel=True)
    [wheel] = (site.work / ".autoloop/wheels").glob("autoloop_py-*-py3-none-any.whl")
    spec = f".autoloop/wheels/{wheel.name}"
    assert f"AUTOLOOP_PIP_SPEC: \"{spec}\"" in (site.work / ".github/workflows/autoloop.yml").read_text()
    assert spec in site.files("main")
    tick = _due_tick(site)
    for job in ("plan", "propose", "publish"):
        assert [s.result for s in tick.step(job, "Install autoloop")] == ["success"]
    assert tick.log.count(f"Processing ./{spec}") == 3, tick.explain()
    # Each job's fresh venv (the setup-python stand-in's) holds autoloop from that wheel, not the test's own.
    installed = sorted((site.root / "tick1/toolcache").glob("setup-python-*/lib/python*/site-packages/"
                                                             "autoloop_py-*.dist-info"))
    assert len(installed) == 3, installed
    for record in installed:
        assert json.loads((record / "direct_url.json").read_text())["url"].endswith(f"/{spec}")
        assert (record.parent / "autoloop_py/__init__.py").is_file()


def _renamed_plan_step(text: str) -> str:
    assert text.count("        id: plan\n") == 1
    return text.replace("        id: plan\n", "        id: planned\n")


def _outcome_path_typo(text: str) -> str:
    upload = "          path: ${{ runner.temp }}/autoloop-outcome\n          if-no-files-found: error\n"
    assert text.count(upload) == 1
    return text.replace(upload, upload.replace("autoloop-outcome\n", "autoloop-outcomes\n"))


@pytest.mark.parametrize("edit, failure", [
    (_renamed_plan_step, r"propose: \[\] != \['success'\]"),
    (_outcome_path_typo, r"propose: \['failure'\] != \['success'\][\s\S]*No files were found with the provided path"),
], ids=["plan step renamed: its matrix is lost", "upload path typo: if-no-files-found error"])
def test_a_broken_workflow_fails_the_scenario(site: Site, edit: Callable[[str], str], failure: str) -> None:
    _sample(site)
    with pytest.raises(AssertionError, match=failure):
        _due_tick(site, edit)
    assert set(site.refs()) == {"refs/heads/main"}
