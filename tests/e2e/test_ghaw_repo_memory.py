"""End to end: the agentic workflow's state is written where GitHub Agentic Workflows saves it.

gh-aw's contract, read from its compiler (github/gh-aw `pkg/workflow/repo_memory.go`, `actions/setup/js/
push_repo_memory.cjs`): a `tools.repo-memory` entry has an id (`default` when none is given, and always
in the object form); its branch is cloned into `/tmp/gh-aw/repo-memory/<id>` after the workflow's own
steps; at the end of the agent job that folder alone is uploaded (hidden files such as `.git` are
not), a later job refuses the lot if any file has an extension outside .json/.jsonl/.txt/.md/.csv,
then copies the files that match `file-glob` (each at most `max-file-size` bytes) onto the branch,
commits and pushes. Anything written elsewhere under /tmp/gh-aw is lost with the
runner.

The test runs that contract twice from the rendered workflow: its clone and scheduler steps, gh-aw's
clone of the managed folder, the agent's commands (`autoloop prompt`, an edit, `autoloop record`), then
the save. Paths under /tmp/gh-aw are mapped into the test's own folder. What the first run's evaluation
said (its feedback, kept in the trace the save keeps) is in the second run's prompt.

The save's limits, as the push job applies them (github/gh-aw `actions/setup/js/push_repo_memory.cjs` at
5f067acd914bd1b497204d42897da910b2eed1a6 for the file size, count and extension checks; the patch gate that
later versions added, `git diff --cached` summing the bytes of the `+` lines and refusing above
max-patch-size with a 20 % tolerance, as gh-aw issues #42773 and #47591 quote it; the schema's bounds for
`tools.repo-memory` from `pkg/parser/schemas/main_workflow_schema.json` at
00c16a5c08a741790acf79927c90fc7962fd1f57, stored in tests/fixtures/gh-aw/): every file an allowed extension,
each saved file at most max-file-size, at most max-file-count files, and the diff's added bytes at most
max-patch-size x 1.2. `test_every_save_of_a_long_strategy_run_keeps_gh_aws_rules` applies all four after
each save of an AlphaEvolve run whose candidates are 15-40 KB (AUTOLOOP_GHAW_ITERATIONS iterations, 12 by
default; 200 in the figures of docs/github.md).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from programs import program_md

from autoloop_py.cli import main
from autoloop_py.commands.init import AGENTIC_WORKFLOW, DEFAULT_PIP_SPEC, InitOptions, render_workflows
from autoloop_py.github import agentic_scheduler

GH_AW = "/tmp/gh-aw"
MEMORY_BRANCH = "memory/autoloop"
# gh-aw's default `allowed-extensions`, checked over the whole uploaded folder.
ALLOWED_EXTENSIONS = (".json", ".jsonl", ".txt", ".md", ".csv")
PATCH_TOLERANCE = 1.2  # gh-aw refuses a save whose added bytes pass max-patch-size x 1.2
REPO = Path(__file__).resolve().parents[2]
EVALUATE = ('import json, runpy\nx = runpy.run_path("code/value.py")["x"]\n'
            'print(json.dumps({"score": x, "feedback": f"FEEDBACK-MARK: x was {x}"}))\n')


@dataclass(frozen=True)
class RepoMemory:
    """One repo-memory entry as gh-aw's compiler reads it."""

    id: str
    branch: str
    file_glob: tuple[str, ...]
    max_file_size: int
    max_file_count: int
    allowed_extensions: tuple[str, ...]
    max_patch_size: int = 10240

    @property
    def folder(self) -> str:
        return f"{GH_AW}/repo-memory/{self.id}"


def repo_memories(tools: dict[str, Any]) -> list[RepoMemory]:
    """Returns the entries of `tools.repo-memory`: the object form is id `default`, an array entry names its id."""
    value = tools["repo-memory"]
    entries = value if isinstance(value, list) else [{**value, "id": "default"}]
    found = []
    for entry in entries:
        memory_id = entry.get("id") or "default"
        found.append(RepoMemory(memory_id, entry.get("branch-name") or f"memory/{memory_id}",
                                tuple(entry.get("file-glob") or ()), int(entry.get("max-file-size") or 10240),
                                int(entry.get("max-file-count") or 100),
                                tuple(entry.get("allowed-extensions") or ALLOWED_EXTENSIONS),
                                int(entry.get("max-patch-size") or 10240)))
    return found


