"""Other `autoloop init` options under act: slots, the llm proposer, a crashing evaluation, the CI gate, runs-on.

Each test is one site with the sample program; see tests/workflows/harness.py for what runs and what stands in.
A program's `runs-on:` rides on the CI gate's two ticks (a site with one tick costs 15 to 20 s of CPU).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, Iterator

import pytest
import yaml

from autoloop_py.state.file import parse_state
from tests.fake_openai import fake_openai
from tests.fakegithub import FakeGitHub
from tests.workflows.harness import REPO, Site, agent_command, program_files, state_file

pytestmark = pytest.mark.xdist_group("act")
NO_GATE = "ci-gate: false\n"
SCHEDULE = {"schedule": "17 */6 * * *"}
SOLUTION = ".autoloop/programs/example/code/solution.py"
EDIT = ("SUMMARY: move GUESS toward 3\n\n"
        "code/solution.py\n<<<<<<< SEARCH\nGUESS = 1.5\n=======\nGUESS = 2.5\n>>>>>>> REPLACE\n")


def _state(site: Site) -> Any:
    return parse_state(state_file(site, "example"), "example.md")


def _agent_site(site: Site, mode: str, *flags: str, frontmatter: str = NO_GATE) -> Site:
    site.init("--proposer", "agent", *flags)
    site.variables["AUTOLOOP_AGENT_COMMAND"] = agent_command(mode)
    site.commit("autoloop init", program_files(site, "example", frontmatter))
    return site


def test_parallel_slots_propose_side_by_side_and_one_publish_records_them_all(site: Site) -> None:
    _agent_site(site, "improve", "--parallel", "2")
    tick = site.tick("schedule", SCHEDULE).expect(plan=["success"], propose=["success"] * 2, publish=["success"])
    assert sorted(run.matrix.get("slot") for run in tick.runs("propose")) == [0, 1]
    assert sorted(p.name for p in (site.root / "tick1/artifacts").iterdir()) == [
        "autoloop-outcome-example+slot-0", "autoloop-outcome-example+slot-1"]
    state = _state(site)
    assert state.machine.iteration_count == 2 and len(state.machine.recent_statuses) == 2
    assert "accepted" in state.machine.recent_statuses
    assert "GUESS = 2.0" in (site.show("autoloop/example", SOLUTION) or "")


def test_the_llm_proposer_asks_the_loopback_model(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    site.init("--model", "openai/test-model")
    site.commit("autoloop init", program_files(site, "example", NO_GATE))
    with fake_openai("reply", monkeypatch, reply=EDIT) as server:
        site.env["OPENAI_API_BASE"] = server.base_url
        site.secrets["OPENAI_API_KEY"] = "sk-test-not-a-key"
        tick = site.tick("schedule", SCHEDULE).expect(plan=["success"], propose=["success"], publish=["success"])
        assert server.requests == 1
    # Plan saved both installs (a tick with work): propose restored the one with the llm extra; publish, which
    # holds the write token, restores none and installs the base with pip.
    assert sorted(key.split("-")[1] for key in site.caches()) == ["base", "llm"]
    assert [s.result for s in tick.step("plan", "Install autoloop with the llm extra")] == ["success"]
    assert [s.result for s in tick.step("propose", "Install autoloop")] in ([], ["skipped"]), tick.explain()
    assert sum("Cache restored from key: autoloop-llm-" in line and "propose" in line
               for line in tick.log.splitlines()) == 1, tick.explain()
    assert [s.result for s in tick.step("publish", "Install autoloop")] == ["success"], tick.explain()
    assert not [line for line in tick.log.splitlines() if "Cache restored" in line and "publish" in line]
    state = _state(site)
    assert state.machine.recent_statuses == ("accepted",) and state.machine.best_metric == -0.5
    assert "GUESS = 2.5" in (site.show("autoloop/example", SOLUTION) or "")


def test_a_crashing_evaluation_is_recorded_as_an_error_and_nothing_else(site: Site, github: FakeGitHub) -> None:
    _agent_site(site, "crash")
    before = site.refs()
    site.tick("schedule", SCHEDULE).expect(plan=["success"], propose=["success"], publish=["success"])
    state = _state(site)
    assert state.machine.recent_statuses == ("error",) and state.machine.iteration_count == 1
    assert state.machine.best_metric == -1.5
    assert "exit" in state.history[0].text.lower()
    after = site.refs()
    assert set(after) == {"refs/heads/main", "refs/heads/memory/autoloop"}
    assert after["refs/heads/main"] == before["refs/heads/main"]
    assert github.pulls.get(REPO, []) == []


def test_a_program_on_self_hosted_gpu_runners_proposes_there_and_a_pending_check_makes_the_next_tick_wait(
    site: Site, github: FakeGitHub
) -> None:
    """`runs-on: [self-hosted, gpu]` reaches the propose job of both ticks (act maps `self-hosted` to this machine),
    and with the CI gate on, a check still running on the candidate makes the second tick wait.

    `container:` is checked on the generated job and the plan's matrix only: act cannot start containers here
    (host mode, no image pulled), so no tick runs a program with one.
    """
    _agent_site(site, "improve", frontmatter="runs-on: [self-hosted, gpu]\n")
    tick = site.tick("schedule", SCHEDULE).expect(plan=["success"], propose=["success"], publish=["success"])
    [propose] = tick.runs("propose")
    assert propose.matrix["runs-on"] == ["self-hosted", "gpu"] and propose.matrix["container"] == ""
    state = _state(site)
    assert state.machine.recent_statuses == ("pending-ci",) and state.machine.best_metric == -1.5
    assert state.machine.iteration_count == 1
    assert "GUESS = 2.0" in (site.show("autoloop/example", SOLUTION) or "")
    candidate = site.refs()["refs/heads/autoloop/example"]
    [pull] = github.pulls[REPO]
    github.add_check_run(REPO, candidate, "tests", status="in_progress", conclusion=None)
    memory = site.refs()["refs/heads/memory/autoloop"]

    tick = site.tick("workflow_dispatch", {"inputs": {"program": "example"}}).expect(
        plan=["success"], propose=["success"], publish=["success"])
    [propose] = tick.runs("propose")
    assert propose.matrix["runs-on"] == ["self-hosted", "gpu"]
    state = _state(site)
    assert state.machine.recent_statuses == ("pending-ci",) and state.machine.iteration_count == 1
    assert state.machine.best_metric == -1.5
    assert site.refs()["refs/heads/autoloop/example"] == candidate
    assert github.pulls[REPO] == [pull]
    assert site.refs()["refs/heads/memory/autoloop"] == memory
    assert f"no iteration to record (waiting for CI on {candidate})" in tick.log, tick.explain()

    job = yaml.safe_load((site.work / ".github/workflows/autoloop.yml").read_text())["jobs"]["propose"]
    assert (job["runs-on"], job["container"]) == ("${{ matrix.runs-on }}", "${{ matrix.container }}")
    image = "nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    # A copy of the program (with its runs-on) that also names a job container.
    site.commit("a program in a container", program_files(site, "boxed", f"container: {image}\n"))
    done = subprocess.run([sys.executable, "-m", "autoloop_py", "schedule", "--matrix", "--program", "boxed"],
                          cwd=site.work, capture_output=True, text=True, env=site.base_env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["include"] == [{"program": "boxed", "runs-on": ["self-hosted", "gpu"],
                                                   "container": image}], "act cannot start containers: matrix only"
