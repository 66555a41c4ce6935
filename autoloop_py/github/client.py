"""GitHub thread of a program: its issue, status comment, iteration comments, one draft PR, steering and CI checks.

PyGithub objects stay inside this module; callers get frozen dataclasses, ints and strings. The bodies
come from github/render.py.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import urllib.parse
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

if TYPE_CHECKING:  # PyGithub and requests are imported when a command talks to GitHub, not at every CLI start
    import github

from autoloop_py.errors import AutoloopError
from autoloop_py.github.agentic_scheduler import DEFAULT_API_URL, WRITE_ASSOCIATIONS
from autoloop_py.github.checks import reduce_checks, run_as_check
from autoloop_py.github.render import DISCLOSURE, STATUS_MARKER, issue_title, pr_title, render_issue, with_disclosure
from autoloop_py.loop.record.ci_gate import CheckResult
from autoloop_py.redact import Redactor
from autoloop_py.redact import from_environment as secrets_of
from autoloop_py.state.parts import utc

logger = logging.getLogger(__name__)

PROGRAM_LABELS = ("autoloop-program", "automation", "autoloop")
COMPLETED_LABEL = "autoloop-completed"
COMMAND = "/autoloop"
DEFAULT_SERVER_URL = "https://github.com"
# Who a workflow's GITHUB_TOKEN writes as; that token may not read GET /user.
ACTIONS_LOGIN = "github-actions[bot]"


_COMMAND_RE = re.compile(re.escape(COMMAND) + r"(?![\w-])[ \t]*(?P<rest>.*)\Z", re.DOTALL)
_PROGRAM_PREFIX_RE = re.compile(r"(?P<name>[A-Za-z0-9][\w.-]*):(?=\s|\Z)\s*(?P<text>.*)\Z", re.DOTALL)

_T = TypeVar("_T")


# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class GitHubSettings:
    """Where autoloop talks to GitHub, read from the Actions environment.

    Attributes:
      repository: `owner/name` of the repository.
      token: the API token.
      api_url: the REST API root (`GITHUB_API_URL`).
      server_url: the web root (`GITHUB_SERVER_URL`), for links.
      run_id: the Actions run id, None outside Actions.
      step_summary: the job summary file (`GITHUB_STEP_SUMMARY`), None outside Actions.
    """

    repository: str
    token: str
    api_url: str = DEFAULT_API_URL
    server_url: str = DEFAULT_SERVER_URL
    run_id: str | None = None
    step_summary: str | None = None

    @property
    def run_url(self) -> str | None:
        """Returns the link to the Actions run, None when there is no run id."""
        if self.run_id is None:
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"


@dataclass(frozen=True)
class Directive:
    """A steering comment on the program issue from a person with write access.

    Attributes:
      author: the commenter's login.
      text: the instructions (for a command, the text after `/autoloop [program:]`).
      created_at: when the comment was written (aware, UTC).
      command: whether it was an `/autoloop` command rather than a plain comment.
    """

    author: str
    text: str
    created_at: datetime
    command: bool


# ---------------------------------------------------------------- pure helpers


def from_environment(environ: Mapping[str, str]) -> GitHubSettings | None:
    """Returns the settings of a GitHub Actions environment, None without a repository and a token.

    The token is GITHUB_TOKEN, or GH_TOKEN (the gh CLI's name) when that is unset.
    """
    repository = environ.get("GITHUB_REPOSITORY", "").strip()
    token = environ.get("GITHUB_TOKEN", "").strip() or environ.get("GH_TOKEN", "").strip()
    if not repository or not token:
        return None
    if repository.count("/") != 1 or "" in repository.split("/"):
        raise AutoloopError(f"GITHUB_REPOSITORY is '{repository}', not 'owner/name'; fix the variable or unset it")
    return GitHubSettings(
        repository=repository,
        token=token,
        api_url=(environ.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
        server_url=(environ.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL).rstrip("/"),
        run_id=environ.get("GITHUB_RUN_ID") or None,
        step_summary=environ.get("GITHUB_STEP_SUMMARY") or None,
    )


def connect(settings: GitHubSettings, **options: Any) -> github.Github:
    """Returns a PyGithub client for the settings; `options` go to `github.Github` (retry, timeouts).

    PyGithub spaces requests (a second between writes) for GitHub's secondary rate limits; an API on this machine
    (a loopback stand-in) has none, so its requests go at once.
    """
    import github

    if urllib.parse.urlsplit(settings.api_url).hostname in ("127.0.0.1", "localhost", "::1"):
        options = {"seconds_between_requests": 0, "seconds_between_writes": 0, **options}
    return github.Github(auth=github.Auth.Token(settings.token), base_url=settings.api_url, **options)


def parse_command(body: str, program: str | None) -> tuple[str | None, str] | None:
    """Returns `(named program, instructions)` of an `/autoloop [program:] text` comment.

    None when the comment does not start with `/autoloop`, or names a program other than `program`.
    A `word:` right after `/autoloop` is always read as a program name.
    """
    found = _COMMAND_RE.match(body.strip())
    if found is None:
        return None
    rest = found["rest"].strip()
    prefixed = _PROGRAM_PREFIX_RE.match(rest)
    if prefixed is None:
        return None, rest
    if program is not None and prefixed["name"] != program:
        return None
    return prefixed["name"], prefixed["text"].strip()


def own_login(gh: github.Github) -> str:
    """Returns the login autoloop writes as: the token's user, or github-actions[bot] for a workflow token."""
    import github

    try:
        return str(gh.get_user().login)
    except github.GithubException as error:
        # An Actions installation token answers 403 "Resource not accessible by integration".
        logger.info("GET /user answered %s; taking the login of a workflow token, %s", error.status, ACTIONS_LOGIN)
        return ACTIONS_LOGIN


def is_own_comment(body: str) -> bool:
    """Returns whether a comment was written by autoloop (a quoted disclosure in a reply does not count)."""
    unquoted = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith(">"))
    return STATUS_MARKER in unquoted or DISCLOSURE in unquoted