def glob_matches(pattern: str, path: str) -> bool:
    """gh-aw's file-glob: `**` matches across folders, `*` within one."""
    regex = "".join(".*" if part == "**" else re.escape(part).replace(r"\*", "[^/]*")
                    for part in re.split(r"(\*\*)", pattern))
    return re.fullmatch(regex, path) is not None


def workflow() -> tuple[dict[str, Any], str]:
    """Returns the rendered agentic workflow's frontmatter and prompt."""
    text = render_workflows(InitOptions(pip_spec=DEFAULT_PIP_SPEC))[AGENTIC_WORKFLOW]
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


def added_bytes(diff: str) -> int:
    """Returns what gh-aw's patch gate counts of a diff: the bytes of its added lines, each with its `+`."""
    return sum(len(line.encode()) for line in diff.split("\n") if line.startswith("+") and not line.startswith("+++"))


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass(frozen=True)
class Runner:
    """One fresh GitHub runner: /tmp/gh-aw mapped to `gh_aw`, the server holding owner/repo.git."""

    gh_aw: Path
    server: Path

    def path(self, text: str) -> str:
        return text.replace(GH_AW, str(self.gh_aw))

    def step_env(self, step: dict[str, Any]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "AUTOLOOP_PROGRAM")}
        for key, value in (step.get("env") or {}).items():
            env[key] = self.path(str(value)) if "${{" not in str(value) else ""
        env.update(GH_TOKEN="t", GITHUB_SERVER_URL=f"file://{self.server}", GITHUB_REPOSITORY="owner/repo")
        return env

    def run_step(self, step: dict[str, Any], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
        env = {**self.step_env(step), **extra}
        return subprocess.run(["bash", "-e", "-c", self.path(step["run"])], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=120)

    def clone_managed(self, memory: RepoMemory) -> Path:
        """gh-aw's clone of the memory branch into its folder (an empty orphan when the branch is missing)."""
        folder = Path(self.path(memory.folder))
        url = str(self.server / "owner" / "repo.git")
        folder.parent.mkdir(parents=True, exist_ok=True)
        if git(folder.parent, "ls-remote", "--heads", url, memory.branch).strip():
            git(folder.parent, "clone", "-q", "--depth", "1", "--single-branch", "--branch", memory.branch, url, str(folder))
        else:
            folder.mkdir()
            git(folder, "init", "-q")
        return folder

    def save(self, memory: RepoMemory, work: Path) -> None:
        """gh-aw's save: upload the folder (no hidden files), copy matching files onto the branch, commit, push."""
        artifact = self.gh_aw.parent / "artifact" / memory.id
        folder = Path(self.path(memory.folder))
        for path in folder.rglob("*"):
            rel = path.relative_to(folder)
            if path.is_file() and not any(part.startswith(".") for part in rel.parts):
                (artifact / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, artifact / rel)
        # Every uploaded file must have one of the allowed extensions, or the whole save fails.
        uploaded = [p for p in artifact.rglob("*") if p.is_file()]
        stray = [p for p in uploaded if p.suffix.lower() not in memory.allowed_extensions]
        assert not stray, f"gh-aw would refuse to save repo-memory holding {stray}"
        url = str(self.server / "owner" / "repo.git")
        git(self.gh_aw.parent, "clone", "-q", url, str(work))
        git(work, "config", "user.name", "github-actions")
        git(work, "config", "user.email", "actions@example.invalid")
        if git(work, "ls-remote", "--heads", url, memory.branch).strip():
            git(work, "fetch", "-q", "origin", f"{memory.branch}:{memory.branch}")
            git(work, "checkout", "-q", memory.branch)
        else:
            git(work, "checkout", "-q", "--orphan", memory.branch)
            git(work, "rm", "-r", "-q", "-f", "--ignore-unmatch", ".")
        copied: list[str] = []
        for path in artifact.rglob("*") if artifact.is_dir() else ():
            rel = path.relative_to(artifact).as_posix()
            if path.is_file() and (not memory.file_glob or any(glob_matches(g, rel) for g in memory.file_glob)):
                assert path.stat().st_size <= memory.max_file_size, f"{rel} is over repo-memory's max-file-size"
                copied.append(rel)
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, work / rel)
        assert len(copied) <= memory.max_file_count, "gh-aw refuses more files than max-file-count"
        assert {p.relative_to(artifact).as_posix() for p in uploaded} == set(copied), "files gh-aw would drop"
        if git(work, "status", "--porcelain").strip():
            git(work, "add", ".")
            assert added_bytes(git(work, "diff", "--cached")) <= memory.max_patch_size * PATCH_TOLERANCE
            git(work, "commit", "-q", "-m", "Update repo memory from workflow run")
            git(work, "push", "-q", url, f"HEAD:{memory.branch}")


