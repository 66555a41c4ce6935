"""Issue programs: open GitHub issues labelled `autoloop-program` whose body is a program.md.

Only issues whose body a writer stands behind are programs; the others are reported as refused, never
run. The rule (an issue program's `## Evaluation` command runs in CI, so its body must come from someone
with write access) and the API calls that read its facts are agentic_scheduler.py's, which must stand
alone; this module sends those calls through PyGithub's requester for the package's commands.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from autoloop_py.errors import ProgramError
from autoloop_py.github import agentic_scheduler
from autoloop_py.github.agentic_scheduler import (  # the standalone scheduler's rules are the package's too
    ISSUE_PROGRAMS_DIR,
    OUTPUT_FILE,
    ApiError,
    IssueProgram,
)
from autoloop_py.program.model import Program, load_program

if TYPE_CHECKING:
    import github

logger = logging.getLogger(__name__)


class _PyGithubApi(agentic_scheduler.RestApi):
    """The scheduler's GitHub calls sent through a PyGithub client (its token, base URL, page size and retries)."""

    def __init__(self, gh: github.Github) -> None:  # no token of its own: the requester holds it
        self._requester = gh.requester
        self.api_url = gh.requester.base_url.rstrip("/")
        self.per_page = gh.per_page

    def request(self, url: str, payload: Mapping[str, Any] | None = None) -> tuple[Any, str | None]:
        from github import GithubException  # PyGithub loads only when a command talks to GitHub

        try:
            headers, data = self._requester.requestJsonAndCheck(
                "GET" if payload is None else "POST", url, input=None if payload is None else dict(payload)
            )
        except GithubException as err:
            raise ApiError(f"{url}: {err}") from err
        return data, headers.get("link")


def discover_all(
    github: github.Github, repo_full_name: str, taken: Iterable[str] = ()
) -> tuple[list[IssueProgram], list[str]]:
    """Returns (the trusted issue programs in API order, why each other labelled issue is not run).

    Raises ApiError when the issues cannot be listed; an issue whose facts cannot be read is refused.
    """
    trusted, refused = agentic_scheduler.issue_programs(_PyGithubApi(github), repo_full_name, taken, logger.info)
    for why in refused:
        logger.warning("%s", why)
    return trusted, refused


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
        IssueProgram(
            numbers.get(path.stem, 0), path.stem, path.stem, path.read_text(encoding="utf-8", errors="replace")
        )
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
