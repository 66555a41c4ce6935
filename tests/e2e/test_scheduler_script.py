"""End to end: `python scripts/autoloop_scheduler.py` as a subprocess over a temporary repository.

Paths come from the environment overrides, so nothing under /tmp/gh-aw is touched; without
GITHUB_TOKEN no API call is made, and the issue-program runs talk to the loopback fake GitHub.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from fakegithub import FakeGitHub  # noqa: E402

SCRIPT = TESTS.parent / "scripts" / "autoloop_scheduler.py"
UNSET = ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_API_URL", "AUTOLOOP_PROGRAM")
KEYS = [
    "selected",
    "selected_file",
    "selected_issue",
    "selected_target_metric",
    "selected_metric_direction",
    "state_file_size_bytes",
    "state_file_max_bytes",
    "issue_programs",
    "deferred",
    "skipped",
    "unconfigured",
    "no_programs",
    "not_due",
    "head_branch",
    "existing_pr",
]
PROGRAM = """---
schedule: every 6h
{extra}---

# {name}

## Goal

Make it faster.

## Target

- `code.py`

## Evaluation

```bash
python code.py
```

The metric is `score`. Higher is better.
"""


@dataclass(frozen=True)
class Run:
    """One scheduler run: exit code, output streams and the JSON it left (None when none)."""

    code: int
    stdout: str
    stderr: str
    output: dict[str, Any] | None


@dataclass(frozen=True)
class Sandbox:
    """A repository plus the memory, output and issue folders the scheduler is pointed at."""

    repo: Path
    memory: Path
    output: Path
    issues: Path

    def program(self, name: str, bare: bool = False, extra: str = "", text: str | None = None) -> Path:
        """Writes a program (folder or bare `.md`) and returns its path."""
        base = self.repo / ".autoloop" / "programs"
        path = base / f"{name}.md" if bare else base / name / "program.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text is not None else PROGRAM.format(name=name, extra=extra), encoding="utf-8")
        return path

    def state(self, name: str, **fields: str) -> None:
        """Writes an upstream-format state file with the given Machine State values."""
        rows = {"Last Run": "—", "Iteration Count": "3", "Paused": "false", "Pause Reason": "—",
                "Completed": "false", "Recent Statuses": "accepted", **fields}
        table = "\n".join(f"| {key} | {value} |" for key, value in rows.items())
        self.memory.mkdir(parents=True, exist_ok=True)
        text = (
            f"# Autoloop: {name}\n\n## ⚙️ Machine State\n\n| Field | Value |\n|-------|-------|\n{table}\n\n"
            "## 📊 Iteration History\n"
        )
        (self.memory / f"{name}.md").write_text(text, encoding="utf-8")

    def run(self, *args: str, cwd: Path | None = None, module: bool = False, python: str = sys.executable,
            **env: str) -> Run:
        """Runs the script with `python` (or, with module, `python -m autoloop_py.github.agentic_scheduler`)."""
        environ = {k: v for k, v in os.environ.items() if k not in (*UNSET, "PYTHONPATH")}
        environ.update(
            AUTOLOOP_MEMORY_DIR=str(self.memory),
            AUTOLOOP_OUTPUT=str(self.output),
            AUTOLOOP_ISSUE_PROGRAMS_DIR=str(self.issues),
            **env,
        )
        done = subprocess.run(
            [python, *(("-m", "autoloop_py.github.agentic_scheduler") if module else (str(SCRIPT),)), *args],
            cwd=cwd or self.repo,
            env=environ,
            capture_output=True,
            text=True,
            timeout=60,
        )
        output = json.loads(self.output.read_text()) if self.output.exists() else None
        return Run(done.returncode, done.stdout, done.stderr, output)


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    repo = tmp_path / "repo"
    repo.mkdir()
    return Sandbox(repo, tmp_path / "memory", tmp_path / "out" / "autoloop.json", tmp_path / "issue-programs")


# One instant for every box: two boxes' `ago(2)` read at different moments could straddle a second, and the
# packaged and bare runs would print next_due times a second apart.
START = datetime.now(timezone.utc)


def ago(hours: float) -> str:
    return (START - timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_nothing_configured_bootstraps_an_unconfigured_example(box: Sandbox) -> None:
    run = box.run()
    assert run.code == 0, run.stderr
    assert "BOOTSTRAPPED" in run.stdout
    assert "AUTOLOOP:UNCONFIGURED" in (box.repo / ".autoloop/programs/example.md").read_text()
    assert run.output is not None and list(run.output) == KEYS
    assert run.output["unconfigured"] == ["example"]
    assert (run.output["selected"], run.output["not_due"], run.output["no_programs"]) == (None, False, False)


def test_the_packaged_module_is_the_same_scheduler(box: Sandbox) -> None:
    box.program("alpha")
    by_module, by_script = box.run(module=True), box.run()
    assert by_module.code == by_script.code == 0, by_module.stderr
    assert by_module.output == by_script.output and by_module.output is not None
    assert by_module.output["selected"] == "alpha"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Returns the python3 of a new venv without system site packages, where autoloop_py cannot be imported."""
    venv = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python3")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run([python, "-c", "import autoloop_py"], env=env, cwd=venv, capture_output=True, text=True,
                           timeout=60)
    assert probe.returncode == 1 and "No module named 'autoloop_py'" in probe.stderr
    return python