@pytest.fixture(params=["plain", "alphaevolve"])
def server(request: pytest.FixtureRequest, git_repo: Path, tmp_path: Path, run_git: Callable[..., str]) -> Path:
    """Returns a git server folder holding owner/repo.git with program `alpha` (target-metric 3).

    With alphaevolve, alpha follows the AlphaEvolve playbook: `autoloop record` also keeps each candidate's
    code in the memory folder (`candidates/alpha/<id>.py`), which gh-aw must accept and save too.
    """
    folder = git_repo / ".autoloop" / "programs" / "alpha"
    (folder / "code").mkdir(parents=True)
    text = program_md("Alpha", "Raise x.", frontmatter={"target-metric": 3})
    if request.param == "alphaevolve":
        text += ("\n## Evolution Strategy\n\nThis program uses the **AlphaEvolve** strategy. On every iteration, "
                 "read `strategy/alphaevolve.md` and follow it literally.\n")
        shutil.copytree(REPO / ".autoloop/programs/groupby_evolve/strategy", folder / "strategy")
    (folder / "program.md").write_text(text)
    (folder / "code" / "value.py").write_text("x = 1\n")
    (folder / "code" / "evaluate.py").write_text(EVALUATE)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "program alpha")
    server = tmp_path / "server"
    (server / "owner").mkdir(parents=True)
    run_git(tmp_path, "clone", "-q", "--bare", str(git_repo), str(server / "owner" / "repo.git"))
    return server


def one_run(number: int, server: Path, tmp_path: Path, x: int, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str, str]:
    """Runs one workflow run on a fresh runner; returns the scheduler's JSON, the state it printed and the prompt."""
    meta, body = workflow()
    (memory,) = repo_memories(meta["tools"])
    runner = Runner(tmp_path / f"runner{number}" / "gh-aw", server)
    runner.gh_aw.mkdir(parents=True)
    repo = tmp_path / f"runner{number}" / "checkout"
    git(tmp_path, "clone", "-q", str(server / "owner" / "repo.git"), str(repo))
    git(repo, "config", "user.name", "agent")
    git(repo, "config", "user.email", "agent@example.invalid")

    steps = {step["name"]: step for step in meta["steps"]}
    clone = runner.run_step(steps["Clone repo-memory for scheduling"], repo)
    assert clone.returncode == 0, clone.stderr
    schedule = steps["Check which programs are due"]
    assert schedule["run"] == f"python3 -m {agentic_scheduler.__name__}"
    done = subprocess.run([sys.executable, "-m", agentic_scheduler.__name__], cwd=repo, capture_output=True, text=True,
                          timeout=120, env={**runner.step_env(schedule),
                                            "AUTOLOOP_OUTPUT": str(runner.gh_aw / "autoloop.json"),
                                            "AUTOLOOP_ISSUE_PROGRAMS_DIR": str(runner.gh_aw / "issue-programs")})
    assert done.returncode == 0, done.stdout + done.stderr
    selection = json.loads((runner.gh_aw / "autoloop.json").read_text())

    managed = runner.clone_managed(memory)  # gh-aw's own clone, after the workflow's steps
    agent_env = runner.path(meta["env"]["AUTOLOOP_MEMORY_DIR"])
    assert f"export AUTOLOOP_MEMORY_DIR={meta['env']['AUTOLOOP_MEMORY_DIR']}" in body  # what the prompt has the agent run
    monkeypatch.setenv("AUTOLOOP_MEMORY_DIR", agent_env)
    assert main(["prompt", "alpha", "--repo", str(repo)]) == 0
    prompt = capsys.readouterr().out
    assert "code/value.py" in prompt
    (repo / ".autoloop/programs/alpha/code/value.py").write_text(f"x = {x}\n")
    assert main(["record", "alpha", "--repo", str(repo), "--evaluate", "--summary", f"x to {x}"]) == 0
    assert "status: accepted" in capsys.readouterr().out
    assert (managed / "alpha.md").is_file(), "autoloop record wrote outside the folder gh-aw saves"
    runner.save(memory, tmp_path / f"runner{number}" / "push-job")
    assert main(["state", "alpha", "--repo", str(repo)]) == 0
    return selection, capsys.readouterr().out, prompt


