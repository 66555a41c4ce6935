"""Who may define an issue program: its author's write access, who edited its body since, and writers' approvals.

An issue program's `## Evaluation` command runs in CI, so its body must come from someone with write
access. The rule: the body is trusted from the moment a writer stands behind it, and distrusted from
the moment anyone else could have put words in it.

- An issue opened by a writer (author association OWNER, MEMBER or COLLABORATOR) is trusted from the
  start; one opened by anyone else is distrusted from its creation.
- Each edit of the body by someone without write access (read from GitHub's edit history) distrusts
  it again from that edit on; an edit by a writer changes nothing.
- A writer approves the body as it stands by commenting `/autoloop approve` or by (re-)applying the
  `autoloop-program` label; an approval counts when it is newer than the last distrusting event.

When the edit history cannot be read, the program is not run (fail closed).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:  # PyGithub loads only when a command talks to GitHub
    import github

from autoloop_py.github.client import WRITE_ASSOCIATIONS
from autoloop_py.state.parts import utc

log = logging.getLogger(__name__)

WRITE_PERMISSIONS = ("admin", "maintain", "write")
APPROVE_COMMAND = "/autoloop approve"
EDITS_QUERY = """
query($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    issue(number: $number) {
      userContentEdits(last: 100) { totalCount nodes { editedAt editor { login } } }
    }
  }
}
"""


@dataclass(frozen=True)
class Edit:
    """One revision of an issue body (GitHub lists the original as the oldest once a body was edited).

    Attributes:
      editor: who wrote it (None: a deleted account).
      at: when.
    """

    editor: str | None
    at: datetime


@dataclass(frozen=True)
class Approval:
    """A writer standing behind the body as it was at `at`.

    Attributes:
      by: the writer's login.
      at: when they approved.
      how: "comment" (`/autoloop approve`) or "label" (applied `autoloop-program`).
    """

    by: str
    at: datetime
    how: str


@dataclass(frozen=True)
class IssueFacts:
    """What GitHub says about an issue program's body.

    Attributes:
      number: the issue number.
      author: the author's login.
      author_writes: whether the author has write access (by author association).
      created_at: when the issue was opened.
      edits: the body's revisions, any order.
      edits_complete: False when GitHub listed only the newest of more revisions.
      approvals: writers' approvals (comments, labels), any order.
    """

    number: int
    author: str
    author_writes: bool
    created_at: datetime
    edits: tuple[Edit, ...] = ()
    edits_complete: bool = True
    approvals: tuple[Approval, ...] = ()


def distrusted_since(facts: IssueFacts, is_writer: Callable[[str], bool]) -> datetime | None:
    """Returns the time of the last event that put words in the body without a writer (None: never happened)."""
    times = [] if facts.author_writes else [facts.created_at]
    times += [edit.at for edit in facts.edits if edit.editor is None or not is_writer(edit.editor)]
    if not facts.edits_complete and facts.edits:
        # Older revisions were not listed: one of them may be a stranger's.
        times.append(min(edit.at for edit in facts.edits))
    return max(times, default=None)


def refusal(facts: IssueFacts, is_writer: Callable[[str], bool]) -> str | None:
    """Returns why the issue program may not run, None when a writer stands behind its current body."""
    since = distrusted_since(facts, is_writer)
    if since is None or any(approval.at > since for approval in facts.approvals):
        return None
    why = "its author has no write access" if not facts.author_writes else "someone without write access edited it"
    return (f"issue #{facts.number} is not run: {why} (since {since:%Y-%m-%d %H:%M} UTC); a maintainer approves "
            f"the body as it stands by commenting `{APPROVE_COMMAND}` or by applying the `autoloop-program` label again")


def is_approval(body: str | None, association: str | None) -> bool:
    """Returns whether a comment approves the issue body: `/autoloop approve` on its first line, from a writer."""
    first = (body or "").strip().splitlines()[0].strip() if (body or "").strip() else ""
    return first.lower() == APPROVE_COMMAND and (association or "").upper() in WRITE_ASSOCIATIONS


# ---------------------------------------------------------------- GitHub (effects)


class Writers:
    """Answers "has this login write access to the repository?", one API call per login."""

    def __init__(self, repo: Any) -> None:
        self._repo = repo
        self._known: dict[str, bool] = {}

    def __call__(self, login: str) -> bool:
        if login not in self._known:
            import github

            try:
                permission = self._repo.get_collaborator_permission(login)
            except github.GithubException as err:
                log.info("no permission for %s (%s): not a writer", login, err.status)
                permission = "none"
            self._known[login] = permission in WRITE_PERMISSIONS
        return self._known[login]


def facts_of(gh: github.Github, repo: Any, issue: Any, label: str, writers: Writers) -> IssueFacts:
    """Returns what GitHub says about an issue's body: its author, its edit history and writers' approvals."""
    edits, complete = _edits(gh, repo.full_name, issue.number)
    approvals = [
        Approval(c.user.login, utc(c.created_at), "comment")
        for c in issue.get_comments()
        if is_approval(c.body, c.author_association)
    ]
    approvals += [
        Approval(e.actor.login, utc(e.created_at), "label")
        for e in issue.get_events()
        if e.event == "labeled" and e.label is not None and e.label.name == label and e.actor is not None
        and writers(e.actor.login)
    ]
    return IssueFacts(
        number=int(issue.number),
        author=issue.user.login if issue.user else "",
        author_writes=(issue.author_association or "").upper() in WRITE_ASSOCIATIONS,
        created_at=utc(issue.created_at),
        edits=tuple(edits),
        edits_complete=complete,
        approvals=tuple(approvals),
    )


def _edits(gh: github.Github, full_name: str, number: int) -> tuple[list[Edit], bool]:
    """Returns the body's revisions from GitHub's GraphQL edit history, and whether all were listed."""
    owner, name = full_name.split("/", 1)
    _, data = gh.requester.graphql_query(EDITS_QUERY, {"owner": owner, "name": name, "number": number})
    found = data["data"]["repository"]["issue"]["userContentEdits"]
    nodes: Sequence[dict[str, Any]] = found.get("nodes") or []
    edits = [
        Edit((node.get("editor") or {}).get("login"), utc(datetime.fromisoformat(node["editedAt"].replace("Z", "+00:00"))))
        for node in nodes
    ]
    return edits, int(found.get("totalCount") or 0) <= len(edits)