def _flagged(box: Sandbox) -> None:
    """Programs in every state the scheduler tells apart, with a Last Run each."""
    box.program("fresh", extra="target-metric: 0.9\n")
    box.program("stale", bare=True, extra="metric_direction: lower\n")
    for name, fields in (("paused", {"Paused": "true", "Pause Reason": "flaky"}), ("done", {"Completed": "true"}),
                         ("stuck", {"Recent Statuses": "rejected, rejected, rejected, rejected, rejected"})):
        box.program(name)
        box.state(name, **{"Last Run": ago(30), **fields})
    box.program("template", text="<!-- AUTOLOOP:UNCONFIGURED -->\n# t\n")
    box.program("weird", extra="schedule: every 6hamsters\n")
    box.state("fresh", **{"Last Run": ago(1)})
    box.state("stale", **{"Last Run": ago(9)})


def _duplicates(box: Sandbox) -> None:
    box.program("twin")
    box.program("twin", bare=True)
    box.program("solo")


SCENARIOS: dict[str, tuple[Callable[[Sandbox], None], dict[str, str]]] = {
    "bootstrap": (lambda box: None, {}),
    "flagged": (_flagged, {}),
    "forced-paused": (_flagged, {"AUTOLOOP_PROGRAM": "paused"}),
    "forced-unknown": (_flagged, {"AUTOLOOP_PROGRAM": "nope"}),
    "duplicates": (_duplicates, {}),
}


def _same_inputs(tmp_path: Path, name: str) -> Sandbox:
    root = tmp_path / name
    (root / "repo").mkdir(parents=True)
    return Sandbox(root / "repo", root / "memory", root / "out" / "autoloop.json", root / "issue-programs")


def _normalised(run: Run, box: Sandbox) -> tuple[int, str, str, dict[str, Any] | None]:
    text = json.dumps(run.output)
    return (run.code, run.stdout.replace(str(box.issues), "<issues>"), run.stderr,
            json.loads(text.replace(str(box.issues), "<issues>")) if run.output is not None else None)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_script_runs_with_a_bare_python3_as_the_packaged_scheduler(
    tmp_path: Path, bare_python: str, scenario: str
) -> None:
    arrange, env = SCENARIOS[scenario]
    packaged, bare = _same_inputs(tmp_path, "packaged"), _same_inputs(tmp_path, "bare")
    for box in (packaged, bare):
        arrange(box)
    by_package = packaged.run(module=True, **env)
    by_script = bare.run(python=bare_python, **env)
    assert "Traceback" not in by_script.stderr, by_script.stderr
    assert _normalised(by_script, bare) == _normalised(by_package, packaged)


