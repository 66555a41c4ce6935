"""The Agentic Workflows variant `autoloop.md`: what upstream autoloop's own workflow checks ask of it, in our words.

Upstream's tests read the workflow file: the memory branch is cloned before the scheduler runs, the
program branch keeps its exact name, comments may target any issue, and the prompt warns about the
mistakes that broke upstream's runs. The same checks run here on what `autoloop init` renders and on
this repository's copy, and the memory clone step is run for real against a local repository.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoloop_py.commands.init import (
    AGENTIC_MEMORY_DIR,
    AGENTIC_SCHEDULE_MEMORY_DIR,
    AGENTIC_WORKFLOW,
    DEFAULT_PIP_SPEC,
    InitOptions,
    render_workflows,
)
from autoloop_py.github import agentic_scheduler
from autoloop_py.state.file import new_state, render_state

REPO = Path(__file__).resolve().parents[2]
CLONE_STEP = "Clone repo-memory for scheduling"
SCHEDULE_STEP = "Check which programs are due"
# About 4 characters a token: 12000 characters stay under the 3k-token budget of the prompt.
PROMPT_CHAR_BUDGET = 12_000


def split(text: str) -> tuple[dict[str, Any], str]:
    """Returns the workflow's frontmatter and its markdown body (the agent's prompt)."""
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


@pytest.fixture(params=["rendered", "this-repository"])
def workflow(request: pytest.FixtureRequest) -> str:
    """Returns the agentic workflow as `autoloop init` writes it, and as this repository keeps it."""
    if request.param == "rendered":
        return render_workflows(InitOptions(pip_spec="git+https://github.com/o/r@main"))[AGENTIC_WORKFLOW]
    return (REPO / AGENTIC_WORKFLOW).read_text(encoding="utf-8")


def step_names(text: str) -> list[str]:
    """Returns the `- name:` lines of the file in order, read as plain text the way upstream's test does."""
    return [m.group(1).strip() for m in re.finditer(r"^\s*-\s*name:\s*(.+)$", text, re.MULTILINE)]


def test_the_memory_is_cloned_before_the_scheduler_reads_it(workflow: str) -> None:
    names = step_names(workflow)
    assert CLONE_STEP in names and SCHEDULE_STEP in names
    assert names.index("Install autoloop") < names.index(CLONE_STEP) < names.index(SCHEDULE_STEP)
    assert names.index(SCHEDULE_STEP) < names.index("Install the program's dependencies")
    meta, _ = split(workflow)
    assert meta["env"]["AUTOLOOP_MEMORY_DIR"] == AGENTIC_MEMORY_DIR == "/tmp/gh-aw/repo-memory/default"
    assert meta["tools"]["repo-memory"] == [
        {"id": "default", "branch-name": "memory/autoloop", "file-glob": ["*.md", "candidates/**", "traces/**"],
         "allowed-extensions": [".md", ".json", ".txt", ".py", ".js", ".ts", ".rs"],
         "max-file-size": 102400, "max-file-count": 1000, "max-patch-size": 102400}
    ]
    scheduler = next(s for s in meta["steps"] if s["name"] == SCHEDULE_STEP)
    assert scheduler["run"] == "python3 -m autoloop_py.github.agentic_scheduler"
    # The scheduler reads the early clone, in upstream's folder (its default); gh-aw's own clone comes later.
    assert scheduler["env"]["AUTOLOOP_MEMORY_DIR"] == AGENTIC_SCHEDULE_MEMORY_DIR == agentic_scheduler.REPO_MEMORY_DIR
    assert scheduler["env"]["AUTOLOOP_PROGRAM"] == "${{ github.event.inputs.program }}"


def test_one_pr_per_program_on_the_exact_branch(workflow: str) -> None:
    meta, body = split(workflow)
    outputs = meta["safe-outputs"]
    assert outputs["create-pull-request"]["preserve-branch-name"] is True
    # The branch outlives a merged PR: gh-aw re-creates it rather than refusing the push (gh-aw PR #32770).
    assert outputs["create-pull-request"]["recreate-ref"] is True
    assert outputs["create-pull-request"]["max"] == 1 and outputs["create-pull-request"]["draft"] is True
    assert "### Branch Name Must Be Exact" in body
    assert "Use `head_branch` verbatim" in body and "`autoloop/<program>`" in body
    assert meta["checkout"] == {"fetch": ["*"], "fetch-depth": 0}


def test_outputs_are_as_tight_as_upstreams(workflow: str) -> None:
    outputs = split(workflow)[0]["safe-outputs"]
    for kind in ("create-pull-request", "push-to-pull-request-branch", "create-issue", "update-issue"):
        assert outputs[kind]["title-prefix"] == "[Autoloop: ", kind
    for kind in ("create-pull-request", "push-to-pull-request-branch"):
        assert outputs[kind]["protected-files"] == "fallback-to-issue", kind
    _, body = split(workflow)
    # Every title the prompt has the agent write starts with the prefix, or gh-aw would refuse the output.
    titles = re.findall(r"`(\[Autoloop[^`]*)`", body)
    assert titles and all(t.startswith("[Autoloop: ") for t in titles), titles


def test_outputs_may_target_the_program_issue_on_a_scheduled_run(workflow: str) -> None:
    outputs = split(workflow)[0]["safe-outputs"]
    for kind in ("add-comment", "push-to-pull-request-branch", "update-issue", "add-labels", "remove-labels"):
        assert outputs[kind]["target"] == "*", kind
    assert outputs["max-patch-size"] == 10240
    assert outputs["add-comment"]["max"] == 7


def test_network_allowlist_and_read_only_permissions(workflow: str) -> None:
    meta, _ = split(workflow)
    assert meta["permissions"] == "read-all"
    assert {"defaults", "python"} <= set(meta["network"]["allowed"])


