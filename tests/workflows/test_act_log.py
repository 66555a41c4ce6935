"""The harness's pure parts: act's JSON log read as job and step results, the sandbox-less workflow variant."""

from __future__ import annotations

import json

import pytest
import yaml

from autoloop_py.commands.init import ACTIONS_WORKFLOW, InitOptions, render_workflows
from tests.workflows.act_log import parse_log
from tests.workflows.harness import SANDBOX_STEPS, STAND_INS, used_actions, without_sandbox_steps


def _line(**fields: object) -> str:
    return json.dumps({"level": "info", "time": "2026-01-01T00:00:00Z", **fields})


def test_a_json_log_becomes_jobs_and_top_level_steps() -> None:
    log = "\n".join([
        _line(job="autoloop/plan", jobID="plan", matrix={}, msg="⭐ Run Set up job"),
        _line(job="autoloop/plan", jobID="plan", matrix={}, msg="\x1b[32mok\x1b[0m", stage="Main", step="Plan",
              stepID=["plan"], stepResult="success", executionTime=1_500_000_000),
        _line(job="autoloop/plan", jobID="plan", matrix={}, msg="inner", stage="Main", step="x",
              stepID=["0", "0"], stepResult="failure", executionTime=1),
        "not json: act's own warning",
        _line(job="autoloop/plan", jobID="plan", matrix={}, msg="🏁  Job succeeded", jobResult="success",
              time="2026-01-01T00:00:09Z"),
        _line(job="autoloop/propose a", jobID="propose", matrix={"program": "a"}, msg="x", jobResult="failure"),
    ])
    jobs, steps, text = parse_log(log)
    assert [(j.job, j.matrix, j.result, j.seconds) for j in jobs] == [
        ("plan", {}, "success", 9.0), ("propose", {"program": "a"}, "failure", 0.0)]
    assert [(s.job, s.name, s.stage, s.result, s.seconds) for s in steps] == [("plan", "Plan", "Main", "success", 1.5)]
    assert "[autoloop/plan] ok" in text and "not json: act's own warning" in text and "\x1b" not in text


def test_the_workflow_without_its_sandbox_steps_keeps_every_other_step() -> None:
    text = render_workflows(InitOptions())[ACTIONS_WORKFLOW]
    before, after = yaml.safe_load(text), yaml.safe_load(without_sandbox_steps(text))
    names = [s.get("name", s.get("uses")) for s in before["jobs"]["propose"]["steps"]]
    kept = [s.get("name", s.get("uses")) for s in after["jobs"]["propose"]["steps"]]
    assert kept == [n for n in names if n not in SANDBOX_STEPS] and len(kept) == len(names) - 2
    propose = next(s for s in after["jobs"]["propose"]["steps"] if s.get("name") == "Propose and evaluate")
    assert propose["env"]["AUTOLOOP_ISOLATION"] == "none"
    assert {k: v for k, v in after["jobs"].items() if k != "propose"} == {
        k: v for k, v in before["jobs"].items() if k != "propose"}
    assert used_actions(text) <= set(STAND_INS)


def test_a_renamed_sandbox_step_stops_the_harness() -> None:
    text = render_workflows(InitOptions())[ACTIONS_WORKFLOW].replace("- name: Sandbox preflight", "- name: Preflight")
    with pytest.raises(AssertionError, match="0 steps named 'Sandbox preflight'"):
        without_sandbox_steps(text)