# ---------------------------------------------------------------- the thread on GitHub


def _reported(action: str) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """Turns API and network failures of a ProgramThread method into an AutoloopError naming `action`."""

    def decorate(method: Callable[..., _T]) -> Callable[..., _T]:
        @functools.wraps(method)
        def wrapper(self: ProgramThread, *args: Any, **kwargs: Any) -> _T:
            import github
            import requests

            try:
                return method(self, *args, **kwargs)
            except (github.GithubException, requests.RequestException) as error:
                raise AutoloopError(
                    f"GitHub: could not {action} for program '{self.program}' in {self.repo_full_name} "
                    f"({_detail(error)}); check the token and that the workflow grants issues, pull-requests "
                    "and contents write"
                ) from error

        return wrapper

    return decorate


def _detail(error: Exception) -> str:
    import github

    if not isinstance(error, github.GithubException):
        return str(error)
    data = error.data
    if not isinstance(data, dict):
        return f"{error.status} {data}"
    errors = [e.get("message", "") for e in data.get("errors", []) if isinstance(e, dict)]
    return f"{error.status} " + "; ".join(m for m in [str(data.get("message", "")), *errors] if m)


class ProgramThread:
    """One program's issue and draft PR on GitHub.

    Steering trusts the comment's `author_association` only (OWNER, MEMBER, COLLABORATOR). GitHub
    reports a private organisation member as CONTRIBUTOR or NONE to tokens that cannot read the
    membership; such people are ignored rather than looked up one by one.
    """

    def __init__(
        self,
        gh: github.Github,
        repo_full_name: str,
        program: str,
        *,
        issue_number: int | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        # A lazy client builds issue, comment and commit objects without fetching them first.
        self._repo = gh.withLazy(True).get_repo(repo_full_name)
        self._gh = gh
        self._login: str | None = None
        self.repo_full_name = repo_full_name
        self.program = program
        self.issue_number = issue_number
        self._status_comment: Any = None
        self._redactor = redactor if redactor is not None else secrets_of(os.environ)

    def _published(self, markdown: str) -> str:
        """Returns what to post: the text with the AI disclosure, every secret value masked."""
        return self._redactor.text(with_disclosure(markdown))

    @property
    def branch(self) -> str:
        """Returns the program branch, the only head its PR may have."""
        return f"autoloop/{self.program}"

    # -- issue ------------------------------------------------------------------------------------

    @_reported("find or open the program issue")
    def ensure_issue(self, goal: str) -> int:
        """Returns the program issue: the given one, the open `[Autoloop: <name>]` issue, or a new one."""
        if self.issue_number is None:
            self.issue_number = self._find_issue() or self._create_issue(goal)
        return self.issue_number

    @_reported("find the program issue")
    def find_issue(self) -> int | None:
        """Returns the program issue when there is one; never opens one (a read-only token cannot)."""
        if self.issue_number is None:
            self.issue_number = self._find_issue()
        return self.issue_number

    def _find_issue(self) -> int | None:
        """Returns the oldest open issue titled `[Autoloop: <name>]`, labelled ones looked at first."""
        found = self._titled(self._repo.get_issues(state="open", labels=[PROGRAM_LABELS[-1]]))
        # People remove labels; the unfiltered listing still keeps the program to one issue.
        found = found or self._titled(self._repo.get_issues(state="open"))
        if len(found) > 1:
            logger.warning("program '%s' has %d open issues; using #%d", self.program, len(found), found[0])
        return found[0] if found else None

    def _titled(self, listing: Any) -> list[int]:
        """Returns the numbers of the listed issues (not PRs) titled `[Autoloop: <name>]`, in order."""
        title = issue_title(self.program)
        # A listed PR has a `/pull/` html_url; reading `pull_request` would fetch every issue again.
        return sorted(
            issue.number
            for issue in listing
            if (issue.title or "").strip() == title and "/pull/" not in (issue.html_url or "")
        )

    def _create_issue(self, goal: str) -> int:
        body = self._published(render_issue(self.program, goal))
        issue = self._repo.create_issue(issue_title(self.program), body=body, labels=list(PROGRAM_LABELS))
        logger.info("opened program issue #%d for '%s'", issue.number, self.program)
        return int(issue.number)

    def _issue(self) -> Any:
        if self.issue_number is None:
            raise AutoloopError(f"program '{self.program}' has no issue yet; call ensure_issue(goal) first")
        return self._repo.get_issue(self.issue_number)

    # -- comments ---------------------------------------------------------------------------------

    @_reported("update the status comment")
    def update_status(self, markdown: str) -> None:
        """Edits the earliest comment carrying STATUS_MARKER in place, or posts it when there is none."""
        body = self._published(markdown if STATUS_MARKER in markdown else f"{STATUS_MARKER}\n{markdown}")
        if self._status_comment is None:
            self._status_comment = self._find_status_comment()
        if self._status_comment is None:
            self._status_comment = self._issue().create_comment(body)
        elif self._status_comment.body != body:
            self._status_comment.edit(body)

    def _find_status_comment(self) -> Any:
        """Returns autoloop's own earliest status comment; a comment anyone else wrote with the marker is not it."""
        if self._login is None:
            self._login = own_login(self._gh)
        marked = [
            c for c in self._issue().get_comments()
            if STATUS_MARKER in (c.body or "") and c.user is not None and c.user.login == self._login
        ]
        return min(marked, key=lambda c: (c.created_at, c.id), default=None)

    @_reported("post the iteration comment")
    def post_iteration(self, markdown: str) -> None:
        """Posts a new comment for one iteration."""
        self._issue().create_comment(self._published(markdown))

    @_reported("read steering comments")
    def directives(self, since: datetime | None) -> list[Directive]:
        """Returns the steering comments written at or after `since`, oldest first, from people with write access."""
        start = utc(since) if since is not None else None
        comments = self._issue().get_comments(since=start) if start else self._issue().get_comments()
        found = []
        for comment in comments:
            directive = self._directive(comment)
            if directive is not None and (start is None or directive.created_at >= start):
                found.append(directive)
        return found

    def _directive(self, comment: Any) -> Directive | None:
        """Returns a comment as a directive, None when it is ours, a bot's, untrusted, or for another program."""
        body = (comment.body or "").strip()
        if not body or is_own_comment(body) or comment.user.type == "Bot":
            return None
        if (comment.author_association or "").upper() not in WRITE_ASSOCIATIONS:
            logger.info("ignoring comment by %s: no write access (%s)", comment.user.login, comment.author_association)
            return None
        command = parse_command(body, self.program)
        if (command is None and _COMMAND_RE.match(body)) or (command is not None and command[1].lower() == "approve"):
            return None  # another program's command, or `/autoloop approve` (agentic_scheduler.refusal)
        text = command[1] if command is not None else body
        return Directive(comment.user.login, text, utc(comment.created_at), command is not None)

    # -- pull request -----------------------------------------------------------------------------

    @_reported("find, open or update the draft PR")
    def ensure_pr(self, branch: str, title: str, body: str) -> int:
        """Returns the program's one PR: found by head branch, then by title, and updated; else a new draft."""
        if branch != self.branch:
            raise AutoloopError(f"refusing to open a PR from '{branch}': program '{self.program}' uses '{self.branch}'")
        title, body = self._redactor.text(pr_title(self.program, title)), self._published(body)
        pull = self._find_pr()
        if pull is None:
            pull = self._create_pr(title, body)
        if pull.title != title or pull.body != body:
            pull.edit(title=title, body=body)
        return int(pull.number)

    def _find_pr(self) -> Any:
        """Returns the open PR whose head is the program branch, else the oldest titled `[Autoloop: <name>]`."""
        owner = self.repo_full_name.split("/", 1)[0]
        by_head = list(self._repo.get_pulls(state="open", head=f"{owner}:{self.branch}"))
        if by_head:
            return by_head[0]
        prefix = issue_title(self.program)
        titled = [p for p in self._repo.get_pulls(state="open") if (p.title or "").startswith(prefix)]
        pull = min(titled, key=lambda p: p.number, default=None)
        if pull is not None and pull.head.ref != self.branch:
            logger.warning("reusing PR #%d found by title; its head is %s", pull.number, pull.head.ref)
        return pull

    def _create_pr(self, title: str, body: str) -> Any:
        import github

        base = self._repo.default_branch
        try:
            pull = self._repo.create_pull(base=base, head=self.branch, title=title, body=body, draft=True)
        except github.GithubException as error:
            # Another run opened it between our lookup and this request: use theirs.
            found = self._find_pr() if error.status == 422 else None
            if found is None:
                raise
            return found
        logger.info("opened draft PR #%d from %s into %s", pull.number, self.branch, base)
        return pull

    # -- completion and checks --------------------------------------------------------------------

    @_reported("mark the program completed")
    def complete(self, markdown: str) -> None:
        """Posts the target-reached comment and swaps `autoloop-program` for `autoloop-completed`.

        Once the labels are swapped, a repeated call does nothing; the comment goes first, so that a
        job killed in between repeats the comment rather than losing it.
        """
        issue = self._issue()
        labels = {label.name for label in issue.labels}
        if COMPLETED_LABEL in labels and PROGRAM_LABELS[0] not in labels:
            logger.info("program issue #%d is already marked completed", self.issue_number)
            return
        issue.create_comment(self._published(markdown))
        if PROGRAM_LABELS[0] in labels:
            issue.remove_from_labels(PROGRAM_LABELS[0])
        if COMPLETED_LABEL not in labels:
            issue.add_to_labels(COMPLETED_LABEL)

    @_reported("read the checks of a commit")
    def checks(self, sha: str) -> CheckResult:
        """Returns the reduced verdict of a commit's check runs and commit statuses."""
        commit = self._repo.get_commit(sha)
        runs = [run_as_check(run) for run in commit.get_check_runs()]
        combined = commit.get_combined_status()
        statuses = [(s.context, s.state, s.description or "") for s in combined.statuses]
        return reduce_checks(runs, statuses)