def test_the_prompt_carries_upstreams_guidance_in_brief(workflow: str) -> None:
    _, body = split(workflow)
    assert "## Common Mistakes to Avoid" in body
    assert "no suffixes, no hashes, no run IDs, no iteration numbers" in body
    assert "Never let the gh-aw framework auto-generate a branch name" in body
    assert '"${{ steps.sanitized.outputs.text }}"' in body  # command mode reads the /autoloop text
    assert "Action required: configure your program" in body  # the setup guard
    assert "autoloop-completed" in body and "🎉" in body  # halting swaps the label
    assert "## CI gate" in body and "never call a pending run passed" in body
    assert "autoloop ci <program> --checks success|failure|pending|none" in body
    for command in ("autoloop prompt <program>", "autoloop record <program> --evaluate --pending-ci"):
        assert command in body
    assert "<!-- AUTOLOOP:STATUS -->" in body and "existing_pr" in body
    assert len(body) < PROMPT_CHAR_BUDGET, f"the prompt grew to {len(body)} characters"


def test_the_prompt_reports_progress_from_the_initial_metric(workflow: str) -> None:
    """Upstream's issue #69 (its PR #70's checks): where the program started, and how far it came, in every report."""
    _, body = split(workflow)
    publish = body[body.index("## Step 5: Publish"):body.index("## CI gate")]
    # The exact phrases upstream's suite searches for, each where it belongs.
    assert "| Initial Metric | — |" in publish
    assert "set `initial_metric` only if it is currently missing" in publish and "never overwrite it" in publish
    assert "The PR body starts with\n  `Fitness: {best_metric} (started at {initial_metric}" in publish
    assert "`| **Improvement** | {absolute_delta} ({improvement_pct}% from initial) |`" in publish
    direction = publish[publish.index("Cumulative improvement is also **direction-aware**"):]
    assert "Initial Metric minus Best Metric when lower is better" in direction.replace("\n", " ")
    assert "Best Metric minus Initial Metric when higher is better" in direction.replace("\n", " ")
    # What the prompt promises is what `autoloop record` writes: a new state file's row starts empty.
    assert "| Initial Metric | — |" in render_state(new_state("p", "Goal.", "score", "lower", None))


def test_a_pending_ci_iteration_is_settled_before_a_new_one(workflow: str) -> None:
    _, body = split(workflow)
    gate = body[body.index("## CI gate"):body.index("## Halting")]
    assert gate.startswith("## CI gate\n\nBefore Step 3, reconcile any previous iteration whose metric was left as `pending-ci`")
    accepted = gate[gate.index("`accepted`:"):]
    assert "refresh `Initial Metric`, `Best Metric`, PR body, and issue status" in accepted.replace("\n", " ")
    assert body.index("## CI gate") > body.index("## Step 5: Publish")  # read before Step 3, written after it


def test_strategy_discovery_comes_before_step_1(workflow: str) -> None:
    _, body = split(workflow)
    assert body.index("## Strategy discovery") < body.index("## Step 1: Pick the program")
    section = body[body.index("## Strategy discovery"):body.index("## Step 1: Pick the program")]
    rules = re.findall(r"^\d\. (.+(?:\n   .+)*)", section, re.MULTILINE)
    assert len(rules) == 4, rules
    assert "`## Evolution Strategy`" in rules[0]
    assert "follow it literally" in rules[1]
    assert "supersedes" in rules[2] and "Analyze through Accept/Reject" in rules[2] and "autoloop record" in rules[2]
    assert all(words in rules[3] for words in ("absent", "only prose", "does not\n   exist", "fall back"))
    assert "`autoloop prompt <program>`" in section


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


@pytest.mark.parametrize("has_memory", [True, False])
def test_the_clone_step_fetches_the_memory_branch_or_starts_empty(tmp_path: Path, has_memory: bool) -> None:
    origin = tmp_path / "server" / "owner" / "repo.git"
    origin.parent.mkdir(parents=True)
    _git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    work = tmp_path / "work"
    _git("init", "-q", "-b", "main", str(work), cwd=tmp_path)
    _git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "init", cwd=work)
    _git("push", "-q", str(origin), "main", cwd=work)
    if has_memory:
        _git("checkout", "-q", "--orphan", "memory/autoloop", cwd=work)
        (work / "alpha.md").write_text("# Autoloop: alpha\n")
        _git("add", "alpha.md", cwd=work)
        _git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "state", cwd=work)
        _git("push", "-q", str(origin), "memory/autoloop", cwd=work)
    meta, _ = split(render_workflows(InitOptions(pip_spec=DEFAULT_PIP_SPEC))[AGENTIC_WORKFLOW])
    script = next(s for s in meta["steps"] if s["name"] == CLONE_STEP)["run"]
    memory = tmp_path / "gh-aw" / "repo-memory" / "autoloop"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AUTOLOOP_MEMORY_DIR": str(memory), "GH_TOKEN": "t",
           # The step rewrites an https:// server URL to carry the token; a file:// one passes unchanged.
           "GITHUB_SERVER_URL": f"file://{tmp_path / 'server'}", "GITHUB_REPOSITORY": "owner/repo"}
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert memory.is_dir()
    found = sorted(p.name for p in memory.iterdir() if p.name != ".git")
    assert found == (["alpha.md"] if has_memory else [])


def test_the_repository_copy_installs_this_checkout() -> None:
    meta, _ = split((REPO / AGENTIC_WORKFLOW).read_text(encoding="utf-8"))
    install = next(s for s in meta["steps"] if s["name"] == "Install autoloop")
    assert install["run"] == "python3 -m pip install --quiet ."