def test_issue_programs_and_their_trust_through_a_bare_python3(
    tmp_path: Path, bare_python: str, github_fake: FakeGitHub
) -> None:
    github_fake.add_issue("o/r", 5, "Reduce Latency", body="---\ntarget-metric: 20\n---\n# Latency\n")
    github_fake.add_issue("o/r", 6, "Mallory's program", body="# run me\n", login="mallory", association="NONE")
    github_fake.add_issue("o/r", 7, "Edited by a stranger", body="# fine\n")
    github_fake.edit_body("o/r", 7, "# now hostile\n", editor="mallory")
    github_fake.add_issue("o/r", 8, "Approved", body="# approved\n", login="mallory", association="NONE")
    github_fake.add_comment("o/r", 8, "/autoloop approve", login="maintainer", association="MEMBER")
    github_fake.add_pull("o/r", 12, "[Autoloop: reduce-latency] Iteration 1", "autoloop/reduce-latency")
    env = {"GITHUB_TOKEN": "tok", "GITHUB_REPOSITORY": "o/r", "GITHUB_API_URL": github_fake.url}
    packaged, bare = _same_inputs(tmp_path, "packaged"), _same_inputs(tmp_path, "bare")
    for box in (packaged, bare):
        box.program("coverage")
        box.state("coverage", **{"Last Run": ago(2)})
    by_package = packaged.run(module=True, **env)
    by_script = bare.run(python=bare_python, **env)
    assert _normalised(by_script, bare) == _normalised(by_package, packaged)
    assert by_script.output is not None
    assert by_script.output["issue_programs"] == {"reduce-latency": 5, "approved": 8}
    assert (by_script.output["selected"], by_script.output["existing_pr"]) == ("reduce-latency", 12)
    assert "issue #6 is not run: its author has no write access" in by_script.stdout
    assert "issue #7 is not run: someone without write access edited it" in by_script.stdout
    assert not (bare.issues / "mallorys-program.md").exists() and not (bare.issues / "edited-by-a-stranger.md").exists()


def test_the_script_is_the_packaged_module() -> None:
    from autoloop_py.github import agentic_scheduler

    assert SCRIPT.read_bytes() == Path(agentic_scheduler.__file__).read_bytes(), (
        "scripts/autoloop_scheduler.py must be a copy of autoloop_py/github/agentic_scheduler.py: "
        "cp autoloop_py/github/agentic_scheduler.py scripts/autoloop_scheduler.py")
    assert os.access(SCRIPT, os.X_OK)


