"""program.md texts for the tests' small programs: one Target, one protected evaluator, a `score` metric."""

from __future__ import annotations

import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Mapping

import pytest

from autoloop_py.program.model import Program, load_program
from autoloop_py.program.playbook import marker_spans

REPO = Path(__file__).parents[1]


def program_md(
    title: str,
    goal: str,
    *,
    frontmatter: Mapping[str, object] | None = None,
    target: tuple[str, ...] = ("code/value.py",),
    protected: tuple[str, ...] = ("code/evaluate.py",),
) -> str:
    """Returns a program.md whose evaluation runs `python3 code/evaluate.py` in the program folder, reading `score`.

    (The command starts at the repository root; it moves to `$AUTOLOOP_PROGRAM_DIR` first.)
    """
    head = "".join(f"{key}: {value}\n" for key, value in (frontmatter or {}).items())
    return (
        (f"---\n{head}---\n\n" if head else "")
        + f"# {title}\n\n## Goal\n\n{goal}\n\n## Target\n\n"
        + "".join(f"- `{path}`\n" for path in target)
        + "\nDo NOT modify:\n"
        + "".join(f"- `{path}`\n" for path in protected)
        + "\n## Evaluation\n\n```bash\ncd \"$AUTOLOOP_PROGRAM_DIR\" && python3 code/evaluate.py\n```\n\nThe metric is `score`. Higher is better.\n"
    )


def small_program(root: Path, name: str = "demo") -> Program:
    """Writes the program `name` (program_md, a `code/value.py`) under root and returns it loaded."""
    folder = root / ".autoloop/programs" / name
    (folder / "code").mkdir(parents=True)
    (folder / "code/value.py").write_text("x = 1\n")
    (folder / "program.md").write_text(program_md(name.title(), "Grow x."))
    return load_program(root, Path(f".autoloop/programs/{name}/program.md"))


def install_strategy_program(
    repo: Path, run_git: Callable[..., str], program: str, strategy: str, pointer: str, config: str
) -> Path:
    """Commits the repository's `program` into repo, running `strategy` with every CUSTOMIZE marker answered.

    The shipped playbook goes to `strategy/<strategy>.md` (+ prompts/), program.md's `## Evolution Strategy`
    becomes pointer, and config becomes `code/config.yaml`.
    """
    target = repo / program
    shutil.copytree(REPO / program, target, ignore=shutil.ignore_patterns("__pycache__"))
    text = (target / "program.md").read_text(encoding="utf-8")
    (target / "program.md").write_text(text[: text.index("## Evolution Strategy")] + pointer, encoding="utf-8")
    return _commit_with_playbook(repo, run_git, target, strategy, config)


def install_tiny_strategy_program(
    repo: Path, run_git: Callable[..., str], folder: str, strategy: str, files: Mapping[str, str], config: str = ""
) -> Path:
    """Commits a small program made of `files` (program.md among them) into repo/folder, running `strategy`.

    program.md gets a `## Evolution Strategy` section pointing to the shipped playbook, installed as in
    install_strategy_program; returns the program folder.
    """
    target = repo / folder
    for path, text in files.items():
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_text(text, encoding="utf-8")
    pointer = (f"\n## Evolution Strategy\n\nThis program uses the **{strategy}** strategy. On every iteration, "
               f"read `strategy/{strategy}.md` and follow it literally.\n")
    with (target / "program.md").open("a", encoding="utf-8") as handle:
        handle.write(pointer)
    _commit_with_playbook(repo, run_git, target, strategy, config)
    return target


# A customised playbook that ships with an example program (its CUSTOMIZE markers need numbers, not prose).
_CUSTOMISED = {"alphaevolve": REPO / ".autoloop/programs/groupby_evolve/strategy"}


def _commit_with_playbook(repo: Path, run_git: Callable[..., str], target: Path, strategy: str, config: str) -> Path:
    """Installs the shipped `strategy` playbook (markers answered) and config.yaml into target, and commits."""
    folder = target / "strategy"
    if strategy in _CUSTOMISED and not folder.exists():
        shutil.copytree(_CUSTOMISED[strategy], folder)
    elif not folder.exists():
        shutil.copytree(REPO / ".autoloop/strategies" / strategy, folder)
        (folder / "CUSTOMIZE.md").unlink()
        (folder / "strategy.md").rename(folder / f"{strategy}.md")
        for path in folder.rglob("*.md"):
            path.write_text(_customised(path.read_text(encoding="utf-8")), encoding="utf-8")
    (target / "code").mkdir(exist_ok=True)
    (target / "code" / "config.yaml").write_text(config, encoding="utf-8")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", f"{strategy} program")
    return repo


def _customised(text: str) -> str:
    """Returns text with every `<CUSTOMIZE…>` marker replaced by a short program-specific answer."""
    out, cursor = [], 0
    for start, end in marker_spans(text):
        out.append(text[cursor:start] + "function minimization of a two-dimensional multimodal function")
        cursor = end
    return "".join(out) + text[cursor:]


@contextmanager
def example_repo(base: Path) -> Iterator[Path]:
    """Yields a fresh repository under base holding the function_minimization example, uncommitted,
    with git's user and system config shut out for as long as the block runs (module-scoped fixtures)."""
    (base / "gitconfig").write_text("")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GIT_CONFIG_GLOBAL", str(base / "gitconfig"))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        root = base / "repo"
        _git(base, "init", "-q", "-b", "main", str(root))
        _git(root, "config", "user.name", "Test User")
        _git(root, "config", "user.email", "test@example.invalid")
        shutil.copytree(REPO / ".autoloop/programs/function_minimization", root / ".autoloop/programs/function_minimization",
                        ignore=shutil.ignore_patterns("__pycache__"))
        yield root


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def without_process_limit(out: str) -> str:
    """Returns `autoloop check` output without its line on how the process limit holds (it depends on the machine)."""
    return "".join(line for line in out.splitlines(keepends=True) if not line.startswith("sandbox: process limit"))
