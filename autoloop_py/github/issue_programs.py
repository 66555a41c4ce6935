"""Issue programs: open GitHub issues labelled `autoloop-program` whose body is a program.md.

Only issues whose body a writer stands behind are programs (issue_trust.py); the others are reported
as refused, never run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from autoloop_py.errors import ProgramError
from autoloop_py.github import issue_trust
from autoloop_py.github.agentic_scheduler import (  # the standalone scheduler's rules are the package's too
    ISSUE_PROGRAMS_DIR,
    OUTPUT_FILE,
    OWN_ISSUE_PREFIX,
    PROGRAM_LABEL,
    IssueProgram,
    assign_slugs,
    slugify_issue_title,
)
from autoloop_py.program.model import Program, load_program

if TYPE_CHECKING:
    import github

logger = logging.getLogger(__name__)

__all__ = ["OWN_ISSUE_PREFIX", "PROGRAM_LABEL", "IssueProgram", "assign_slugs", "slugify_issue_title"]


def discover_issue_programs(
    github: github.Github, repo_full_name: str, taken: Iterable[str] = ()
) -> list[IssueProgram]:
    """Returns the open `autoloop-program` issues of a repository that a writer stands behind, as programs."""
    return discover_all(github, repo_full_name, taken)[0]


def discover_all(
    github: github.Github, repo_full_name: str, taken: Iterable[str] = ()
) -> tuple[list[IssueProgram], list[str]]:
    """Returns (the trusted issue programs in API order, why each other labelled issue is not run).

    Slugs are assigned over every labelled issue, so that approving one later renames no other.
    """
    repo = github.get_repo(repo_full_name)
    issues = [issue for issue in repo.get_issues(state="open", labels=[PROGRAM_LABEL]) if _is_program(issue)]
    slugs = assign_slugs([(issue.number, issue.title or "") for issue in issues], taken)
    writers = issue_trust.Writers(repo)
    trusted, refused = [], []
    for issue in issues:
        why = _refusal(github, repo, issue, writers)
        if why is None:
            trusted.append(IssueProgram(issue.number, issue.title or "", slugs[issue.number], issue.body or ""))
        else:
            logger.warning("%s", why)
            refused.append(why)
    return trusted, refused


def _refusal(github: github.Github, repo: Any, issue: Any, writers: issue_trust.Writers) -> str | None:
    """Returns why the issue may not be a program (None: a writer stands behind it); unreadable facts refuse it."""
    from github import GithubException  # PyGithub loads only when a command talks to GitHub

    try:
        return issue_trust.refusal(issue_trust.facts_of(github, repo, issue, PROGRAM_LABEL, writers), writers)
    except (GithubException, KeyError, TypeError, ValueError) as err:
        return f"issue #{issue.number} is not run: its edit history and approvals could not be read ({err})"


def _is_program(issue: github.Issue.Issue) -> bool:
    """Returns whether a listed issue is a program: not a pull request, not autoloop's own program issue."""
    if (issue.title or "").startswith(OWN_ISSUE_PREFIX):
        logger.info("skipping issue #%s: it is autoloop's program issue, not a program", issue.number)
        return False
    # Reading `issue.pull_request` makes PyGithub fetch every non-PR issue again; the listing's
    # html_url already tells a pull request (`/pull/N`) from an issue (`/issues/N`).
    return "/pull/" not in (issue.html_url or "")


def materialize(root: Path, found: Sequence[IssueProgram], cache: Path) -> tuple[list[Program], list[ProgramError]]:
    """Returns the issue programs loaded as bare programs (bodies written under cache) and their problems.

    Their Target paths are relative to the repository root, like any bare `.md` program's.
    """
    cache.mkdir(parents=True, exist_ok=True)
    programs: list[Program] = []
    problems: list[ProgramError] = []
    for issue in found:
        path = cache / f"{issue.slug}.md"
        path.write_text(issue.body, encoding="utf-8")
        try:
            program = load_program(root, Path(os.path.relpath(path, root)))
        except ProgramError as err:
            problems.append(ProgramError(f"issue #{issue.number}: {err.message}", err.path, err.line))
            continue
        programs.append(dataclasses.replace(program, issue=issue.number))
    return programs, problems


def scheduled(root: Path, environ: Mapping[str, str], taken: Iterable[str]) -> tuple[list[Program], list[ProgramError]]:
    """Returns the issue programs an Agentic Workflows scheduler step wrote to disk, and their problems.

    The agent job has no API token; the scheduler (`python3 -m autoloop_py.github.agentic_scheduler`) wrote each
    body to `<dir>/<slug>.md` and the numbers to `issue_programs` in its JSON. The folder is
    AUTOLOOP_ISSUE_PROGRAMS_DIR, or /tmp/gh-aw/issue-programs inside GitHub Actions; none elsewhere.
    """
    folder_env = environ.get("AUTOLOOP_ISSUE_PROGRAMS_DIR", "").strip()
    if not folder_env and environ.get("GITHUB_ACTIONS") != "true":
        return [], []
    folder = Path(folder_env or ISSUE_PROGRAMS_DIR)
    if not folder.is_dir():
        return [], []
    numbers = _scheduled_numbers(Path(environ.get("AUTOLOOP_OUTPUT", "").strip() or OUTPUT_FILE))
    names = set(taken)
    found = [
        IssueProgram(numbers.get(path.stem, 0), path.stem, path.stem, path.read_text(encoding="utf-8", errors="replace"))
        for path in sorted(folder.glob("*.md"))
        if path.stem not in names
    ]
    programs, problems = materialize(root, found, folder)
    return [dataclasses.replace(p, issue=p.issue or None) for p in programs], problems


def _scheduled_numbers(path: Path) -> dict[str, int]:
    """Returns {slug: issue number} from the scheduler's JSON ({} when absent or unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = data.get("issue_programs") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool)}