def test_the_agent_writes_in_the_folder_gh_aw_saves() -> None:
    meta, _ = workflow()
    (memory,) = repo_memories(meta["tools"])
    assert memory.branch == MEMORY_BRANCH
    assert meta["env"]["AUTOLOOP_MEMORY_DIR"] == memory.folder
    clone = next(s for s in meta["steps"] if s["name"] == "Clone repo-memory for scheduling")["run"]
    scheduler = next(s for s in meta["steps"] if s["name"] == "Check which programs are due")
    # The early clone is the scheduler's own folder; gh-aw's `git clone` into its folder must find it free.
    assert scheduler["env"]["AUTOLOOP_MEMORY_DIR"] != memory.folder
    step = next(s for s in meta["steps"] if s["name"] == "Clone repo-memory for scheduling")
    assert step["env"]["AUTOLOOP_MEMORY_DIR"] == scheduler["env"]["AUTOLOOP_MEMORY_DIR"]
    assert 'dir="$AUTOLOOP_MEMORY_DIR"' in clone


def test_two_runs_keep_state_through_gh_aws_save(
    server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first, state, prompt = one_run(1, server, tmp_path, 2, monkeypatch, capsys)
    assert "FEEDBACK-MARK" not in prompt
    saved = git(tmp_path, "--git-dir", str(server / "owner" / "repo.git"), "ls-tree", "-r", "--name-only", MEMORY_BRANCH)
    strategy = (server.parent / "repo" / ".autoloop/programs/alpha/strategy").is_dir()
    kept = [path for path in saved.split() if not path.startswith("traces/alpha/")]
    assert kept == (["alpha.md", "candidates/alpha/1.py", "candidates/alpha/bases.json"] if strategy else ["alpha.md"])
    row = "1" if strategy else "it1"
    # The candidate's row, with its feedback; no sources (gh-aw saves at most max-file-count files in all).
    assert [p for p in saved.split() if p.startswith("traces/alpha/")] == [
        "traces/alpha/replay_env.json", f"traces/alpha/rows/000001-{row}.json", "traces/alpha/tip.txt"]
    assert first["selected"] == "alpha"
    assert "| Iteration Count | 1 |" in state
    branch = git(tmp_path, "--git-dir", str(server / "owner" / "repo.git"), "show", f"{MEMORY_BRANCH}:alpha.md")
    assert "| Iteration Count | 1 |" in branch and "| Best Metric | 2 |" in branch

    second, state, prompt = one_run(2, server, tmp_path, 3, monkeypatch, capsys)
    saved = git(tmp_path, "--git-dir", str(server / "owner" / "repo.git"), "ls-tree", "-r", "--name-only",
                MEMORY_BRANCH)
    row2 = "2" if strategy else "it2"
    # Each later iteration adds its row and its entry in its parent's children index, two files.
    assert {p for p in saved.split() if p.startswith("traces/alpha/")} == {
        "traces/alpha/replay_env.json", f"traces/alpha/rows/000001-{row}.json", f"traces/alpha/rows/000002-{row2}.json",
        f"traces/alpha/children/{row}/000002-{row2}.json", "traces/alpha/tip.txt"}
    if strategy:  # AlphaEvolve's second iteration explores from scratch: no parent, so no parent's feedback
        assert "No parent: write a new candidate from scratch" in prompt and "FEEDBACK-MARK" not in prompt
    else:  # what the first run's evaluation said of its candidate, the second run's parent
        assert "FEEDBACK-MARK: x was 2" in prompt and prompt.index("FEEDBACK-MARK") < prompt.index("## How to reply")
    assert second["selected"] == "alpha" and second["state_file_size_bytes"] > 0  # the scheduler read run 1's record
    assert "| Iteration Count | 2 |" in state and "| Completed | true |" in state
    branch = git(tmp_path, "--git-dir", str(server / "owner" / "repo.git"), "show", f"{MEMORY_BRANCH}:alpha.md")
    assert "| Iteration Count | 2 |" in branch and "| Best Metric | 3 |" in branch
    assert "x to 2" in branch and "x to 3" in branch  # the second run appended to the first's history
    if strategy:
        saved = git(tmp_path, "--git-dir", str(server / "owner" / "repo.git"), "show", f"{MEMORY_BRANCH}:candidates/alpha/2.py")
        assert saved == "x = 3\n" and "### Candidate 2" in branch and "### Candidate 1" in branch


def test_saved_candidate_sources_stay_under_the_file_count_and_the_needed_ones_stay(
    git_repo: Path, run_git: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from autoloop_py.state import file as statefile
    from autoloop_py.state import memory_folder
    from autoloop_py.state.memory_folder import FolderMemory
    from autoloop_py.state.population import population_of

    folder = git_repo / ".autoloop" / "programs" / "alpha"
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(
        program_md("Alpha", "Raise x.", frontmatter={}) + "\n## Evolution Strategy\n\nThis program uses the "
        "**AlphaEvolve** strategy. On every iteration, read `strategy/alphaevolve.md` and follow it literally.\n")
    shutil.copytree(REPO / ".autoloop/programs/groupby_evolve/strategy", folder / "strategy")
    (folder / "code" / "config.yaml").write_text("population_size: 3\narchive_size: 1\n")  # evicts from the 4th
    (folder / "code" / "value.py").write_text("x = 1\n")
    (folder / "code" / "evaluate.py").write_text(EVALUATE)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "program alpha")
    limit = 14
    monkeypatch.setattr(memory_folder, "FILE_LIMIT", limit)
    memory = tmp_path / "repo-memory"
    monkeypatch.setenv("AUTOLOOP_MEMORY_DIR", str(memory))
    values = (5, 2, 7, 3, 9, 4, 8, 6, 11, 1, 12, 10, 14, 13, 16, 15, 18, 17)
    for x in values:
        assert main(["prompt", "alpha", "--repo", str(git_repo)]) == 0
        (folder / "code" / "value.py").write_text(f"x = {x}\n")
        assert main(["record", "alpha", "--repo", str(git_repo), "--evaluate", "--summary", f"x to {x}"]) == 0
    capsys.readouterr()
    files = FolderMemory(memory).list()
    assert len(files) <= limit, files
    state = statefile.parse_state((memory / "alpha.md").read_text(), "alpha.md")
    population = population_of(state, FolderMemory(memory).read)
    saved = {int(found.group(1)) for p in files if (found := re.fullmatch(r"candidates/alpha/(\d+)\.py", p))}
    everything = set(range(1, population.next_id))
    # What the Population reads back or names: its entries (the best among them) and their parents. All stay.
    needed = {c.id for c in population.candidates} | {p for c in population.candidates for p in c.parents}
    assert needed <= saved and max(population.candidates, key=lambda c: c.fitness or 0).fitness == 18
    gone = everything - saved
    assert gone and not gone & needed  # sources went, none that is needed
    assert max(gone) < min(everything - needed - gone, default=max(gone) + 1)  # the oldest went first
    for key in ("candidates/alpha/bases.json", "alpha.md"):
        assert key in files
    assert main(["state", "alpha", "--repo", str(git_repo)]) == 0
    assert f"| Iteration Count | {len(values)} |" in capsys.readouterr().out


# --- every save of a long run ---------------------------------------------------------------------------

ITERATIONS = int(os.environ.get("AUTOLOOP_GHAW_ITERATIONS", "12"))


@dataclass(frozen=True)
class Save:
    """What gh-aw's push job measured of one save: the diff's added bytes and the files it saved."""

    added: int
    files: int


def check_save(memory: RepoMemory, folder: Path) -> Save:
    """Applies gh-aw's save rules to the folder (a clone of the memory branch), commits it; returns the figures."""
    uploaded = [p for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(folder).parts]
    stray = [p.name for p in uploaded if p.suffix.lower() not in memory.allowed_extensions]
    assert not stray, f"gh-aw refuses the whole save: extensions of {stray}"
    names = [p.relative_to(folder).as_posix() for p in uploaded]
    assert all(any(glob_matches(g, n) for g in memory.file_glob) for n in names), "files gh-aw would drop"
    big = [(n, p.stat().st_size) for n, p in zip(names, uploaded) if p.stat().st_size > memory.max_file_size]
    assert not big, f"over max-file-size: {big}"
    assert len(names) <= memory.max_file_count, f"{len(names)} files, over max-file-count"
    git(folder, "add", "-A")
    added = added_bytes(git(folder, "diff", "--cached"))
    assert added <= memory.max_patch_size * PATCH_TOLERANCE, f"the diff adds {added} bytes: gh-aw refuses the save"
    git(folder, "commit", "-q", "--allow-empty", "-m", "Update repo memory from workflow run")
    return Save(added, len(names))


def candidate_source(x: int, rng: random.Random) -> str:
    """Returns a candidate of 15-40 KB that sets x (its helpers make the bulk, different every time)."""
    size = rng.randint(15 * 1024, 40 * 1024)
    lines = [f"x = {x}\n"]
    total = len(lines[0])
    while total < size:
        line = f"def helper_{len(lines)}(a, b):  # {rng.getrandbits(64):016x}\n    return a * {rng.randint(1, 999)} + b\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)


def test_every_save_of_a_long_strategy_run_keeps_gh_aws_rules(
    git_repo: Path, run_git: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from autoloop_py.state import file as statefile
    from autoloop_py.state import memory_folder
    from autoloop_py.state.memory_folder import FolderMemory
    from autoloop_py.state.source_pruning import needed_ids

    meta, _ = workflow()
    (memory,) = repo_memories(meta["tools"])
    folder = git_repo / ".autoloop" / "programs" / "alpha"
    (folder / "code").mkdir(parents=True)
    (folder / "program.md").write_text(
        program_md("Alpha", "Raise x.", frontmatter={}) + "\n## Evolution Strategy\n\nThis program uses the "
        "**AlphaEvolve** strategy. On every iteration, read `strategy/alphaevolve.md` and follow it literally.\n")
    shutil.copytree(REPO / ".autoloop/programs/groupby_evolve/strategy", folder / "strategy")
    (folder / "code" / "value.py").write_text("x = 1\n")
    (folder / "code" / "evaluate.py").write_text(EVALUATE)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "program alpha")
    limit = memory_folder.FILE_LIMIT
    if ITERATIONS < 100:  # a short run never nears 900 files: a smaller folder, so that its pruning runs too
        limit = ITERATIONS + 10
        monkeypatch.setattr(memory_folder, "FILE_LIMIT", limit)
    managed = tmp_path / "repo-memory" / memory.id  # gh-aw's clone of a branch that does not exist yet
    managed.mkdir(parents=True)
    git(managed, "init", "-q", "-b", memory.branch)
    git(managed, "config", "user.name", "github-actions")
    git(managed, "config", "user.email", "actions@example.invalid")
    monkeypatch.setenv("AUTOLOOP_MEMORY_DIR", str(managed))
    rng = random.Random(44)
    saves: list[Save] = []
    written: set[int] = set()
    for x in range(2, ITERATIONS + 2):
        assert main(["prompt", "alpha", "--repo", str(git_repo)]) == 0
        source = candidate_source(x, rng)
        (folder / "code" / "value.py").write_text(source)
        # The cheapest real path: the agent ran the evaluator itself and hands its JSON object to `record`.
        report = tmp_path / "report.json"
        report.write_text(json.dumps({"score": x, "feedback": f"x was {x}"}))
        assert main(["record", "alpha", "--repo", str(git_repo), "--report", str(report), "--summary", f"x to {x}"]) == 0
        written.add(x - 1)
        saves.append(check_save(memory, managed))
        files = FolderMemory(managed).list()
        assert len(files) <= limit
        needed = needed_ids("alpha", FolderMemory(managed).read)
        assert needed is not None
        kept = {int(m.group(1)) for p in files if (m := re.fullmatch(r"candidates/alpha/(\d+)\..*", p))}
        assert needed & written <= kept, "a source the Population reads back was pruned"
        rows = {int(m.group(1)) for p in files if (m := re.fullmatch(r"traces/alpha/rows/(\d+)-.*", p))}
        assert rows and max(written - rows, default=0) < min(rows), "the oldest rows go first"
    capsys.readouterr()
    state = statefile.parse_state((managed / "alpha.md").read_text(), "alpha.md")
    assert state.machine.iteration_count == ITERATIONS
    assert FolderMemory(managed).read(f"candidates/alpha/{ITERATIONS}.py") == source  # the newest, whole
    first = saves[0]
    most_added = max(s.added for s in saves)
    most_files = max(s.files for s in saves)
    assert most_added <= memory.max_patch_size * PATCH_TOLERANCE and most_files <= limit
    with capsys.disabled():
        print(f"\n{ITERATIONS} saves of 15-40 KB candidates: first save {first.added} bytes added, at most "
              f"{most_added} bytes added (gh-aw refuses above {int(memory.max_patch_size * PATCH_TOLERANCE)}), "
              f"at most {most_files} files (limit {limit}, gh-aw's max-file-count {memory.max_file_count})")