# Loads the script the way a test harness may load upstream's: from its path, never put in sys.modules,
# then calls the helpers upstream's suite imports, with the shapes it unpacks.
LOADED_UNREGISTERED = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("autoloop_scheduler", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
assert "autoloop_scheduler" not in sys.modules
state = mod.parse_machine_state(
    "## ⚙️ Machine State\\n\\n| Field | Value |\\n|---|---|\\n| Initial Metric | 0.50 |\\n| Best Metric | 0.85 |\\n")
picked = mod.select_program([
    {"name": "fresh", "last_run": "2025-01-15T10:00:00Z", "file": "f.md", "target_metric": None},
    {"name": "loss", "last_run": "2025-01-15T06:00:00Z", "file": "l.md", "target_metric": 0.9,
     "metric_direction": "lower"},
])
def pulls(url, headers, timeout=30):
    if "head=" in url:
        return [], None
    return [{"number": 9, "head": {"ref": "autoloop/loss-8724e9f9"}, "title": "x"}], None
print(json.dumps({
    "state": state,
    "front": mod.parse_program_frontmatter("---\\nmetric-direction: LOWER\\ntarget-metric: 2\\n---\\n"),
    "picked": picked,
    "pr": mod.find_existing_pr_for_branch("o/r", "loss", "t", http_get_json=pulls),
}))
"""


def test_the_script_loads_from_its_path_without_being_registered_as_a_module(bare_python: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([bare_python, "-c", LOADED_UNREGISTERED, str(SCRIPT)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["state"]["initial_metric"], found["state"]["best_metric"]) == ("0.50", "0.85")
    assert found["front"] == [None, 2.0, None, "lower", None]
    assert found["picked"] == ["loss", "l.md", None, 0.9, "lower", ["fresh"], None]
    assert found["pr"] == 9


def test_empty_programs_folder_means_no_programs(box: Sandbox) -> None:
    (box.repo / ".autoloop/programs").mkdir(parents=True)
    run = box.run()
    assert (run.code, "NO_PROGRAMS_FOUND" in run.stdout) == (0, True)
    assert run.output is not None and run.output["no_programs"] is True and run.output["due"] == []
    assert set(KEYS) <= set(run.output)


def test_one_never_run_program_is_selected(box: Sandbox) -> None:
    box.program("alpha", extra="target-metric: 0.95\nmetric_direction: lower\n")
    run = box.run()
    assert run.code == 0, run.stderr
    assert run.output == {
        "selected": "alpha",
        "selected_file": ".autoloop/programs/alpha/program.md",
        "selected_issue": None,
        "selected_target_metric": 0.95,
        "selected_metric_direction": "lower",
        "state_file_size_bytes": 0,
        "state_file_max_bytes": 30720,
        "issue_programs": {},
        "deferred": [],
        "skipped": [],
        "unconfigured": [],
        "no_programs": False,
        "not_due": False,
        "head_branch": "autoloop/alpha",
        "existing_pr": None,
    }
    assert "not looking for issue-based programs" in run.stdout


def test_old_program_runs_fresh_one_waits_and_naive_timestamps_work(box: Sandbox, tmp_path: Path) -> None:
    box.program("fresh")
    box.program("old", bare=True)
    box.program("older")
    box.state("fresh", **{"Last Run": ago(1)})
    box.state("old", **{"Last Run": ago(7)})
    naive = (datetime.now(timezone.utc) - timedelta(hours=9)).strftime("%Y-%m-%dT%H:%M:%S")
    box.state("older", **{"Last Run": naive})
    run = box.run("--repo-root", str(box.repo), cwd=tmp_path)
    assert run.code == 0, run.stderr
    assert run.output is not None
    assert (run.output["selected"], run.output["deferred"]) == ("older", ["old"])
    assert run.output["state_file_size_bytes"] == (box.memory / "older.md").stat().st_size
    [skip] = run.output["skipped"]
    assert (skip["name"], skip["reason"]) == ("fresh", "not due yet")
    assert datetime.fromisoformat(skip["next_due"]) > datetime.now(timezone.utc) + timedelta(hours=4)


def test_unreadable_last_run_warns_and_counts_as_never_run(box: Sandbox) -> None:
    box.program("alpha")
    box.program("beta")
    box.state("alpha", **{"Last Run": ago(30)})
    box.state("beta", **{"Last Run": "last tuesday"})
    run = box.run()
    assert "beta: Last Run 'last tuesday' is not an ISO timestamp" in run.stderr
    assert run.output is not None and (run.output["selected"], run.output["deferred"]) == ("beta", ["alpha"])


def test_fallback_program_is_used_instead_of_bootstrapping(box: Sandbox) -> None:
    (box.repo / ".autoloop").mkdir()
    (box.repo / ".autoloop/program.md").write_text(PROGRAM.format(name="legacy", extra=""))
    run = box.run()
    assert run.code == 0, run.stderr
    assert not (box.repo / ".autoloop/programs").exists()
    assert run.output is not None
    assert (run.output["selected"], run.output["selected_file"]) == (".autoloop", ".autoloop/program.md")


def test_nothing_due_writes_not_due_and_exits_1(box: Sandbox) -> None:
    box.program("fresh")
    box.state("fresh", **{"Last Run": ago(1)})
    run = box.run()
    assert run.code == 1
    assert "No programs due this run" in run.stdout
    assert run.output is not None and (run.output["selected"], run.output["not_due"]) == (None, True)


def test_paused_and_completed_programs_are_skipped(box: Sandbox) -> None:
    box.program("held")
    box.program("done")
    box.state("held", Paused="true", **{"Pause Reason": "consecutive errors"})
    box.state("done", Completed="true")
    run = box.run()
    assert run.code == 1
    assert run.output is not None
    assert run.output["skipped"] == [
        {"name": "done", "reason": "completed: target metric reached"},
        {"name": "held", "reason": "paused: consecutive errors"},
    ]


def test_forced_program_bypasses_pause(box: Sandbox) -> None:
    box.program("held")
    box.program("other")
    box.state("held", Paused="true", **{"Pause Reason": "by hand"})
    run = box.run(AUTOLOOP_PROGRAM=" held ")
    assert run.code == 0, run.stderr
    assert "FORCED: running program 'held' (manual dispatch)" in run.stdout
    assert run.output is not None
    assert (run.output["selected"], run.output["deferred"], run.output["skipped"]) == ("held", ["other"], [])


def test_forced_unknown_program_fails_without_leaving_a_stale_output(box: Sandbox) -> None:
    box.program("alpha")
    box.output.parent.mkdir(parents=True)
    box.output.write_text('{"selected": "stale"}')
    run = box.run(AUTOLOOP_PROGRAM="nope")
    assert run.code == 1
    assert "ERROR: requested program 'nope' not found. Available programs: ['alpha']" in run.stdout
    assert not box.output.exists()


def test_forced_unconfigured_program_fails(box: Sandbox) -> None:
    box.program("draft", bare=True, text="# Draft\n\nTODO: write the goal\n")
    run = box.run(AUTOLOOP_PROGRAM="draft")
    assert run.code == 1
    assert "is unconfigured (has placeholders)" in run.stdout and run.output is None


def test_two_programs_with_one_name_are_both_skipped(box: Sandbox) -> None:
    box.program("twin")
    box.program("twin", bare=True)
    box.program("solo")
    run = box.run()
    assert run.code == 0
    assert "ERROR: two programs named 'twin'" in run.stderr
    assert run.output is not None and run.output["selected"] == "solo"
    reason = ".autoloop/programs/twin/program.md, .autoloop/programs/twin.md"
    assert run.output["skipped"] == [{"name": "twin", "reason": f"duplicate name: {reason}"}]


@pytest.fixture
def github_fake() -> Iterator[FakeGitHub]:
    with FakeGitHub(token="tok") as fake:
        yield fake


def test_issue_programs_through_the_loopback_api(box: Sandbox, github_fake: FakeGitHub) -> None:
    box.program("coverage")
    box.state("coverage", **{"Last Run": ago(2)})
    github_fake.add_issue("o/r", 5, "Reduce Latency", body="---\ntarget-metric: 20\n---\n# Latency\n")
    github_fake.add_issue("o/r", 6, "Coverage", body="# Another coverage\n")
    github_fake.add_issue("o/r", 7, "A pull request", pull_request=True)
    github_fake.add_issue("o/r", 8, "[Autoloop: coverage]", body="status")
    github_fake.add_pull("o/r", 12, "[Autoloop: reduce-latency] Iteration 1", "autoloop/reduce-latency")
    run = box.run(GITHUB_TOKEN="tok", GITHUB_REPOSITORY="o/r", GITHUB_API_URL=github_fake.url)
    assert run.code == 0, run.stdout + run.stderr
    assert run.output is not None
    assert run.output["issue_programs"] == {"reduce-latency": 5, "coverage-6": 6}
    chosen = (run.output["selected"], run.output["selected_issue"], run.output["existing_pr"])
    assert chosen == ("reduce-latency", 5, 12)
    assert run.output["selected_file"] == str(box.issues / "reduce-latency.md")
    assert run.output["selected_target_metric"] == 20.0
    assert (box.issues / "coverage-6.md").read_text() == "# Another coverage\n"
    [head_query] = [r.query["head"] for r in github_fake.requests_to("/repos/o/r/pulls")]
    assert head_query == "o:autoloop/reduce-latency"


def test_issue_api_failure_is_only_a_warning(box: Sandbox, github_fake: FakeGitHub) -> None:
    box.program("alpha")
    run = box.run(GITHUB_TOKEN="wrong", GITHUB_REPOSITORY="o/r", GITHUB_API_URL=github_fake.url)
    assert run.code == 0, run.stderr
    assert "Warning: could not fetch issue-based programs" in run.stdout
    assert run.output is not None and (run.output["selected"], run.output["existing_pr"]) == ("alpha", None)
